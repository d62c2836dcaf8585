package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flecht-dev/flecht/internal/exitcode"
)

// A typo under extract: is a startup error that names it and lists the
// options the builtin knows, before any connection is made.
func TestRunRefusesUnknownExtractOptions(t *testing.T) {
	for name, c := range map[string]struct{ stage, want string }{
		"mqtt-relay": {
			"application_id: b\nkind: mqtt\nconfig_topics: [c]\nextract: {builtin: mqtt-relay, output_topic: raw, kye: \"{topic}\"}\n",
			`line 4: unknown option "kye" (did you mean key? known: key, output_topic, payload, qos)`,
		},
		"http-poll": {
			"application_id: p\nkind: extractor\nconfig_topics: [c]\npoll_interval: 1m\nextract: {builtin: http-poll, url: \"http://x\"}\n",
			`builtin "http-poll" takes no options in the stage file; remove "url" (line 5)`,
		},
	} {
		path := filepath.Join(t.TempDir(), "stage.yaml")
		if err := os.WriteFile(path, []byte(c.stage), 0o600); err != nil {
			t.Fatal(err)
		}
		r := run(t, nil, "", "run", "-f", path, "--client-id", "c0", "-b", "127.0.0.1:1")
		if r.code != exitcode.Usage || !strings.Contains(r.err, c.want) {
			t.Errorf("%s: exit %d, stderr %q; want 2 and %q", name, r.code, r.err, c.want)
		}
	}
}

// A password inside an MQTT URL (--mqtt-url, FLECHT_MQTT_URL, the stage
// file) is refused before any connection and never echoed: it would show in
// process lists and in every message that quotes the URL.
func TestRunRefusesAPasswordInTheMQTTURL(t *testing.T) {
	stage := "application_id: b\nkind: mqtt\nconfig_topics: [c]\nextract: {builtin: mqtt-relay, output_topic: raw, key: \"{topic}\"}\n"
	path := filepath.Join(t.TempDir(), "stage.yaml")
	if err := os.WriteFile(path, []byte(stage), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		env  map[string]string
		args []string
	}{
		"flag": {nil, []string{"--mqtt-url", "mqtt://bridge:hunter2@127.0.0.1:1"}},
		"env":  {map[string]string{"FLECHT_MQTT_URL": "mqtt://bridge:hunter2@127.0.0.1:1"}, nil},
	} {
		args := append([]string{"run", "-f", path, "--client-id", "c0", "-b", "127.0.0.1:1"}, c.args...)
		r := run(t, c.env, "", args...)
		if r.code != exitcode.Usage || !strings.Contains(r.err, "must not hold a password") || strings.Contains(r.err+r.out, "hunter2") {
			t.Errorf("%s: exit %d, stderr %q; want 2, the refusal, and no password", name, r.code, r.err)
		}
	}
}
