package profile

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flecht-dev/flecht/internal/boundedread/hostile"
	"github.com/flecht-dev/flecht/internal/exitcode"
)

const sampleConfig = `
current_profile: staging
profiles:
  staging:
    brokers: [kafka-1:9092, kafka-2:9092]
    sasl:
      mechanism: scram-sha-512
      username: flecht
      password_env: STAGING_KAFKA_PASSWORD
    mqtt:
      url: mqtt://mqtt.staging:1883
      username: bridge
      password_file: /run/secrets/mqtt
  prod:
    brokers: [prod-1:9093]
    tls:
      enabled: true
      ca_file: /etc/ca.pem
`

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestPrecedence(t *testing.T) {
	path := writeConfig(t, sampleConfig)
	cases := []struct {
		name        string
		in          Inputs
		wantBrokers string
		wantSource  Source
		wantProfile string
	}{
		{"flag beats all", Inputs{Brokers: "a:1,b:2", Config: path, Getenv: env(map[string]string{EnvBrokers: "e:1"})}, "a:1,b:2", SourceFlag, "staging"},
		{"env beats profile", Inputs{Config: path, Getenv: env(map[string]string{EnvBrokers: "e:1"})}, "e:1", SourceEnv, "staging"},
		{"current profile", Inputs{Config: path, Getenv: env(nil)}, "kafka-1:9092,kafka-2:9092", SourceProfile, "staging"},
		{"--profile beats env profile", Inputs{Config: path, Profile: "prod", Getenv: env(map[string]string{EnvProfile: "staging"})}, "prod-1:9093", SourceProfile, "prod"},
		{"env profile", Inputs{Config: path, Getenv: env(map[string]string{EnvProfile: "prod"})}, "prod-1:9093", SourceProfile, "prod"},
		{"default", Inputs{Getenv: env(map[string]string{"HOME": t.TempDir()})}, DefaultBrokers, SourceDefault, ""},
		{"config via env", Inputs{Getenv: env(map[string]string{EnvConfig: path})}, "kafka-1:9092,kafka-2:9092", SourceProfile, "staging"},
	}
	for _, c := range cases {
		r, err := Resolve(c.in)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := strings.Join(r.Brokers, ","); got != c.wantBrokers || r.BrokersSource != c.wantSource || r.ProfileName != c.wantProfile {
			t.Errorf("%s: brokers %s from %s, profile %q; want %s from %s, profile %q", c.name, got, r.BrokersSource, r.ProfileName, c.wantBrokers, c.wantSource, c.wantProfile)
		}
	}
}

func TestEnvBrokersOverNamedProfileWarn(t *testing.T) {
	path := writeConfig(t, sampleConfig)
	withEnv := env(map[string]string{EnvBrokers: "e:1"})
	for _, c := range []struct {
		in   Inputs
		warn bool
	}{
		{Inputs{Config: path, Profile: "prod", Getenv: withEnv}, true},
		{Inputs{Config: path, Profile: "prod", ProfileSource: SourceArgument, Getenv: withEnv}, true},
		{Inputs{Config: path, Getenv: withEnv}, false},                                  // current_profile
		{Inputs{Config: path, Profile: "prod", Brokers: "f:1", Getenv: withEnv}, false}, // the flag wins anyway
		{Inputs{Config: path, Profile: "prod", Getenv: env(nil)}, false},                // no env brokers
		{Inputs{Config: path, Getenv: env(map[string]string{EnvBrokers: "e:1", EnvProfile: "prod"})}, false},
	} {
		r, err := Resolve(c.in)
		if err != nil {
			t.Fatal(err)
		}
		if got := len(r.Warnings) > 0; got != c.warn {
			t.Errorf("%+v: warnings %q, want some: %v", c.in, r.Warnings, c.warn)
		}
	}
}

func TestProfileContents(t *testing.T) {
	r, err := Resolve(Inputs{Config: writeConfig(t, sampleConfig), Getenv: env(nil)})
	if err != nil {
		t.Fatal(err)
	}
	if r.SASL == nil || r.SASL.Mechanism != "SCRAM-SHA-512" || r.SASL.Env != "STAGING_KAFKA_PASSWORD" {
		t.Errorf("sasl not resolved or mechanism not normalised: %+v", r.SASL)
	}
	if r.MQTT == nil || r.MQTT.File != "/run/secrets/mqtt" {
		t.Errorf("mqtt not resolved: %+v", r.MQTT)
	}
}

func TestUnknownProfileNamesTheChoices(t *testing.T) {
	_, err := Resolve(Inputs{Config: writeConfig(t, sampleConfig), Profile: "qa", Getenv: env(nil)})
	if !errors.Is(err, ErrUnknownProfile) || !strings.Contains(err.Error(), "prod, staging") {
		t.Fatalf("want unknown profile listing prod, staging; got %v", err)
	}
}

func TestMissingFiles(t *testing.T) {
	// A config file the user named must exist: a usage error (exit 2)
	// naming it, as for a stage file, a keyring and a password file.
	nope := filepath.Join(t.TempDir(), "nope.yaml")
	_, err := Resolve(Inputs{Config: nope, Getenv: env(nil)})
	if err == nil || err.Error() != "config file "+nope+": no such file or directory" || exitcode.Code(err) != exitcode.Usage {
		t.Fatalf("want a usage error naming the file, got %v (exit %d)", err, exitcode.Code(err))
	}
	// So must a password file a profile names.
	if _, err := (Password{File: nope}).Resolve(env(nil)); err == nil || err.Error() != "password file "+nope+": no such file or directory" || exitcode.Code(err) != exitcode.Usage {
		t.Fatalf("missing password file: %v (exit %d)", err, exitcode.Code(err))
	}
	// The default one may be absent.
	if _, err := Resolve(Inputs{Getenv: env(map[string]string{"XDG_CONFIG_HOME": t.TempDir()})}); err != nil {
		t.Fatalf("absent default config must be fine: %v", err)
	}
}

func TestStrictParsing(t *testing.T) {
	bad := map[string]string{
		"typo":                 "profiles:\n  a:\n    broker: [x:1]\n",
		"mechanism":            "profiles:\n  a:\n    sasl: {mechanism: GSSAPI, username: u, password_env: P}\n",
		"no password":          "profiles:\n  a:\n    sasl: {mechanism: PLAIN, username: u}\n",
		"both passwords":       "profiles:\n  a:\n    sasl: {mechanism: PLAIN, username: u, password_env: P, password_file: f}\n",
		"tls not enabled":      "profiles:\n  a:\n    tls: {ca_file: /etc/ca.pem}\n",
		"tls disabled w/ cert": "profiles:\n  a:\n    tls: {enabled: false, cert_file: c, key_file: k}\n",
		"cert without key":     "profiles:\n  a:\n    tls: {enabled: true, cert_file: c}\n",
		"dangling current":     "current_profile: b\nprofiles:\n  a: {}\n",
		"not yaml":             "profiles: [",
		"mqtt without url":     "profiles:\n  a:\n    mqtt: {username: u}\n",
		"empty broker":         "profiles:\n  a:\n    brokers: ['']\n",
		"password as value":    "profiles:\n  a:\n    sasl: {mechanism: PLAIN, username: u, password: hunter2}\n",
		"password in mqtt url": "profiles:\n  a:\n    mqtt: {url: 'mqtt://b:hunter2@m:1883'}\n",
		"empty mqtt password":  "profiles:\n  a:\n    mqtt: {url: 'mqtt://b:@m:1883'}\n",
		"mqtt url unparsable":  "profiles:\n  a:\n    mqtt: {url: 'mqtt://b:hunter2@m:1883/%zz'}\n",
	}
	for name, body := range bad {
		if _, err := Parse([]byte(body)); err == nil {
			t.Errorf("%s: accepted %q", name, body)
		} else if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: error echoes a secret: %v", name, err)
		}
	}
	for _, ok := range []string{"profiles:\n  a:\n    tls: {enabled: false}\n", "profiles:\n  a:\n    tls: {enabled: true}\n"} {
		if _, err := Parse([]byte(ok)); err != nil {
			t.Errorf("refused %q: %v", ok, err)
		}
	}
	if _, err := Parse([]byte("profiles:\n  a:\n    tls: {ca_file: /etc/ca.pem}\n")); err == nil || !strings.Contains(err.Error(), "enabled: true") {
		t.Errorf("tls files without enabled: want a hint to set enabled: true, got %v", err)
	}
	if f, err := Parse(nil); err != nil || len(f.Profiles) != 0 {
		t.Errorf("empty file: %v %v", f, err)
	}
}

// A password in the MQTT URL is refused with the way to do it instead.
func TestMQTTURLPasswordPointsToPasswordSource(t *testing.T) {
	_, err := Parse([]byte("profiles:\n  a:\n    mqtt: {url: 'mqtt://bridge:hunter2@m:1883'}\n"))
	if err == nil || !strings.Contains(err.Error(), "password_env") || !strings.Contains(err.Error(), "password_file") {
		t.Fatalf("want a refusal naming password_env/password_file, got %v", err)
	}
	// A user name alone is no secret.
	if _, err := Parse([]byte("profiles:\n  a:\n    mqtt: {url: 'mqtt://bridge@m:1883'}\n")); err != nil {
		t.Errorf("user without password refused: %v", err)
	}
}

// Whatever URL reaches output, its password does not.
func TestMQTTURLRedactedInOutput(t *testing.T) {
	m := &MQTT{URL: "mqtts://bridge:hunter2@m:8883", Username: "bridge", Password: Password{Env: "PW"}}
	b, err := json.Marshal(&Resolved{MQTT: m})
	if err != nil || strings.Contains(string(b), "hunter2") || !strings.Contains(string(b), `"url":"mqtts://bridge:xxxxx@m:8883"`) || !strings.Contains(string(b), `"password_env":"PW"`) {
		t.Errorf("json: %v %s", err, b)
	}
	if got := RedactURL("mqtt://b:hunter2@m:1883/%zz"); strings.Contains(got, "hunter2") {
		t.Errorf("unparsable URL shown: %s", got)
	}
	if got := RedactURL("mqtt://m:1883"); got != "mqtt://m:1883" {
		t.Errorf("plain URL changed: %s", got)
	}
}

func TestPasswordResolve(t *testing.T) {
	p := Password{Env: "PW"}
	if v, err := p.Resolve(env(map[string]string{"PW": "s3"})); err != nil || v != "s3" {
		t.Errorf("env password: %q %v", v, err)
	}
	if _, err := p.Resolve(env(nil)); err == nil || !strings.Contains(err.Error(), "PW") {
		t.Errorf("unset env must name the variable: %v", err)
	}
	f := filepath.Join(t.TempDir(), "pw")
	os.WriteFile(f, []byte("from-file\n"), 0o600)
	if v, err := (Password{File: f}).Resolve(env(nil)); err != nil || v != "from-file" {
		t.Errorf("file password: %q %v", v, err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(sampleConfig))
	for _, b := range hostile.Corpus(f, "*.yaml") {
		f.Add(b)
	}
	f.Add([]byte("profiles: {a: {brokers: [x]}}"))
	f.Add([]byte("profiles: {a: {mqtt: {url: \"mqtts://m:8883\", tls: {enabled: true, ca_file: /ca.pem, cert_file: /c.pem, key_file: /c.key}}}}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _ = Parse(data)
	})
}

// A --config or password_file that names something else (/dev/zero, a
// huge file, a directory) is refused after a bounded read, as a usage
// error naming the file and the limit.
func TestHostilePathsAreRefused(t *testing.T) {
	for _, p := range hostile.Paths(t) {
		_, err := Resolve(Inputs{Config: p.Path, Getenv: env(nil)})
		if err == nil || !strings.HasPrefix(err.Error(), "config file "+p.Path) || exitcode.Code(err) != exitcode.Usage {
			t.Errorf("config %s: %v", p.Name, err)
		}
		if !p.Missing && p.Name != "directory" && !strings.Contains(err.Error(), "larger than 1 MiB") {
			t.Errorf("config %s: the limit is not named: %v", p.Name, err)
		}
		_, err = (Password{File: p.Path}).Resolve(env(nil))
		if err == nil || !strings.HasPrefix(err.Error(), "password file "+p.Path) || exitcode.Code(err) != exitcode.Usage {
			t.Errorf("password %s: %v", p.Name, err)
		}
	}
}

// testdata/hostile holds config files that must be refused, each with the
// error it must get on its first line; what the errors quote is clipped.
func TestHostileConfigsAreRefused(t *testing.T) {
	for p, b := range hostile.Corpus(t, "*.yaml") {
		_, err := Resolve(Inputs{Config: p, Getenv: env(nil)})
		if want := hostile.Want(t, b); err == nil || !strings.Contains(err.Error(), want) || len(err.Error()) > 1024 {
			t.Errorf("%s: %.300v, want %q", p, err, want)
		}
	}
}

// A password file that group or others may read is used, with a warning
// that names it and says chmod 600; a private one warns nothing.
func TestWorldReadablePasswordFileWarns(t *testing.T) {
	pw := filepath.Join(t.TempDir(), "kafka-pw")
	if err := os.WriteFile(pw, []byte("s3cret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chmod(pw, 0o644)
	cfg := writeConfig(t, "profiles:\n  p:\n    sasl: {mechanism: PLAIN, username: u, password_file: "+pw+"}\n    mqtt: {url: mqtt://m:1883, password_file: "+pw+"}\n")
	r, err := Resolve(Inputs{Config: cfg, Profile: "p", Getenv: env(nil)})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Warnings) != 2 || !strings.Contains(r.Warnings[0], "password file "+pw+" has mode 0644") || !strings.Contains(r.Warnings[0], "chmod 600 "+pw) {
		t.Errorf("warnings %q", r.Warnings)
	}
	os.Chmod(pw, 0o600)
	if r, err = Resolve(Inputs{Config: cfg, Profile: "p", Getenv: env(nil)}); err != nil || len(r.Warnings) != 0 {
		t.Errorf("a private file: %q %v", r.Warnings, err)
	}
}

// A config file open to group or others warns when it holds what they
// could misuse (SASL or MQTT login settings, insecure_skip_verify), as a
// keyring or a password file does; one holding only addresses does not.
func TestOpenConfigFileWithCredentialsWarns(t *testing.T) {
	for name, c := range map[string]struct {
		body, holds string
	}{
		"sasl":     {"profiles:\n  p:\n    sasl: {mechanism: PLAIN, username: u, password_env: P}\n", `SASL settings (profile "p")`},
		"insecure": {"profiles:\n  p:\n    tls: {enabled: true, insecure_skip_verify: true}\n", `insecure_skip_verify (profile "p")`},
		"mqtt":     {"profiles:\n  p:\n    mqtt: {url: mqtt://m:1883, username: b, password_env: P}\n", `MQTT login settings (profile "p")`},
		"other":    {"profiles:\n  p: {brokers: [k:9092]}\n  q:\n    sasl: {mechanism: PLAIN, username: u, password_env: P}\n", `SASL settings (profile "q")`},
		"plain":    {"profiles:\n  p: {brokers: [k:9092]}\n", ""},
	} {
		cfg := writeConfig(t, c.body)
		for _, mode := range []os.FileMode{0o644, 0o666, 0o640} {
			if err := os.Chmod(cfg, mode); err != nil {
				t.Fatal(err)
			}
			r, err := Resolve(Inputs{Config: cfg, Profile: "p", Getenv: env(nil)})
			if err != nil {
				t.Fatal(err)
			}
			warned := strings.Join(r.Warnings, "\n")
			if c.holds == "" {
				if warned != "" {
					t.Errorf("%s %04o: warnings %q for a file holding no credentials", name, mode, warned)
				}
				continue
			}
			if !strings.Contains(warned, "config file "+cfg) || !strings.Contains(warned, c.holds) || !strings.Contains(warned, "chmod 600 "+cfg) {
				t.Errorf("%s %04o: warnings %q, want one naming the file, %s and the fix", name, mode, warned, c.holds)
			}
		}
		if err := os.Chmod(cfg, 0o600); err != nil {
			t.Fatal(err)
		}
		if r, err := Resolve(Inputs{Config: cfg, Profile: "p", Getenv: env(nil)}); err != nil || len(r.Warnings) != 0 {
			t.Errorf("%s 0600: %q %v", name, r.Warnings, err)
		}
	}
}

// A second YAML document would be ignored: it is refused with its line,
// as in a stage file; a trailing --- is not a document.
func TestSecondDocumentIsRefused(t *testing.T) {
	_, err := Parse([]byte("profiles:\n  a: {brokers: [k:1]}\n---\nprofiles:\n  b: {brokers: [k:2]}\n"))
	if err == nil || !strings.Contains(err.Error(), "line 3: a second YAML document") {
		t.Errorf("two documents: %v", err)
	}
	if _, err := Parse([]byte("profiles:\n  a: {brokers: [k:1]}\n---\n")); err != nil {
		t.Errorf("a trailing ---: %v", err)
	}
	cfg := writeConfig(t, "profiles:\n  a: {brokers: [k:1]}\n---\ncurrent_profile: a\n")
	if _, err := Resolve(Inputs{Config: cfg, Getenv: env(nil)}); err == nil || !strings.Contains(err.Error(), "config file "+cfg) {
		t.Errorf("--config with two documents: %v", err)
	}
}

// Brokers that are only separators are a usage error (exit 2), from the
// flag or the environment.
func TestEmptyBrokerListIsAUsageError(t *testing.T) {
	for _, in := range []Inputs{
		{Brokers: ",", Getenv: env(nil)},
		{Brokers: " , ", Getenv: env(nil)},
		{Getenv: env(map[string]string{EnvBrokers: ","})},
	} {
		_, err := Resolve(in)
		if err == nil || exitcode.Code(err) != exitcode.Usage || !strings.Contains(err.Error(), "no broker address given") {
			t.Errorf("%+v: %v (exit %d)", in.Brokers, err, exitcode.Code(err))
		}
	}
}
