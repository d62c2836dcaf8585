package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flecht-dev/flecht/internal/boundedread/hostile"
	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/profile"
	"github.com/flecht-dev/flecht/internal/ui"
)

// writeProfiles writes a config file under a fresh XDG_CONFIG_HOME and
// returns the environment that finds it.
func writeProfiles(t *testing.T, body string) map[string]string {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "flecht", "config.yaml")
	if err := os.MkdirAll(filepath.Dir(cfg), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return map[string]string{"XDG_CONFIG_HOME": dir}
}

// Every profile in `profile list -o json` has every key, set or not.
func TestProfileListJSONAlwaysHasEveryKey(t *testing.T) {
	env := writeProfiles(t, `profiles:
  bare: {}
  full:
    brokers: [k:9092]
    tls: {enabled: true}
    sasl: {mechanism: PLAIN, username: u, password_env: PW}
    mqtt: {url: "mqtt://m:1883"}
`)
	r := run(t, env, "", "profile", "list", "-o", "json")
	var list struct {
		Profiles []map[string]any `json:"profiles"`
	}
	if err := json.Unmarshal([]byte(r.out), &list); err != nil || len(list.Profiles) != 2 {
		t.Fatalf("exit %d %v: %s", r.code, err, r.out)
	}
	for _, p := range list.Profiles {
		for _, key := range []string{"name", "current", "brokers", "tls", "sasl", "mqtt"} {
			if v, ok := p[key]; !ok || v == nil {
				t.Errorf("profile %v: key %q missing or null", p["name"], key)
			}
		}
	}
}

// `profile show -o json` has every key even with no profile and no config.
func TestProfileShowJSONAlwaysHasEveryKey(t *testing.T) {
	r := run(t, nil, "", "profile", "show", "-o", "json")
	var got map[string]any
	if err := json.Unmarshal([]byte(r.out), &got); err != nil {
		t.Fatalf("exit %d %v: %s", r.code, err, r.out)
	}
	for _, key := range []string{"config_path", "config_found", "profile", "profile_source", "brokers", "brokers_source", "tls", "sasl", "mqtt", "mqtt_connection", "available_profiles"} {
		if _, ok := got[key]; !ok {
			t.Errorf("key %q missing from %v", key, got)
		}
	}
}

const twoProfiles = `current_profile: dev
profiles:
  dev: {brokers: [d:9092]}
  prod: {brokers: [p:9092]}
`

// An unknown profile is a usage error that lists the known ones, however
// it was named.
func TestUnknownProfileExits2ListingKnown(t *testing.T) {
	env := writeProfiles(t, twoProfiles)
	for _, args := range [][]string{{"--profile", "qa", "cluster"}, {"profile", "show", "qa"}, {"--profile", "qa", "profile", "show"}} {
		r := run(t, env, "", args...)
		if r.code != exitcode.Usage || !strings.Contains(r.err, `unknown profile "qa"`) || !strings.Contains(r.err, "dev, prod") {
			t.Errorf("%v: exit %d %q", args, r.code, r.err)
		}
	}
	env[profile.EnvProfile] = "qa"
	if r := run(t, env, "", "profile", "show"); r.code != exitcode.Usage {
		t.Errorf("%s=qa: exit %d %q", profile.EnvProfile, r.code, r.err)
	}
}

// FLECHT_BROKERS beating a profile named on purpose deserves a warning;
// with the profile chosen by the config file it is the documented default.
func TestEnvBrokersOverridingNamedProfileWarns(t *testing.T) {
	env := writeProfiles(t, twoProfiles)
	env[profile.EnvBrokers] = "e:9092"
	const warning = `warning: FLECHT_BROKERS overrides the brokers of profile "prod"`
	for _, args := range [][]string{{"--profile", "prod", "profile", "show"}, {"profile", "show", "prod"}} {
		r := run(t, env, "", args...)
		if r.code != 0 || strings.Count(r.err, warning) != 1 || strings.Count(r.err, "\n") != 1 {
			t.Errorf("%v: want one warning line, got exit %d %q", args, r.code, r.err)
		}
		if !strings.Contains(r.out, "e:9092 (from env)") {
			t.Errorf("%v: env brokers not used: %s", args, r.out)
		}
	}
	for _, args := range [][]string{{"profile", "show"}, {"--profile", "prod", "-b", "f:1", "profile", "show"}} {
		if r := run(t, env, "", args...); r.err != "" {
			t.Errorf("%v: no warning expected, got %q", args, r.err)
		}
	}
}

// `profile show NAME` says the profile came from the argument, not a flag.
func TestProfileShowArgumentSource(t *testing.T) {
	env := writeProfiles(t, twoProfiles)
	if r := run(t, env, "", "profile", "show", "prod"); !strings.Contains(r.out, "prod (argument)") {
		t.Errorf("table: %s", r.out)
	}
	if r := run(t, env, "", "profile", "show", "prod", "-o", "json"); !strings.Contains(r.out, `"profile_source": "argument"`) {
		t.Errorf("json: %s", r.out)
	}
	if r := run(t, env, "", "--profile", "prod", "profile", "show"); !strings.Contains(r.out, "prod (from flag)") {
		t.Errorf("flag: %s", r.out)
	}
}

// The runF hooks receive the parsed inputs, and `profile show NAME` leaves
// the factory's --profile alone.
func TestProfileAndCompletionRunF(t *testing.T) {
	io, _, _, _ := ui.Test()
	f := &Factory{IO: io, Getenv: func(string) string { return "" }}
	var got *ProfileOptions
	capture := func(o *ProfileOptions) error { got = o; return nil }

	show := NewCmdProfileShow(f, capture)
	show.SetArgs([]string{"prod"})
	if err := show.Execute(); err != nil || got == nil || got.Name != "prod" || f.Profile != "" {
		t.Fatalf("show: %v %+v, factory profile %q", err, got, f.Profile)
	}
	got = nil
	list := NewCmdProfileList(f, capture)
	list.SetArgs([]string{})
	if err := list.Execute(); err != nil || got == nil || got.Name != "" {
		t.Fatalf("list: %v %+v", err, got)
	}

	var comp *CompletionOptions
	cmd := NewCmdCompletion(f, func(o *CompletionOptions) error { comp = o; return nil })
	cmd.SetArgs([]string{"zsh"})
	if err := cmd.Execute(); err != nil || comp == nil || comp.Shell != "zsh" || comp.Root == nil {
		t.Fatalf("completion: %v %+v", err, comp)
	}
}

// A --config, or a password_file a profile names, that is something else
// (/dev/zero, a huge file, a directory, links to them) is refused after a
// bounded read, exit 2, naming the file, where /dev/zero crashed the
// process out of memory; a missing one is exit 2 naming it, as a missing
// stage file is.
func TestProfileHostilePaths(t *testing.T) {
	for _, p := range hostile.Paths(t) {
		r := run(t, nil, "", "--config", p.Path, "profile", "list")
		if r.code != exitcode.Usage || !strings.Contains(r.err, "config file "+p.Path) {
			t.Errorf("--config %s: exit %d %q", p.Name, r.code, r.err)
		}
		env := writeProfiles(t, "profiles:\n  p:\n    sasl: {mechanism: PLAIN, username: u, password_file: "+p.Path+"}\n")
		env["FLECHT_BROKERS"] = "127.0.0.1:1"
		r = run(t, env, "", "--profile", "p", "status", "app", "--input-topics", "t")
		if r.code != exitcode.Usage || !strings.Contains(r.err, "password file "+p.Path) {
			t.Errorf("sasl.password_file %s: exit %d %q", p.Name, r.code, r.err)
		}
	}
}

// A password file a profile names that group or others may read is used,
// with a warning on standard error naming it and chmod 600.
func TestProfilePasswordFileModeWarns(t *testing.T) {
	pw := writeFile(t, "kafka-pw", "s3cret\n")
	os.Chmod(pw, 0o644)
	env := writeProfiles(t, "profiles:\n  p:\n    sasl: {mechanism: PLAIN, username: u, password_file: "+pw+"}\n")
	r := run(t, env, "", "profile", "show", "p")
	if r.code != 0 || !strings.Contains(r.err, "warning: profile \"p\": password file "+pw+" has mode 0644") || !strings.Contains(r.err, "chmod 600 "+pw) {
		t.Errorf("exit %d %q", r.code, r.err)
	}
}
