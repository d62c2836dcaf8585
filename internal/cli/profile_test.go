package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
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
	for _, key := range []string{"config_path", "config_found", "profile", "profile_source", "brokers", "brokers_source", "tls", "sasl", "mqtt", "available_profiles"} {
		if _, ok := got[key]; !ok {
			t.Errorf("key %q missing from %v", key, got)
		}
	}
}
