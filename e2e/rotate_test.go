//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/secret"
)

// TestRotatePlanRunbook walks a key rotation through the binary on a real
// broker, one runbook step at a time, with `keys rotate-plan` reporting
// each step's live status and the guard rails refusing the unsafe moves.
func TestRotatePlanRunbook(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	keyring := filepath.Join(dir, "keyring.json")
	topic := topicName(t, "cfg")
	createTopic(t, topic, 3, map[string]string{"cleanup.policy": "compact"})
	stage := filepath.Join(dir, "extractor.yaml")
	if err := os.WriteFile(stage, []byte(fmt.Sprintf("application_id: rot\nkind: extractor\nconfig_topics: [%s]\n"+
		"secret_fields: [\"credentials.api_key:api\"]\nextract: {builtin: http}\n", topic)), 0o600); err != nil {
		t.Fatal(err)
	}
	flecht := func(want int, args ...string) string {
		t.Helper()
		if args[1] != "check" { // keys check reads no keyring: it asks the readers
			args = append(args, "--keyring", keyring)
		}
		out, errOut, code := runFlecht(t, "", args...)
		if code != want {
			t.Fatalf("flecht %v: exit %d, want %d\n%s\n%s", args, code, want, out, errOut)
		}
		return out + errOut
	}
	readerA, loadA := rxReader(t)
	readerB, loadB := rxReader(t)
	urls := []string{"--metrics-url", readerA, "--metrics-url", readerB}
	type plan struct {
		Next  int `json:"next"`
		Steps []struct {
			Status, Detail, Command string
		} `json:"steps"`
	}
	status := func() (string, plan) {
		t.Helper()
		p := decodeJSON[plan](t, flecht(0, append([]string{"keys", "rotate-plan", "--kid", "r-new", "-f", stage, "-o", "json"}, urls...)...))
		var s []string
		for _, st := range p.Steps {
			s = append(s, st.Status)
		}
		return strings.Join(s, " "), p
	}

	flecht(0, "keys", "init", "--kid", "r-old")
	loadA([]string{"r-old"})
	loadB([]string{"r-old"})
	kr, _, err := secret.Load(keyring)
	if err != nil {
		t.Fatal(err)
	}
	w := client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := range 50 {
		tok, err := kr.Encrypt([]byte(fmt.Sprintf(`"key-%d"`, i)), "api")
		if err != nil {
			t.Fatal(err)
		}
		r := &kgo.Record{Topic: topic, Partition: int32(i % 3), Key: []byte(fmt.Sprint("c", i)),
			Value: []byte(fmt.Sprintf(`{"url":"https://api.example/%d","credentials":{"api_key":"%s"}}`, i, tok))}
		if err := w.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	if s, p := status(); s != "pending pending pending pending pending" || p.Next != 1 || !strings.Contains(p.Steps[0].Command, "keys add") {
		t.Fatalf("before: %s %+v", s, p.Steps[0])
	}
	flecht(0, "keys", "add", "--kid", "r-new")
	loadA([]string{"r-old", "r-new"})
	if s, p := status(); s != "pending pending pending pending pending" || !strings.Contains(p.Steps[0].Detail, "1 of 2 readers lack it") {
		t.Fatalf("one reader rolled out: %s %+v", s, p.Steps[0])
	}
	flecht(4, append([]string{"keys", "check", "--kid", "r-new"}, urls...)...)
	loadB([]string{"r-old", "r-new"})
	flecht(0, append([]string{"keys", "check", "--kid", "r-new"}, urls...)...)
	if s, p := status(); s != "done pending pending pending pending" || p.Next != 2 {
		t.Fatalf("readers ready: %s", s)
	}
	flecht(0, "keys", "promote", "--kid", "r-new")
	if s, p := status(); s != "done done pending pending pending" || !strings.Contains(p.Steps[2].Detail, "50 tokens under old kids") {
		t.Fatalf("promoted: %s %+v", s, p.Steps[2])
	}
	if out := flecht(3, "keys", "remove", "--kid", "r-old", "-f", stage); !strings.Contains(out, "found 50 token(s)") {
		t.Fatalf("guarded remove: %s", out)
	}
	flecht(0, "secrets", "reencrypt", "-f", stage, "--execute")
	if s, p := status(); s != "done done done done pending" || p.Next != 5 {
		t.Fatalf("swept: %s", s)
	}
	flecht(0, "keys", "remove", "--kid", "r-old", "-f", stage)
	if s, p := status(); s != "done done done done done" || p.Next != 0 {
		t.Fatalf("retired: %s", s)
	}
}
