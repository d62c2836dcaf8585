//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Long module calls and a module's bad answers on the real broker, through
// the flecht binary and its exit codes (docs/transformers.md, start-up,
// stop and failure).

// SIGTERM while a module call loops (reading the clock, under a one-minute
// time limit) interrupts it: flecht exits 0 at once, having committed the
// records done before the call; the interrupted one is left to the next
// run. Before, the stop waited for the call's time limit and exited 1.
func TestModuleSIGTERMInterruptsALongCall(t *testing.T) {
	app, in, out := runnerTopics(t, 1)
	var recs []*kgo.Record
	for i := range 5 {
		// One key: each record waits for the one before, a call each.
		recs = append(recs, &kgo.Record{Topic: in, Key: []byte("k"), Value: fmt.Appendf(nil, `{"i":%d}`, i)})
	}
	recs = append(recs, &kgo.Record{Topic: in, Key: []byte("k"), Value: []byte(`{"do":"busy"}`)})
	if err := client(t).ProduceSync(testCtx(t, time.Minute), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	stage := moduleStageFile(t, app, in, out, misbehaving(t), "  time_limit: 1m\ncommit_interval: 20s\n")
	p := startProc(t, "busy", false, cacheEnv(t), "run", "-f", stage, "--client-id", "b0", "--state-dir", t.TempDir(), "-b", brokers,
		"--metrics-listen", "127.0.0.1:0")
	waitUntil(t, time.Minute, "the busy record taken", func() bool {
		p.alive()
		return p.metric("flechtwerk_messages_in_total") >= 6
	})
	time.Sleep(time.Second) // well into the call
	stopped := time.Now()
	p.signal(syscall.SIGTERM)
	if code := p.wait(30 * time.Second); code != 0 {
		t.Fatalf("exit %d after SIGTERM, want 0:\n%s", code, tail(p.logs(), 30))
	}
	took := time.Since(stopped)
	t.Logf("exit 0 %s after SIGTERM", took.Round(time.Millisecond))
	if took > 15*time.Second {
		t.Errorf("the stop took %s", took)
	}
	if c, err := committed(testCtx(t, 30*time.Second), admin(t), app, in); err != nil || c != 5 {
		t.Errorf("%d input offsets committed (%v), want the 5 before the interrupted call", c, err)
	}
	if n := len(readAll(t, out)); n != 5 {
		t.Errorf("%d outputs, want 5", n)
	}
}

// A module that answers with a value or a state cut short (`{"a":`, an
// unexpected end of input, as a broken connection gives) exits 1 at once,
// naming the module and the record, and never retries it as a cluster
// failure. Before, it retried every few seconds for ever.
func TestModuleTruncatedAnswerExits1(t *testing.T) {
	for do, want := range map[string]string{
		"badjson":  "has a value that is not a JSON object: not JSON",
		"cutstate": "its new state is not a JSON object: not JSON",
	} {
		t.Run(do, func(t *testing.T) {
			app, in, out := runnerTopics(t, 1)
			recs := []*kgo.Record{
				{Topic: in, Key: []byte("k0"), Value: []byte(`{"i":0}`)},
				{Topic: in, Key: []byte("k1"), Value: []byte(`{"do":"` + do + `"}`)},
			}
			if err := client(t).ProduceSync(testCtx(t, time.Minute), recs...).FirstErr(); err != nil {
				t.Fatal(err)
			}
			bad := misbehaving(t)
			info := inspect(t, bad)
			p := startProc(t, do, false, cacheEnv(t), "run", "-f", moduleStageFile(t, app, in, out, bad, ""), "--client-id", "t0",
				"--state-dir", t.TempDir(), "-b", brokers)
			if code := p.wait(time.Minute); code != 1 {
				t.Errorf("exit %d, want 1", code)
			}
			logs := p.logs()
			for _, w := range []string{"module misbehave.wasm (sha256 " + info.SHA256[:12] + ")", in + "/0@1", want} {
				if !strings.Contains(logs, w) {
					t.Errorf("the stage's last words lack %q:\n%s", w, tail(logs, 15))
				}
			}
			if strings.Contains(logs, "the cluster is unavailable or changing") {
				t.Errorf("the module's answer was taken for a cluster failure:\n%s", tail(logs, 15))
			}
			if n := len(readAll(t, out)); n != 0 {
				t.Errorf("%d outputs committed despite the failure", n)
			}
		})
	}
}
