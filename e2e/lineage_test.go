//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/lineage"
)

// Lineage across a replay that keeps the outputs, on the real broker:
// count runs to the end (generation 1), replay --execute --keep-outputs
// commits the reset offsets with generation 2, and the second run writes
// everything again: the output holds each input record's output once per
// generation, each naming its input by topic/partition@offset.
func TestLineageAcrossAKeepOutputsReplay(t *testing.T) {
	const records, keys = 3_000, 30
	app, raw, out, stage, adm := rpCountPipeline(t, records, keys)
	stateDir := t.TempDir()
	run := func(clientID string) {
		p := rpStart(t, "run", "-f", stage, "--client-id", clientID, "--state-dir", stateDir, "--leave-group")
		rpWaitCaughtUp(t, adm, app, raw, 2*time.Minute)
		p.stop()
	}
	run("lineage-a")
	plan, errOut, code := rpReplay(t, "-f", stage, "--state-dir", stateDir, "--wait", "30s", "--keep-outputs", "--execute")
	if code != 0 || !plan.Executed || plan.Generation != 2 || plan.GenerationBefore != 1 {
		t.Fatalf("replay: exit %d, executed %v, generation %d after %d (want 2 after 1)\n%s", code, plan.Executed, plan.Generation, plan.GenerationBefore, errOut)
	}
	run("lineage-b")

	// Each output names its source and generation once; per generation,
	// each input offset has exactly one output.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	seen := map[string]int{}
	n := 0
	_, err := kafkax.ReadFrom(ctx, rpClient(t), []string{out}, kafkax.FromLogStart, nil, func(r *kgo.Record) error {
		got := map[string][]string{}
		for _, h := range r.Headers {
			got[h.Key] = append(got[h.Key], string(h.Value))
		}
		src, gen := got[lineage.HeaderSource], got[lineage.HeaderGeneration]
		if len(src) != 1 || len(gen) != 1 || len(got[lineage.HeaderLogic]) != 1 {
			return fmt.Errorf("%s/%d@%d: lineage headers %v", r.Topic, r.Partition, r.Offset, got)
		}
		s, err := lineage.ParseSource(src[0])
		if err != nil || s.Topic != raw || s.Partition != r.Partition {
			return fmt.Errorf("%s/%d@%d: source %q (%v) is not raw's same partition", r.Topic, r.Partition, r.Offset, src[0], err)
		}
		seen[src[0]+" generation "+gen[0]]++
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n != 2*records {
		t.Fatalf("%d outputs, want %d (each input twice)", n, 2*records)
	}
	for p, end := range rpEnds(t, adm, raw) {
		for off := range end {
			for _, g := range []string{"1", "2"} {
				if c := seen[fmt.Sprintf("%s/%d@%d generation %s", raw, p, off, g)]; c != 1 {
					t.Fatalf("%s/%d@%d has %d outputs of generation %s, want 1", raw, p, off, c, g)
				}
			}
		}
	}
}
