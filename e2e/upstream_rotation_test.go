//go:build e2e

package e2e

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/kafkax"
)

// TestUpstreamRotation: a key rotation driven by flecht's commands while a
// stage on the real flechtwerk 0.17 (e2e/upstream/py/config_reader.py)
// reads the keyring file and decrypts ENCRYPTED config fields throughout.
// At every step a probe makes it decrypt every value it holds; not one may
// fail, and after the last step it still starts and decrypts everything
// under the new key alone.
func TestUpstreamRotation(t *testing.T) {
	upstreamRoot(t)
	r := newRotation(t, roundOneFields)
	const oldKid, newKid = "rot-2026-01", "rot-2026-07"
	flecht := func(want int, args ...string) string {
		t.Helper()
		return flechtOK(t, want, append(args, "-b", brokers)...)
	}
	withKeyring := func(args ...string) []string { return append(args, "--keyring", r.keyring) }
	sweepArgs := []string{"--topics", r.cfg, "--field", "api_key:api_key", "--field", "password"}

	flecht(0, withKeyring("keys", "init", "--kid", oldKid)...)
	// Configs from both writers: even ones sealed by flechtctl, odd ones by flecht.
	for i := range 8 {
		r.writeConfig(i, i%2 == 0)
	}
	reader := r.startReader("reader-1")
	r.requireLoaded(reader, oldKid)
	r.probeAll(reader, "start", map[string]int{oldKid: 16})

	// 1. keys add: on disk only; the running reader has not loaded it, and
	// the reader-first gate says so.
	flecht(0, withKeyring("keys", "add", "--kid", newKid)...)
	flecht(4, "keys", "check", "--kid", newKid, "--metrics-url", reader.metricsURL())
	r.probeAll(reader, "after keys add", map[string]int{oldKid: 16})

	// Roll the file out: restart the reader.
	reader.stop()
	reader = r.startReader("reader-2")
	r.requireLoaded(reader, oldKid, newKid)
	flecht(0, "keys", "check", "--kid", newKid, "--metrics-url", reader.metricsURL())
	r.probeAll(reader, "after the rollout", map[string]int{oldKid: 16})

	// 2. keys promote: writers seal under the new key from now on; a config
	// written now (by flechtctl, with the promoted file) opens in the reader.
	flecht(0, withKeyring("keys", "promote", "--kid", newKid)...)
	r.writeConfig(8, true)
	r.probeAll(reader, "after keys promote", map[string]int{oldKid: 16, newKid: 2})

	// 3. the sweep, while the reader runs: it drains the re-encrypted
	// records into its config store and decrypts them.
	flecht(0, withKeyring(append([]string{"secrets", "reencrypt", "--execute"}, sweepArgs...)...)...)
	r.probeUntil(reader, "after secrets reencrypt", map[string]int{newKid: 18})

	// 4. the scan: every value under the new key, every one opens.
	scan := decodeJSON[struct {
		Clean   bool `json:"clean"`
		Entries []struct {
			Key     string `json:"key"`
			Field   string `json:"field"`
			Status  string `json:"status"`
			Kid     string `json:"kid"`
			Decrypt string `json:"decrypt"`
		} `json:"entries"`
	}](t, flecht(0, withKeyring(append([]string{"secrets", "scan", "-o", "json"}, sweepArgs...)...)...))
	if !scan.Clean || len(scan.Entries) != 18 {
		t.Fatalf("scan after the sweep: clean %v, %d entries, want clean with 18", scan.Clean, len(scan.Entries))
	}
	for _, e := range scan.Entries {
		if e.Status != "encrypted" || e.Kid != newKid || e.Decrypt != "ok" {
			t.Errorf("scan: %s %s is %s under %s (%s)", e.Key, e.Field, e.Status, e.Kid, e.Decrypt)
		}
	}

	// 5. keys remove, guarded by a scan of the topic; then roll the file out.
	flecht(0, withKeyring(append([]string{"keys", "remove", "--kid", oldKid}, sweepArgs...)...)...)
	r.probeAll(reader, "after keys remove", map[string]int{newKid: 18})
	reader.stop()
	reader = r.startReader("reader-3")
	r.requireLoaded(reader, newKid)
	if v := reader.metric("flechtwerk_keyring_keys_loaded", `kid="`+oldKid+`"`); v != 0 {
		t.Errorf("the restarted reader still reports %s loaded (%v)", oldKid, v)
	}
	r.probeAll(reader, "restarted on the new key alone", map[string]int{newKid: 18})
	// Its own counter agrees: every value it opened since this start.
	if got := reader.metric("flechtwerk_secret_decrypts_total", `kid="`+newKid+`"`); got != 18 {
		t.Errorf("flechtwerk_secret_decrypts_total{kid=%q} = %v after one probe of 18 values", newKid, got)
	}
	reader.stop()
	t.Logf("rotation %s → %s: %d probes, %d decrypts, 0 failures", oldKid, newKid, r.probes, r.reads)
}

// TestUpstreamRotation017: the 0.17 rotations with a stage on the real
// flechtwerk 0.17 reading a PASSWORD-PROTECTED keyring file throughout
// (config_reader.py opens it with flechtctl's decrypt_keyring), its config
// fields of every mode: api_key ENCRYPTED in scope api (ECDH-ES to that
// scope's X25519 recipient), password ENCRYPTED unscoped (dir under the oct
// primary), endpoint SIGNED in scope api, webhook ENCRYPTED(SIGNED) in
// scope api. First the scope's X25519 key rotates alone (keys add --type
// x25519 --scope api → roll out → keys check → keys promote --scope api →
// secrets reencrypt → scan → keys remove), then the scope's Ed25519 signer
// (keys add --type ed25519 → roll out → keys check → keys signing →
// secrets reencrypt --resign → keys remove). At every step the reader
// reads every value, with not one failure, and its own counters
// (flechtwerk_secret_decrypts_total, flechtwerk_secret_verifications_total)
// agree; after each last step it starts again on what is left. Last, a
// config record of value "" (empty) and one of {} delete their configs in
// the Python stage and in a flecht stage reading the same topic alike.
func TestUpstreamRotation017(t *testing.T) {
	upstreamRoot(t)
	r := newRotation(t, []rotField{{name: "api_key", scope: "api"}, {name: "password"},
		{name: "endpoint", scope: "api", mode: "signed"}, {name: "webhook", scope: "api", mode: "encrypted-signed"}})
	r.protect()
	keys := func(want int, args ...string) { r.flecht(want, r.keyringArgs(append([]string{"keys"}, args...)...)...) }
	keys(0, "init", "--kid", "base-1", "--protect")
	keys(0, "add", "--kid", "api-1", "--type", "x25519", "--scope", "api", "--primary-for", "api")
	keys(0, "add", "--kid", "sig-1", "--type", "ed25519", "--scope", "api", "--signing-for", "api")
	if b, _ := os.ReadFile(r.keyring); bytes.HasPrefix(b, []byte("{")) {
		t.Fatal("the keyring file is not password-protected")
	}
	for i := range 6 {
		r.writeConfig(i, i%2 == 0)
	}
	reader := r.startReader("reader-1")
	r.requireLoaded(reader, "base-1", "api-1", "sig-1")
	// Per config: api_key and webhook under api-1, password under base-1,
	// endpoint and webhook signed by sig-1.
	r.probeAll(reader, "start", map[string]int{"api-1": 12, "base-1": 6, "sig-1": 12})

	// The scope's recipient, reader-first.
	keys(0, "add", "--kid", "api-2", "--type", "x25519", "--scope", "api")
	r.flecht(4, "keys", "check", "--kid", "api-2", "--metrics-url", reader.metricsURL())
	r.probeAll(reader, "after keys add --type x25519 --scope api", map[string]int{"api-1": 12, "base-1": 6, "sig-1": 12})
	reader.stop()
	reader = r.startReader("reader-2")
	r.requireLoaded(reader, "base-1", "api-1", "api-2", "sig-1")
	r.flecht(0, "keys", "check", "--kid", "api-2", "--metrics-url", reader.metricsURL())
	keys(0, "promote", "--kid", "api-2", "--scope", "api")
	// flechtctl seals under the promoted key. The reader's config store
	// takes the record up in its own time: a probe that overtakes it is
	// answered for six configs, so wait until the store has grown.
	stored := reader.metric("flechtwerk_config_store_bytes")
	r.writeConfig(6, true)
	waitUntil(r.t, time.Minute, "reader-2 to take up config 6", func() bool {
		v, err := reader.tryMetric("flechtwerk_config_store_bytes")
		return err == nil && v > stored
	})
	r.probeAll(reader, "after keys promote --scope api", map[string]int{"api-1": 12, "api-2": 2, "base-1": 7, "sig-1": 14})
	r.flecht(0, r.keyringArgs(append([]string{"secrets", "reencrypt", "--execute"}, r.fieldArgs()...)...)...)
	r.probeUntil(reader, "after secrets reencrypt", map[string]int{"api-2": 14, "base-1": 7, "sig-1": 14})
	r.requireScan("after the recipient's sweep", map[string]string{"api_key": "api-2", "password": "base-1", "endpoint": "sig-1", "webhook": "api-2"})
	keys(0, append([]string{"remove", "--kid", "api-1"}, r.fieldArgs()...)...)
	r.probeAll(reader, "after keys remove of the old recipient", map[string]int{"api-2": 14, "base-1": 7, "sig-1": 14})
	reader.stop()
	reader = r.startReader("reader-3")
	r.requireLoaded(reader, "base-1", "api-2", "sig-1")
	r.probeAll(reader, "restarted without the old recipient", map[string]int{"api-2": 14, "base-1": 7, "sig-1": 14})
	// One probe since the start: its own counters say the same, and that
	// nothing was read as plaintext or unsigned.
	r.requireCounted(reader, map[string]float64{
		`flechtwerk_secret_decrypts_total{scope="api",kid="api-2"}`:      14,
		`flechtwerk_secret_decrypts_total{scope="",kid="base-1"}`:        7,
		`flechtwerk_secret_verifications_total{scope="api",kid="sig-1"}`: 14,
		`flechtwerk_secret_decrypts_total{kid="api-1"}`:                  0,
		`flechtwerk_secret_plaintext_reads_total`:                        0,
		`flechtwerk_secret_unsigned_reads_total`:                         0,
	})

	// The scope's signer, reader-first.
	keys(0, "add", "--kid", "sig-2", "--type", "ed25519", "--scope", "api")
	r.flecht(4, "keys", "check", "--kid", "sig-2", "--metrics-url", reader.metricsURL())
	reader.stop()
	reader = r.startReader("reader-4")
	r.requireLoaded(reader, "base-1", "api-2", "sig-1", "sig-2")
	r.flecht(0, "keys", "check", "--kid", "sig-2", "--metrics-url", reader.metricsURL())
	r.probeAll(reader, "after keys add --type ed25519", map[string]int{"api-2": 14, "base-1": 7, "sig-1": 14})
	keys(0, "signing", "--kid", "sig-2", "--scope", "api")
	r.writeConfig(7, false) // flecht signs with the new signer
	r.probeAll(reader, "after keys signing", map[string]int{"api-2": 16, "base-1": 8, "sig-1": 14, "sig-2": 2})
	r.flecht(0, r.keyringArgs(append([]string{"secrets", "reencrypt", "--resign", "--execute"}, r.fieldArgs()...)...)...)
	r.probeUntil(reader, "after secrets reencrypt --resign", map[string]int{"api-2": 16, "base-1": 8, "sig-2": 16})
	r.requireScan("after the signer's sweep", map[string]string{"api_key": "api-2", "password": "base-1", "endpoint": "sig-2", "webhook": "api-2"})
	keys(0, append([]string{"remove", "--kid", "sig-1"}, r.fieldArgs()...)...)
	reader.stop()
	reader = r.startReader("reader-5")
	r.requireLoaded(reader, "base-1", "api-2", "sig-2")
	r.probeAll(reader, "restarted without the old signer", map[string]int{"api-2": 16, "base-1": 8, "sig-2": 16})
	r.requireCounted(reader, map[string]float64{
		`flechtwerk_secret_decrypts_total{scope="api",kid="api-2"}`:      16,
		`flechtwerk_secret_decrypts_total{scope="",kid="base-1"}`:        8,
		`flechtwerk_secret_verifications_total{scope="api",kid="sig-2"}`: 16,
		`flechtwerk_secret_verifications_total{kid="sig-1"}`:             0,
		`flechtwerk_secret_plaintext_reads_total`:                        0,
		`flechtwerk_secret_unsigned_reads_total`:                         0,
	})

	r.deleteConfigs(reader)
	reader.stop()
	t.Logf("rotations api-1 → api-2 (X25519, scope api) and sig-1 → sig-2 (Ed25519) under a protected keyring: %d probes, %d values read, 0 failures", r.probes, r.reads)
}

// requireCounted requires the reader's counters to hold exactly the given
// values (a series it does not export counts 0).
func (r *rotation) requireCounted(p *proc, want map[string]float64) {
	r.t.Helper()
	body := p.scrape()
	for series, v := range want {
		name, labels, _ := strings.Cut(strings.TrimSuffix(series, "}"), "{")
		var pairs []string
		for l := range strings.SplitSeq(labels, ",") {
			if l != "" {
				pairs = append(pairs, l)
			}
		}
		if got := metricValue(body, name, pairs...); got != v {
			r.t.Errorf("%s: %s = %v, want %v", p.name, series, got, v)
		}
	}
}

// requireScan requires flecht's scan of the config topic to be clean with
// every value of each field under the kid given (a signed field's signer).
func (r *rotation) requireScan(step string, kids map[string]string) {
	r.t.Helper()
	scan := decodeJSON[struct {
		Clean   bool `json:"clean"`
		Entries []struct {
			Key    string `json:"key"`
			Field  string `json:"field"`
			Status string `json:"status"`
			Kid    string `json:"kid"`
		} `json:"entries"`
	}](r.t, r.flecht(0, r.keyringArgs(append([]string{"secrets", "scan", "-o", "json"}, r.fieldArgs()...)...)...))
	if want := len(r.keys) * len(r.fields); !scan.Clean || len(scan.Entries) != want {
		r.t.Fatalf("scan %s: clean %v, %d entries, want clean with %d", step, scan.Clean, len(scan.Entries), want)
	}
	for _, e := range scan.Entries {
		status := "encrypted"
		if e.Field == "endpoint" {
			status = "signed"
		}
		if e.Status != status || e.Kid != kids[e.Field] {
			r.t.Errorf("scan %s: %s %s is %s under %s, want %s under %s", step, e.Key, e.Field, e.Status, e.Kid, status, kids[e.Field])
		}
	}
}

// deleteConfigs writes a config record of value "" (an empty value, not a
// null) and one of {}: each deletes its config in the Python stage and in
// a flecht stage reading the same config topic, whose stores then agree
// in entries and bytes.
func (r *rotation) deleteConfigs(py *proc) {
	t := r.t
	t.Helper()
	in, out := topicName(t, "idle"), topicName(t, "idle-out")
	createTopic(t, in, 1, nil)
	createTopic(t, out, 1, nil)
	stage := filepath.Join(t.TempDir(), "stage.yaml")
	if err := os.WriteFile(stage, fmt.Appendf(nil, `application_id: %s
kind: transformer
input_topics: [%s]
config_topics: [%s]
transform:
  builtin: count
  output_topic: %s
`, topicName(t, "app-fl"), in, r.cfg, out), 0o600); err != nil {
		t.Fatal(err)
	}
	fl := startRun(t, stage, "flecht-reader", t.TempDir())
	stores := func(want int) {
		t.Helper()
		var pyN, flN, pyB, flB float64
		waitUntil(t, time.Minute, fmt.Sprintf("both config stores to hold %d entries", want), func() bool {
			pyBody, err1 := py.tryScrape()
			flBody, err2 := fl.tryScrape()
			if err1 != nil || err2 != nil {
				return false
			}
			pyN, flN = metricValue(pyBody, "flechtwerk_config_store_entries"), metricValue(flBody, "flechtwerk_config_store_entries")
			pyB, flB = metricValue(pyBody, "flechtwerk_config_store_bytes"), metricValue(flBody, "flechtwerk_config_store_bytes")
			return pyN == float64(want) && flN == float64(want) && pyB == flB
		})
		t.Logf("config stores: python %v entries, %v bytes; flecht %v entries, %v bytes", pyN, pyB, flN, flB)
	}
	stores(len(r.keys))
	gone := []string{r.keys[0], r.keys[1]}
	r.produce(gone[0], []byte{})
	r.produce(gone[1], []byte("{}"))
	r.keys = r.keys[2:]
	for _, rec := range readAll(t, r.cfg) {
		if string(rec.Key) == gone[0] && rec.Value == nil {
			t.Fatalf("the empty value of %s went out as a null", gone[0])
		}
	}
	stores(len(r.keys))
	for _, res := range r.probeKeys(py, "deleted configs", gone, len(gone)) {
		if res.OK || res.Error != "missing" {
			t.Errorf("the Python stage still reads deleted config %s: %+v", res.Config, res)
		}
	}
	r.probeOnce(py, "after the deletes")
	fl.stop()
}

// rotField is one secret field of the configs, as flecht's --field spells it.
type rotField struct{ name, scope, mode string }

func (f rotField) spec() string {
	spec := f.name
	if f.scope != "" || f.mode != "" {
		spec += ":" + f.scope
	}
	if f.mode != "" {
		spec += ":" + f.mode
	}
	return spec
}

// rotation holds the topics, the keyring and the secrets of a rotation
// test.
type rotation struct {
	t                        *testing.T
	dir, keyring, password   string // password: the password file of a protected keyring, or ""
	fields                   []rotField
	app, cfg, probe, results string
	keys                     []string          // config keys written so far
	plain                    map[string]string // config key + "/" + field → plaintext sha256
	probes, reads            int
	prod                     *kgo.Client
}

// roundOneFields are the fields of the first rotation test: a scoped and
// an unscoped ENCRYPTED field.
var roundOneFields = []rotField{{name: "api_key", scope: "api_key"}, {name: "password"}}

func newRotation(t *testing.T, fields []rotField) *rotation {
	r := &rotation{t: t, dir: upstreamTempDir(t), fields: fields, app: topicName(t, "app"), cfg: topicName(t, "cfg"),
		probe: topicName(t, "probe"), results: topicName(t, "results"), plain: map[string]string{},
		prod: client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))}
	r.keyring = filepath.Join(r.dir, "keyring.json")
	createTopic(t, r.cfg, 3, map[string]string{"cleanup.policy": "compact"})
	createTopic(t, r.probe, 1, nil)
	createTopic(t, r.results, 1, nil)
	return r
}

// protect makes the rotation's keyring a password-protected file: every
// flecht command gets the password file through the environment,
// flechtctl through --password-file, the reader through its own flag.
func (r *rotation) protect() {
	r.password = filepath.Join(r.dir, "keyring-password")
	if err := os.WriteFile(r.password, []byte("a long enough keyring password\n"), 0o600); err != nil {
		r.t.Fatal(err)
	}
}

// flecht runs a flecht command with the keyring's password file and the
// brokers, and fails the test unless it exits want.
func (r *rotation) flecht(want int, args ...string) string {
	r.t.Helper()
	var env []string
	if r.password != "" {
		env = append(env, "FLECHT_KEYRING_PASSWORD_FILE="+r.password)
	}
	out, errOut, code := flechtWithEnv(r.t, env, append(args, "-b", brokers)...)
	if code != want {
		r.t.Fatalf("flecht %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, want, out, errOut)
	}
	return out
}

// keyringArgs are the keyring's flags for flecht (the password comes from
// the environment).
func (r *rotation) keyringArgs(args ...string) []string { return append(args, "--keyring", r.keyring) }

// fieldArgs name the config topic and the secret fields for the sweep, the
// scan and the remove guard.
func (r *rotation) fieldArgs() []string {
	args := []string{"--topics", r.cfg}
	for _, f := range r.fields {
		args = append(args, "--field", f.spec())
	}
	return args
}

// ctl runs flechtctl with the keyring (and its password file).
func (r *rotation) ctl(args ...string) string {
	r.t.Helper()
	args = append(args[:1:1], append([]string{"-k", r.keyring}, args[1:]...)...)
	if r.password != "" {
		args = append(args, "--password-file", r.password)
	}
	return strings.TrimSpace(flechtctl(r.t, r.dir, 0, args...))
}

// writeConfig makes a config's secret values with the current keyring, by
// flechtctl or by flecht, each as its field's mode stores it, and produces
// the record to its key's partition.
func (r *rotation) writeConfig(i int, byUpstream bool) {
	t := r.t
	t.Helper()
	key := fmt.Sprintf("cfg-%02d", i)
	value := map[string]any{"name": key, "url": fmt.Sprintf("https://api.example/%d", i)}
	for _, f := range r.fields {
		secret := fmt.Sprintf("%s-%d-ü😀\"", f.name, i)
		scope := []string{}
		if f.scope != "" {
			scope = []string{"--scope", f.scope}
		}
		var tok string
		switch {
		case byUpstream && f.mode == "signed":
			tok = r.ctl(append([]string{"sign", "--string", secret}, scope...)...)
		case byUpstream && f.mode == "encrypted-signed":
			signed := r.ctl(append([]string{"sign", "--string", secret}, scope...)...)
			tok = r.ctl(append([]string{"encrypt", "--string", signed}, scope...)...)
		case byUpstream:
			tok = r.ctl(append([]string{"encrypt", "--string", secret}, scope...)...)
		case f.mode == "signed":
			tok = r.flechtValue("sign", scope, secret)
		case f.mode == "encrypted-signed":
			tok = r.flechtValue("encrypt", scope, r.flechtValue("sign", scope, secret))
		default:
			tok = r.flechtValue("encrypt", scope, secret)
		}
		value[f.name] = tok
		sum := sha256.Sum256([]byte(secret))
		r.plain[key+"/"+f.name] = hex.EncodeToString(sum[:])
	}
	b, _ := json.Marshal(value)
	r.produce(key, b)
	if !slices.Contains(r.keys, key) {
		r.keys = append(r.keys, key)
	}
}

// flechtValue seals or signs a string value with flecht.
func (r *rotation) flechtValue(verb string, scope []string, s string) string {
	r.t.Helper()
	raw, _ := json.Marshal(s)
	return strings.TrimSpace(r.flecht(0, r.keyringArgs(append(append([]string{"secrets", verb}, scope...), string(raw))...)...))
}

// produce writes a config record to its key's partition (value nil: a
// tombstone).
func (r *rotation) produce(key string, value []byte) {
	r.t.Helper()
	rec := &kgo.Record{Topic: r.cfg, Key: []byte(key), Value: value, Partition: kafkax.Partition([]byte(key), 3)}
	if err := r.prod.ProduceSync(testCtx(r.t, 30*time.Second), rec).FirstErr(); err != nil {
		r.t.Fatal(err)
	}
}

func (r *rotation) startReader(clientID string) *proc {
	r.t.Helper()
	args := []string{"--application-id", r.app, "--bootstrap-servers", brokers, "--client-id", clientID,
		"--keyring", r.keyring, "--config-topic", r.cfg, "--probe-topic", r.probe,
		"--output-topic", r.results, "--metrics-port", strconv.Itoa(freePort(r.t))}
	if r.password != "" {
		args = append(args, "--password-file", r.password)
	}
	for _, f := range r.fields {
		args = append(args, "--field", f.spec())
	}
	return startUpstream(r.t, "python "+clientID, []string{r.dir}, "config_reader.py", args...)
}

// requireLoaded waits for the reader's metrics and requires
// flechtwerk_keyring_keys_loaded to name exactly kids.
func (r *rotation) requireLoaded(p *proc, kids ...string) {
	r.t.Helper()
	var body string
	waitUntil(r.t, time.Minute, p.name+" to serve its metrics", func() bool {
		p.alive()
		var err error
		body, err = p.tryScrape()
		return err == nil && strings.Contains(body, "flechtwerk_keyring_keys_loaded")
	})
	var loaded []string
	for line := range strings.SplitSeq(body, "\n") {
		if strings.HasPrefix(line, "flechtwerk_keyring_keys_loaded{") && strings.HasSuffix(line, " 1.0") {
			_, rest, _ := strings.Cut(line, `kid="`)
			kid, _, _ := strings.Cut(rest, `"`)
			loaded = append(loaded, kid)
		}
	}
	sort.Strings(loaded)
	want := append([]string{}, kids...)
	sort.Strings(want)
	if strings.Join(loaded, ",") != strings.Join(want, ",") {
		r.t.Fatalf("%s reports keys loaded %v, want %v", p.name, loaded, want)
	}
}

// probeResult is one value the reader read (or failed to).
type probeResult struct {
	Probe  int    `json:"probe"`
	Config string `json:"config"`
	Field  string `json:"field"`
	OK     bool   `json:"ok"`
	Kid    string `json:"kid"`    // the sealing kid; a signed field's signer
	Signer string `json:"signer"` // who signed the value, in a signed field
	Error  string `json:"error"`
	Kind   string `json:"kind"`
	SHA256 string `json:"sha256"`
}

// probeKeys asks the reader to read every field of the configs keys and
// returns the results, waiting for want of them.
func (r *rotation) probeKeys(p *proc, step string, keys []string, want int) []probeResult {
	t := r.t
	t.Helper()
	r.probes++
	n := r.probes
	body, _ := json.Marshal(keys)
	rec := &kgo.Record{Topic: r.probe, Key: []byte("probe"), Value: fmt.Appendf(nil, `{"probe":%d,"keys":%s}`, n, body)}
	if err := r.prod.ProduceSync(testCtx(t, 30*time.Second), rec).FirstErr(); err != nil {
		t.Fatal(err)
	}
	var got []probeResult
	waitUntil(t, 2*time.Minute, fmt.Sprintf("%d results of probe %d (%s)", want, n, step), func() bool {
		p.alive()
		got = got[:0]
		for _, rec := range readAll(t, r.results) {
			var res probeResult
			if err := json.Unmarshal(rec.Value, &res); err != nil {
				t.Fatalf("result %s: %v", rec.Value, err)
			}
			if res.Probe == n {
				got = append(got, res)
			}
		}
		return len(got) >= want
	})
	if len(got) != want {
		t.Fatalf("probe %d (%s): %d results, want %d", n, step, len(got), want)
	}
	return got
}

// probeOnce asks the reader to read every field of every config and
// returns how many values it read under each kid: a token's sealing kid
// and a value's signer (both for an encrypted-signed value); any failure
// or wrong value fails the test.
func (r *rotation) probeOnce(p *proc, step string) map[string]int {
	t := r.t
	t.Helper()
	got := r.probeKeys(p, step, r.keys, len(r.fields)*len(r.keys))
	kids := map[string]int{}
	for _, res := range got {
		switch {
		case !res.OK:
			t.Fatalf("probe %d (%s): the reader failed to read %s %s (kid %s): %s (%s)", res.Probe, step, res.Config, res.Field, res.Kid, res.Error, res.Kind)
		case res.SHA256 != r.plain[res.Config+"/"+res.Field]:
			t.Fatalf("probe %d (%s): %s %s read as another value", res.Probe, step, res.Config, res.Field)
		}
		kids[res.Kid]++
		if res.Signer != "" && res.Signer != res.Kid {
			kids[res.Signer]++
		}
	}
	if failed := p.logCount("read FAILED"); failed != 0 {
		t.Fatalf("%s logged %d failed reads", p.name, failed)
	}
	r.reads += len(got)
	return kids
}

// probeAll probes once and requires the values under exactly wantKids.
func (r *rotation) probeAll(p *proc, step string, wantKids map[string]int) {
	r.t.Helper()
	if kids := r.probeOnce(p, step); fmt.Sprint(kids) != fmt.Sprint(wantKids) {
		r.t.Fatalf("%s: the reader decrypted values under %v, want %v", step, kids, wantKids)
	}
}

// probeUntil probes until the reader has taken up the sweep's records
// (its config store is eventually consistent), every probe without a
// failure.
func (r *rotation) probeUntil(p *proc, step string, wantKids map[string]int) {
	r.t.Helper()
	var kids map[string]int
	waitUntil(r.t, 2*time.Minute, step+": the reader to decrypt every value under "+fmt.Sprint(wantKids), func() bool {
		kids = r.probeOnce(p, step)
		return fmt.Sprint(kids) == fmt.Sprint(wantKids)
	})
}
