//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/module/moduletest"
)

// One input, one output, whatever restarts (docs/modules.md, "What flecht
// guarantees"), on the real broker: the carryover module, which writes
// everything a module could carry from one record to the next, is run by
// `flecht run` processes SIGKILLed 3 times, two of them sharing the group
// so that partitions move between processes mid-way, and by one process
// that runs without a break. Every input record's output is the same
// bytes in both.
func TestModuleOutputSurvivesKills(t *testing.T) {
	const (
		total      = 20_000
		keys       = 200
		partitions = 4
	)
	app, in, out := runnerTopics(t, partitions)
	refApp, refOut := topicName(t, "ref-app"), topicName(t, "ref-out")
	createTopic(t, refOut, partitions, nil)
	wasm := moduletest.Carryover(t)
	env := cacheEnv(t)
	start := func(app, out, clientID string) *proc {
		stage := moduleStageFile(t, app, in, out, wasm, "  stateless: true\n")
		return startProc(t, clientID, false, env, "run", "-f", stage, "--client-id", clientID, "--state-dir", t.TempDir(),
			"-b", brokers, "--metrics-listen", "127.0.0.1:0", "--session-timeout", testSessionTimeout)
	}

	// The input arrives steadily over about 30 s, as a live topic's does,
	// so that each kill lands mid-run however fast the machine is, and
	// while a transaction is open.
	produced := make(chan error, 1)
	var sent atomic.Int64
	ctx, prod := testCtx(t, 2*time.Minute), inputProducer(t)
	go func() { produced <- produceSteadily(ctx, prod, in, partitions, total, keys, &sent) }()
	ref := start(refApp, refOut, "uninterrupted")

	adm := admin(t)
	var atKill []string
	kill := func(p *proc, after int64) {
		t.Helper()
		waitCommitted(t, adm, app, in, after, 2*time.Minute, p)
		time.Sleep(60 * time.Millisecond) // into the next transaction
		p.kill()
		inputs := sent.Load()
		c, err := committed(testCtx(t, 30*time.Second), adm, app, in)
		if err != nil {
			t.Fatal(err)
		}
		if c >= total {
			t.Fatalf("the kill of %s was not mid-run: %d of %d inputs committed", p.name, c, total)
		}
		atKill = append(atKill, fmt.Sprintf("%d committed of %d produced", c, inputs))
	}
	// shared waits until each of ps owns some of the partitions.
	shared := func(ps ...*proc) {
		t.Helper()
		waitUntil(t, time.Minute, "the processes to share the partitions", func() bool {
			for _, p := range ps {
				p.alive()
				if n, err := p.tryMetric("flechtwerk_tasks_assigned"); err != nil || n == 0 {
					return false
				}
			}
			return true
		})
	}
	kill(start(app, out, "killed-1"), 4_000)
	second, third := start(app, out, "killed-2"), start(app, out, "killed-3")
	shared(second, third)
	kill(second, 9_000) // its partitions move to the third, mid-way
	kill(third, 14_000)
	last := start(app, out, "killed-4")
	if err := <-produced; err != nil {
		t.Fatalf("producing the input: %v", err)
	}
	waitCommitted(t, adm, app, in, total, 2*time.Minute, last)
	last.stop()
	waitCommitted(t, adm, refApp, in, total, 2*time.Minute, ref)
	ref.stop()

	values := func(topic string) [][]byte {
		var vs [][]byte
		for _, r := range readOutputFrom(t, topic, nil, total) {
			vs = append(vs, []byte(r.value))
		}
		return vs
	}
	if diff := moduletest.CarryoverDiff("the uninterrupted run", values(refOut), "the killed runs", values(out)); diff != "" {
		t.Fatalf("after SIGKILLs at %s: %s", strings.Join(atKill, ", "), diff)
	}
	t.Logf("%d records, the same bytes with and without SIGKILLs at %s", total, strings.Join(atKill, ", "))
}

// produceSteadily writes records 0 to total-1 (key key-(i mod keys), value
// {"i":i}) on their keys' murmur2 partitions, 40 every 50 ms, counting
// them in sent.
func produceSteadily(ctx context.Context, cl *kgo.Client, topic string, partitions, total, keys int, sent *atomic.Int64) error {
	const chunk = 40
	for from := 0; from < total; from += chunk {
		recs := make([]*kgo.Record, 0, chunk)
		for i := from; i < min(from+chunk, total); i++ {
			key := fmt.Appendf(nil, "key-%d", i%keys)
			recs = append(recs, &kgo.Record{Topic: topic, Key: key, Value: fmt.Appendf(nil, `{"i":%d}`, i), Partition: kafkax.Partition(key, partitions)})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			return err
		}
		sent.Add(int64(len(recs)))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}
