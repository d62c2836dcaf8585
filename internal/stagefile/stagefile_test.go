package stagefile

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flecht-dev/flecht/internal/boundedread/hostile"
)

func TestExampleParses(t *testing.T) {
	s, err := Load("../../examples/count.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if s.ApplicationID != "sensors-count" || s.Kind != KindTransformer || s.Transform.Name != "count" ||
		s.MaxPollRecords != 500 || s.InvalidMessages != InvalidCrash || !s.Template.IsDefault() ||
		time.Duration(s.CommitInterval) != 100*time.Millisecond || s.MaxTransactionRecords != 5000 {
		t.Fatalf("unexpected %+v", s)
	}
	var opts struct {
		OutputTopic string `yaml:"output_topic"`
	}
	if err := s.Transform.DecodeOptions(&opts); err != nil || opts.OutputTopic != "sensors.refined" {
		t.Fatalf("options: %+v %v", opts, err)
	}
	if s.ChangelogTopic() != "sensors-count-changelog" || TransactionalID(s.ApplicationID, 3) != "sensors-count-3" || DLQTopic("raw") != "raw.dlq" {
		t.Error("names differ from docs/contract.md §1")
	}
}

func TestDefaults(t *testing.T) {
	s, err := Parse([]byte("application_id: a\nkind: transformer\ninput_topics: [t]\ntransform: {builtin: passthrough}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if s.MaxPollRecords != DefaultMaxPollRecords || s.InvalidMessages != InvalidCrash || s.StateKey != "{key}" ||
		time.Duration(s.CommitInterval) != 100*time.Millisecond || s.MaxTransactionRecords != DefaultMaxTransactionRecords {
		t.Errorf("defaults: %+v", s)
	}
	if !s.LineageOn() {
		t.Error("lineage is off by default")
	}
	if off, err := Parse([]byte("application_id: a\nkind: transformer\ninput_topics: [t]\ntransform: {builtin: passthrough}\nlineage: false\n")); err != nil || off.LineageOn() {
		t.Errorf("lineage: false: %v, %v", off, err)
	}
	m, err := Parse([]byte("application_id: b\nkind: mqtt\nconfig_topics: [c]\nextract: {builtin: mqtt-relay}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if m.SessionExpiry() != 24*time.Hour {
		t.Errorf("mqtt session expiry default %s", m.SessionExpiry())
	}
	m, err = Parse([]byte("application_id: b\nkind: mqtt\nconfig_topics: [c]\nextract: {builtin: mqtt-relay}\nmqtt: {session_expiry: 2h}\n"))
	if err != nil || m.SessionExpiry() != 2*time.Hour {
		t.Errorf("session_expiry 2h: %v %v", m, err)
	}
}

const mqttBase = "application_id: b\nkind: mqtt\nconfig_topics: [c]\nextract: {builtin: mqtt-relay}\n"

func TestReceiveMaximum(t *testing.T) {
	for in, want := range map[string]int{"": 0, "mqtt: {receive_maximum: 1}\n": 1, "mqtt: {receive_maximum: 65535}\n": 65535} {
		s, err := Parse([]byte(mqttBase + in))
		if err != nil || s.MQTT.ReceiveMax() != want {
			t.Errorf("%q: %v %v, want %d", in, s, err, want)
		}
	}
}

func TestMQTTTLS(t *testing.T) {
	s, err := Parse([]byte(mqttBase + "mqtt: {url: \"mqtts://m:8883\", ca_file: /ca.pem, cert_file: /c.pem, key_file: /c.key}\n"))
	if err != nil || s.MQTT.CAFile != "/ca.pem" || s.MQTT.CertFile != "/c.pem" || s.MQTT.KeyFile != "/c.key" {
		t.Fatalf("%+v %v", s, err)
	}
	// Files without a URL are fine here: the URL may come from --mqtt-url.
	if _, err := Parse([]byte(mqttBase + "mqtt: {ca_file: /ca.pem}\n")); err != nil {
		t.Error(err)
	}
	for in, want := range map[string]string{
		"mqtt: {url: \"mqtts://m\", cert_file: /c.pem}\n":          "cert_file and key_file go together",
		"mqtt: {key_file: /c.key}\n":                               "cert_file and key_file go together",
		"mqtt: {url: \"mqtt://m:1883\", ca_file: /ca.pem}\n":       "need a TLS URL, but url is plain MQTT: write mqtts://",
		"mqtt: {url: \"mqtts://m\", insecure_skip_verify: true}\n": "mqtt: insecure_skip_verify: not verifying the MQTT broker is not offered",
		"mqtt: {url: \"mqtts://bridge:hunter2@m\"}\n":              "mqtt: url: the MQTT URL must not hold a password",
		"mqtt: {url: \"ftp://m\"}\n":                               `scheme "ftp" is not supported`,
	} {
		_, err := Parse([]byte(mqttBase + in))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: want error containing %q, got %v", in, want, err)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%q: the error shows the password: %v", in, err)
		}
	}
}

func TestErrorsNameTheField(t *testing.T) {
	base := "application_id: a\nkind: transformer\ninput_topics: [t]\ntransform: {builtin: count}\n"
	cases := map[string]string{
		"":                                     "empty stage file",
		"kind: transformer\n":                  "application_id is required",
		"application_id: a\n":                  "kind is required",
		base + "invalid_messages: retry\n":     "invalid_messages \"retry\"",
		base + "state_key: \"{device}\"\n":     "unknown placeholder",
		base + "max_poll_records: -1\n":        "max_poll_records",
		base + "commit_interval: 31s\n":        "commit_interval 31s: use 1ms to 30s",
		base + "commit_interval: 500us\n":      "commit_interval 500µs: use 1ms to 30s",
		base + "commit_interval: -1s\n":        "not a duration",
		base + "max_transaction_records: -5\n": "max_transaction_records -5: use 1 or more",
		base + "typo_field: 1\n":               "typo_field",
		base + "standby_replicas: -1\n":        "standby_replicas -1: use 0 to 5",
		base + "standby_replicas: 6\n":         "standby_replicas 6: use 0 to 5",
		mqttBase + "standby_replicas: 1\n":     "standby_replicas: belongs to a transformer",
		base + "state_cleanup_delay: 0s\n":     "state_cleanup_delay 0s: use 1s or more (default 10m0s)",
		base + "state_cleanup_delay: 500ms\n":  "state_cleanup_delay 500ms: use 1s or more",
		mqttBase + "state_cleanup_delay: 1m\n": "state_cleanup_delay: belongs to a transformer",
		base + "lineage: \"yes\"\n":            "line 5: \"yes\" is not true or false",
		base + "lineage: yes\n":                "line 5: \"yes\" is not true or false",
		base + "lineage: \"false\"\n":          "line 5: \"false\" is not true or false",
		base + "lineage: [true]\n":             "line 5: a list or a mapping",
		mqttBase + "lineage: false\n":          "lineage: belongs to a transformer",
		"application_id: a b\nkind: transformer\ninput_topics: [t]\ntransform: {builtin: x}\n":                               "application_id",
		"application_id: a\nkind: transformer\ntransform: {builtin: x}\n":                                                    "needs input_topics",
		"application_id: a\nkind: transformer\ninput_topics: [t, t]\ntransform: {builtin: x}\n":                              "twice",
		"application_id: a\nkind: transformer\ninput_topics: [t]\n":                                                          "needs transform",
		"application_id: a\nkind: extractor\ninput_topics: [t]\nconfig_topics: [c]\nextract: {builtin: x}\n":                 "remove input_topics",
		"application_id: a\nkind: sink\n":                                                                                    "kind \"sink\"",
		base + "secret_fields: [\"a..b\"]\n":                                                                                 "empty segment",
		base + "poll_interval: soon\n":                                                                                       "not a duration",
		mqttBase + "mqtt: {receive_maximum: 0}\n":                                                                            "receive_maximum 0",
		mqttBase + "mqtt: {receive_maximum: 65536}\n":                                                                        "receive_maximum 65536",
		mqttBase + "mqtt: {receive_maximum: -1}\n":                                                                           "1 to 65535",
		base + "intermediate_topics: [u]\n":                                                                                  "intermediate_topics names \"u\", which is not in input_topics",
		"application_id: a\nkind: transformer\ninput_topics: [t, u]\nintermediate_topics: [u, u]\ntransform: {builtin: x}\n": "intermediate_topics lists \"u\" twice",
		// A limit written as 0 is refused with its range; only one left
		// out takes the default.
		base + "max_poll_records: 0\n":                  "max_poll_records 0: use 1 or more (default 500)",
		base + "commit_interval: 0s\n":                  "commit_interval 0s: use 1ms to 30s",
		base + "commit_interval: 0\n":                   "commit_interval 0s: use 1ms to 30s",
		base + "max_transaction_records: 0\n":           "max_transaction_records 0: use 1 or more",
		base + "poll_interval: 0s\n":                    "poll_interval 0s: use a positive duration",
		mqttBase + "mqtt: {session_expiry: 0s}\n":       "session_expiry 0s: use 1s to",
		mqttBase + "mqtt: {session_expiry: 500ms}\n":    "session_expiry 500ms: use 1s to",
		mqttBase + "mqtt: {session_expiry: 1193047h}\n": "session_expiry 1193047h0m0s: use 1s to 1193046h28m15s",
	}
	for in, want := range cases {
		_, err := Parse([]byte(in))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: want error containing %q, got %v", in, want, err)
		}
	}
}

func TestBuiltinOptionsAreStrict(t *testing.T) {
	s, err := Parse([]byte("application_id: a\nkind: transformer\ninput_topics: [t]\ntransform: {builtin: count, output_topic: o, outptu: x}\n"))
	if err != nil {
		t.Fatal(err)
	}
	var opts struct {
		OutputTopic string `yaml:"output_topic"`
	}
	err = s.Transform.DecodeOptions(&opts)
	if err == nil || !strings.Contains(err.Error(), `unknown option "outptu"`) || !strings.Contains(err.Error(), "known: output_topic") {
		t.Fatalf("want the unknown option named and the known ones listed, got %v", err)
	}
	// A builtin without options says so.
	err = s.Transform.DecodeOptions(&struct{}{})
	if err == nil || !strings.Contains(err.Error(), `"outptu"`) || !strings.Contains(err.Error(), "takes no options") {
		t.Fatalf("want the options refused, got %v", err)
	}
}

func TestSecretField(t *testing.T) {
	f, err := ParseSecretField("auth.headers[]:api")
	if err != nil || !f.List || f.Scope != "api" || f.Mode != ModeEncrypted || strings.Join(f.Path, "/") != "auth/headers" {
		t.Fatalf("%+v %v", f, err)
	}
}

// The mode is a third segment, read only when it is a mode word, so every
// spec written before modes existed keeps its meaning.
func TestSecretFieldModes(t *testing.T) {
	for spec, want := range map[string]struct {
		scope string
		mode  SecretMode
		back  string
	}{
		"k":                           {"", ModeEncrypted, "k"},
		"k:api":                       {"api", ModeEncrypted, "k:api"},
		"k:api:encrypted":             {"api", ModeEncrypted, "k:api"},
		"k::encrypted":                {"", ModeEncrypted, "k"},
		"k:api:signed":                {"api", ModeSigned, "k:api:signed"},
		"k:api:encrypted-signed":      {"api", ModeEncryptedSigned, "k:api:encrypted-signed"},
		"k:signed":                    {"signed", ModeEncrypted, "k:signed"}, // a scope named signed, as before
		"k:a:b":                       {"a:b", ModeEncrypted, "k:a:b"},       // a scope with a colon, as before
		"k:a:b:signed":                {"a:b", ModeSigned, "k:a:b:signed"},
		"k:a:signed:encrypted":        {"a:signed", ModeEncrypted, "k:a:signed:encrypted"},
		"k:x:encrypted-signed:signed": {"x:encrypted-signed", ModeSigned, "k:x:encrypted-signed:signed"},
		"k:api:Signed":                {"api:Signed", ModeEncrypted, "k:api:Signed"}, // mode words are exact
	} {
		f, err := ParseSecretField(spec)
		if err != nil || f.Scope != want.scope || f.Mode != want.mode || f.Spec() != want.back {
			t.Errorf("%q: %+v (spec %q) %v, want scope %q mode %s spec %q", spec, f, f.Spec(), err, want.scope, want.mode, want.back)
		}
	}
	for _, spec := range []string{"k::signed", "k::encrypted-signed", ":api:signed"} {
		if f, err := ParseSecretField(spec); err == nil {
			t.Errorf("%q accepted as %+v", spec, f)
		}
	}
	if _, err := ParseSecretField("k::signed"); err == nil || !strings.Contains(err.Error(), "needs a scope") {
		t.Errorf("unscoped signed field: %v", err)
	}
}

// FuzzSecretField: whatever parses renders back (Spec) into the same field.
func FuzzSecretField(f *testing.F) {
	for _, s := range []string{"k", "k:a", "k:a:signed", "k:a:b:encrypted-signed", "k:a:signed:encrypted", "t[]:s:signed", "k::x", "a.b:"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ParseSecretField(s)
		if err != nil {
			return
		}
		b, err := ParseSecretField(a.Spec())
		if err != nil || strings.Join(a.Path, "\x00") != strings.Join(b.Path, "\x00") || a.List != b.List || a.Scope != b.Scope || a.Mode != b.Mode {
			t.Fatalf("%q → %+v → %q → %+v (%v)", s, a, a.Spec(), b, err)
		}
	})
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("application_id: a\nkind: transformer\ninput_topics: [t]\ntransform: {builtin: count, x: [1]}\n"))
	f.Add([]byte("application_id: a\nkind: transformer\ninput_topics: [t]\ntransform: {builtin: count, nested: {a: [1, x]}, every: 1h, fields: &f [a], more: *f}\n"))
	f.Add([]byte("application_id: b\nkind: mqtt\nconfig_topics: [c]\nextract: {builtin: mqtt-relay}\nmqtt: {session_expiry: 2h}\n"))
	f.Add([]byte("application_id: b\nkind: mqtt\nconfig_topics: [c]\nextract: {builtin: mqtt-relay}\nmqtt: {url: \"mqtts://m:8883\", ca_file: /ca.pem, cert_file: /c.pem, key_file: /c.key}\n"))
	f.Add([]byte("application_id: m\nkind: transformer\ninput_topics: [t]\ntransform: {module: x.wasm, sha256: " + strings.Repeat("a", 64) +
		", output_topics: [o], config: {a: [1, {b: 2.5}]}, memory_limit: 16MiB, time_limit: 250ms, stateless: true}\n"))
	for _, b := range hostile.Corpus(f, "*.yaml") {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse(data)
		if err == nil && s.Template == nil {
			t.Fatal("validated stage without a template")
		}
		if err == nil && CheckApplicationID(s.ApplicationID) != nil {
			t.Fatalf("validated stage with application id %q", s.ApplicationID)
		}
		if err != nil && len(err.Error()) > 64<<10 {
			t.Fatalf("an error of %d bytes", len(err.Error()))
		}
		if err == nil && s.Transform != nil {
			var opts struct {
				Topic  string            `yaml:"output_topic"`
				Fields []string          `yaml:"fields"`
				Every  Duration          `yaml:"every"`
				Nested map[string][]int  `yaml:"nested"`
				Rest   map[string]string `yaml:",inline"`
			}
			_ = s.Transform.DecodeOptions(&opts) // must not panic
		}
	})
}

// An error in a builtin's options names the stage file's own line, not a
// line of some re-rendered part of it.
func TestBuiltinOptionErrorsNameTheFileLine(t *testing.T) {
	file := `application_id: a
kind: transformer
input_topics: [t]

# the stage's logic
transform:
  builtin: dedupe
  output_topic: o
  id: meta.id
  horizn: 1h
  max_ids: many
`
	s, err := Parse([]byte(file))
	if err != nil {
		t.Fatal(err)
	}
	var opts struct {
		OutputTopic string   `yaml:"output_topic"`
		ID          string   `yaml:"id"`
		Horizon     Duration `yaml:"horizon"`
		MaxIDs      int      `yaml:"max_ids"`
	}
	err = s.Transform.DecodeOptions(&opts)
	for _, want := range []string{`line 10: unknown option "horizn"`, "horizon, id, max_ids, output_topic"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("want %q in the error, got %v", want, err)
		}
	}
	s, err = Parse([]byte(strings.Replace(file, "  horizn: 1h\n", "", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Transform.DecodeOptions(&opts); err == nil || !strings.Contains(err.Error(), "line 10") {
		t.Errorf("a bad value on line 10: got %v", err)
	}
	// Defaults set before decoding survive for options the file leaves out.
	s, err = Parse([]byte("application_id: a\nkind: transformer\ninput_topics: [t]\ntransform: {builtin: dedupe, id: x}\n"))
	if err != nil {
		t.Fatal(err)
	}
	opts.MaxIDs = 7
	if err := s.Transform.DecodeOptions(&opts); err != nil || opts.MaxIDs != 7 || opts.ID != "x" {
		t.Errorf("defaults: %+v %v", opts, err)
	}
}

// Every example in examples/ is a valid stage file, so the docs cannot rot.
func TestEveryExampleParses(t *testing.T) {
	paths, err := filepath.Glob("../../examples/*.yaml")
	if err != nil || len(paths) < 5 {
		t.Fatalf("examples: %v %v", paths, err)
	}
	for _, p := range paths {
		if _, err := Load(p); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
}

// A -f path that names something else (a huge file, /dev/zero, a
// directory) is refused after a bounded read, never read into memory
// whole, with an error that names it; a missing one says so.
func TestLoadRefusesHostilePaths(t *testing.T) {
	for _, p := range hostile.Paths(t) {
		_, err := Load(p.Path)
		want := "stage file " + p.Path + " is "
		if p.Missing {
			want = "stage file " + p.Path + ": no such file or directory"
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v", p.Name, err)
		}
	}
}

// testdata/hostile holds stage files that must be refused, each with the
// error it must get on its first line.
func TestHostileCorpusIsRefused(t *testing.T) {
	for p, b := range hostile.Corpus(t, "*.yaml") {
		_, err := Load(p)
		if want := hostile.Want(t, b); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: %v, want %q", p, err, want)
		}
	}
}

// An application id names a directory under the state root, so it must be
// one plain path element: . and .. pass Kafka's topic rule (..-changelog
// is a valid topic) but would name the root or its parent.
func TestApplicationIDIsOnePathElement(t *testing.T) {
	for _, id := range []string{".", "..", "../x", "a/b", ""} {
		if ValidApplicationID(id) || CheckApplicationID(id) == nil {
			t.Errorf("%q accepted", id)
		}
	}
	for _, id := range []string{"a", "...", ".a", "a..b", "-x", "0"} {
		if err := CheckApplicationID(id); err != nil {
			t.Errorf("%q: %v", id, err)
		}
	}
	if err := CheckApplicationID(".."); err == nil || !strings.Contains(err.Error(), "not . or ..") {
		t.Errorf("the rule is not said: %v", err)
	}
}

// JoinName refuses every name that is not one plain path element, and an
// empty root, whatever validated the name before.
func TestJoinNameStaysUnderTheRoot(t *testing.T) {
	root := filepath.Join(t.TempDir(), "flecht")
	for _, name := range []string{"", ".", "..", "../x", "a/b", "/abs", `a\b`, "x\x00y", "a/.."} {
		if p, err := JoinName(root, name); err == nil {
			t.Errorf("%q: joined as %s", name, p)
		}
	}
	if p, err := JoinName("", "app"); err == nil {
		t.Errorf("no root: joined as %s", p)
	}
	for _, name := range []string{"app", "0", "...", "a.b-c_d"} {
		p, err := JoinName(root, name)
		if err != nil || filepath.Dir(p) != root || filepath.Base(p) != name {
			t.Errorf("%q: %s %v", name, p, err)
		}
	}
}

// A second YAML document is refused, naming its line; a trailing --- with
// nothing after it holds nothing to ignore.
func TestSecondDocumentIsRefused(t *testing.T) {
	one := "application_id: a\nkind: transformer\ninput_topics: [t]\ntransform: {builtin: count, output_topic: o}\n"
	for _, ok := range []string{one + "---\n", one + "---\n# nothing\n", "---\n" + one, one + "...\n"} {
		if _, err := Parse([]byte(ok)); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	_, err := Parse([]byte(one + "---\napplication_id: b\n"))
	if err == nil || !strings.Contains(err.Error(), "line 5: a second YAML document") {
		t.Errorf("second document: %v", err)
	}
}

// Errors quote what the file says clipped: a 3 MB value is not echoed.
func TestErrorsClipWhatTheyQuote(t *testing.T) {
	long := strings.Repeat("a", 3_000_000)
	for field, file := range map[string]string{
		"application_id": "application_id: " + long + "\nkind: transformer\ninput_topics: [t]\ntransform: {builtin: count}\n",
		"topic":          "application_id: a\nkind: transformer\ninput_topics: [" + long + "x!]\ntransform: {builtin: count}\n",
		"kind":           "application_id: a\nkind: " + long + "\n",
		"state_key":      "application_id: a\nkind: transformer\ninput_topics: [t]\ntransform: {builtin: count}\nstate_key: '{" + long + "'\n",
		"secret_fields":  "application_id: a\nkind: transformer\ninput_topics: [t]\ntransform: {builtin: count}\nsecret_fields: ['" + long + "::signed']\n",
		"duplicate":      "application_id: a\nkind: transformer\ninput_topics: [" + long + "," + long + "]\ntransform: {builtin: count}\n",
	} {
		_, err := Parse([]byte(file))
		if err == nil || len(err.Error()) > 4096 {
			n := 0
			if err != nil {
				n = len(err.Error())
			}
			t.Errorf("%s: an error of %d bytes", field, n)
		}
	}
	_, err := Parse([]byte("application_id: " + long + "\nkind: transformer\ninput_topics: [t]\ntransform: {builtin: count}\n"))
	if err == nil || !strings.Contains(err.Error(), "… (3000000 bytes)") {
		t.Errorf("the clipped id does not say its length: %.200v", err)
	}
}

// A mistyped key is refused with its line, the nearest known key and the
// known ones, in the stage file's words rather than Go's type names; so
// is one inside mqtt: or metrics:.
func TestUnknownFieldSuggestsTheNearest(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"application_id: a\nkind: transformer\ninput_topics: [x]\nmax_pol_records: 5\ntransform: {builtin: count, output_topic: o}\n",
			`line 4: unknown field "max_pol_records" (did you mean max_poll_records? known: application_id,`},
		{"application_id: a\nkind: transformer\ninput_topics: [x]\ntransform: {builtin: count, output_topic: o}\nmetrics: {listne: \":9464\"}\n",
			`line 5: unknown field "listne" (did you mean listen? known: labels, listen)`},
		{"application_id: a\nkind: transformer\ninput_topics: [x]\nzzz: 1\ntransform: {builtin: count, output_topic: o}\n",
			`line 4: unknown field "zzz" (known: application_id,`},
	} {
		_, err := Parse([]byte(c.yaml))
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "stagefile.") {
			t.Errorf("%q: %v, want %q", c.yaml, err, c.want)
		}
	}
}
