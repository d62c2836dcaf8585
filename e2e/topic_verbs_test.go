//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// The feeding-and-reading runbook on the real broker, with flecht alone:
// create a count stage's topics, produce its input as JSON lines, run it,
// consume its output read_committed (each key's seq 1..n); a config record
// produced with a field sealed reads back sealed without the keyring and
// opened with it.
func TestTopicVerbsRunbook(t *testing.T) {
	app := topicName(t, "app")
	raw, out, cfg := topicName(t, "raw"), topicName(t, "out"), topicName(t, "cfg")
	stage := rpStage(t, app, raw, out)
	flecht := func(stdin string, args ...string) string {
		t.Helper()
		o, errOut, code := runFlecht(t, stdin, args...)
		if code != 0 {
			t.Fatalf("flecht %v: exit %d\n%s", args, code, errOut)
		}
		return o
	}
	flecht("", "topic", "create", "-f", stage, "--partitions", "3")
	flecht("", "topic", "create", cfg, "--compact")
	var lines strings.Builder
	for i := range 60 {
		fmt.Fprintf(&lines, `{"key":"k%d","value":{"i":%d}}`+"\n", i%6, i)
	}
	if o := flecht(lines.String(), "topic", "produce", raw); !strings.Contains(o, "60 records written") {
		t.Fatalf("produce: %s", o)
	}
	p := startRun(t, stage, "verbs-0", t.TempDir())
	rpWaitCaughtUp(t, kadm.NewClient(rpClient(t)), app, raw, 2*time.Minute)
	p.stop()
	seqs := map[string][]int{}
	for _, l := range strings.Split(strings.TrimSpace(flecht("", "topic", "consume", out)), "\n") {
		var rec struct {
			Key   string `json:"key"`
			Value struct {
				Seq int `json:"seq"`
			} `json:"value"`
		}
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("%v: %s", err, l)
		}
		seqs[rec.Key] = append(seqs[rec.Key], rec.Value.Seq)
	}
	for k, s := range seqs {
		for i, v := range s {
			if v != i+1 {
				t.Fatalf("key %s: seq %v", k, s)
			}
		}
	}
	if len(seqs) != 6 || len(seqs["k0"]) != 10 {
		t.Fatalf("consumed %d keys: %v", len(seqs), seqs)
	}

	keyring := filepath.Join(t.TempDir(), "keyring.json")
	flecht("", "keys", "init", "--keyring", keyring, "--kid", "k1")
	flecht(`{"key":"api","value":{"url":"https://x","api_key":"sk-live-1"}}`+"\n", "topic", "produce", cfg, "--encrypt", "api_key", "--keyring", keyring)
	if sealed := flecht("", "topic", "consume", cfg); strings.Contains(sealed, "sk-live-1") || !strings.Contains(sealed, `"api_key":"flenc:jwe:`) {
		t.Errorf("without the keyring: %s", sealed)
	}
	if opened := flecht("", "topic", "consume", cfg, "--decrypt", "api_key", "--keyring", keyring); !strings.Contains(opened, `"value":{"api_key":"sk-live-1","url":"https://x"}`) {
		t.Errorf("with --decrypt: %s", opened)
	}
}
