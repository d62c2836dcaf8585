package transformer_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/metrics"
	"github.com/flecht-dev/flecht/internal/module/moduletest"
)

// One input, one output, whatever restarts (docs/modules.md, "What flecht
// guarantees"): the carryover module writes everything a module could
// carry from one record to the next, and its output for each input record
// is the same bytes whether the stage ran without a break or was stopped
// and started again mid-way, with two runners sharing the group so that
// partitions moved between instances.
func TestModuleOutputSurvivesRestarts(t *testing.T) {
	const partitions, chunk, chunks = 4, 300, 4
	f := newFixture(t)
	f.topics(partitions, "raw", "uninterrupted", "restarted")
	wasm := moduletest.Carryover(t)
	start := func(app, out, client string) *running {
		return f.startModule(moduleStage(t, app, wasm, out, "  stateless: true\n"), t.TempDir(), client)
	}
	produceChunk := func(c int) {
		recs := make([]*kgo.Record, chunk)
		for i := range recs {
			n := c*chunk + i
			recs[i] = &kgo.Record{Key: fmt.Appendf(nil, "key-%d", n%40), Value: fmt.Appendf(nil, `{"i":%d}`, n)}
		}
		f.produce("raw", recs...)
	}
	waitTaken := func(app string, n int) {
		t.Helper()
		waitFor(t, 60*time.Second, fmt.Sprintf("%s to commit %d inputs", app, n), func() bool {
			sum := int64(0)
			for p := range int32(partitions) {
				sum += max(0, f.committed(app, "raw", p))
			}
			return sum == int64(n)
		})
	}

	// shared waits until the runners own every partition between them,
	// each some.
	shared := func(rs ...*running) {
		t.Helper()
		waitFor(t, 60*time.Second, fmt.Sprintf("%d runners to share the partitions", len(rs)), func() bool {
			sum := 0.0
			for _, r := range rs {
				n := metrics.Value(r.obs.TasksAssigned)
				if n == 0 {
					return false
				}
				sum += n
			}
			return sum == partitions
		})
	}

	// Each chunk of the input meets other instances: the first runner's,
	// then two runners' (some partitions move), then the second's alone
	// (the first's move to it), then two new runners'.
	a := start("restarted", "restarted", "a")
	produceChunk(0)
	waitTaken("restarted", chunk)
	b := start("restarted", "restarted", "b")
	shared(a, b)
	produceChunk(1)
	waitTaken("restarted", 2*chunk)
	stopOK(t, a)
	shared(b)
	produceChunk(2)
	waitTaken("restarted", 3*chunk)
	stopOK(t, b)
	c, d := start("restarted", "restarted", "c"), start("restarted", "restarted", "d")
	shared(c, d)
	produceChunk(3)
	waitTaken("restarted", chunks*chunk)
	stopOK(t, c)
	stopOK(t, d)

	u := start("uninterrupted", "uninterrupted", "u")
	waitTaken("uninterrupted", chunks*chunk)
	stopOK(t, u)

	values := func(topic string) [][]byte {
		var vs [][]byte
		for _, r := range f.read(topic) {
			vs = append(vs, r.Value)
		}
		return vs
	}
	if diff := moduletest.CarryoverDiff("uninterrupted", values("uninterrupted"), "restarted", values("restarted")); diff != "" {
		t.Fatal(diff)
	}
}

func stopOK(t *testing.T, r *running) {
	t.Helper()
	if err := r.stop(t); err != nil {
		t.Fatalf("stop: %v", err)
	}
}
