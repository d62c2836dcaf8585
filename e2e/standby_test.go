//go:build e2e

package e2e

import (
	"strings"
	"testing"
	"time"
)

// TestRunnerStandbyFailover: three `flecht run` instances of a count stage
// over six partitions with standby_replicas: 1, records flowing. One is
// SIGKILLed; once its session lapses, each of its two tasks goes to the
// survivor keeping its standby, which reads only the changelog committed
// since its standby's last poll (a tail), not the partition's whole
// changelog; the output stays exactly once.
func TestRunnerStandbyFailover(t *testing.T) {
	const (
		keys       = 6000
		partitions = 6
		chunk      = 300
	)
	app, in, out := runnerTopics(t, partitions)
	stageFile := withStandbys(t, countStage(t, app, in, out, "crash", 500), 1)
	adm := admin(t)
	prod := inputProducer(t)

	names := []string{"sb-a", "sb-b", "sb-c"}
	procs := map[string]*proc{}
	for _, n := range names {
		procs[n] = startRun(t, stageFile, n, t.TempDir())
	}
	waitUntil(t, 2*time.Minute, "two tasks on each instance", func() bool {
		for _, p := range procs {
			if v, err := p.tryMetric("flechtwerk_tasks_assigned"); err != nil || v != 2 {
				return false
			}
		}
		return true
	})
	// A steady stream, so that the kill lands mid-stream; its first
	// 6,000 records are every key once, so that each changelog partition
	// holds about a thousand records: what a full restore would read.
	stream := streamInputs(t, prod, in, partitions, keys, chunk, 100*time.Millisecond)
	waitCommitted(t, adm, app, in, keys, 2*time.Minute, procs["sb-a"], procs["sb-b"], procs["sb-c"])

	waitUntil(t, time.Minute, "two standbys on each instance", func() bool {
		for _, p := range procs {
			if len(seriesOf(p.scrape(), "flechtwerk_standby_lag_records")) != 2 {
				return false
			}
		}
		return true
	})
	survivors := []*proc{procs["sb-b"], procs["sb-c"]}
	sum := func(name string, labels ...string) (v float64) {
		for _, p := range survivors {
			v += p.metric(name, labels...)
		}
		return v
	}
	tails, fulls, read := sum("flechtwerk_state_restores_total", `kind="tail"`), sum("flechtwerk_state_restores_total", `kind="full"`), sum("flechtwerk_state_restored_entries_total")
	killed := time.Now()
	procs["sb-a"].kill()
	waitUntil(t, 2*time.Minute, "the survivors to run all six tasks", func() bool {
		return sum("flechtwerk_tasks_assigned") == partitions
	})
	took := time.Since(killed)
	if got := sum("flechtwerk_state_restores_total", `kind="tail"`) - tails; got != 2 {
		t.Errorf("%v tail restores after the kill, want 2 (the killed instance's tasks, each to its standby)", got)
	}
	if got := sum("flechtwerk_state_restores_total", `kind="full"`) - fulls; got != 0 {
		t.Errorf("%v full restores after the kill, want 0", got)
	}
	// A full restore of the two tasks would read about 2,000 records;
	// a standby polled every 500 ms is behind by what about half a
	// second of the stream committed (3,000 records/s over 6 tasks).
	readAfter := sum("flechtwerk_state_restored_entries_total") - read
	if readAfter > 600 {
		t.Errorf("the moved tasks read %v changelog records, want what their standbys had not polled yet (a few hundred at most)", readAfter)
	}
	t.Logf("kill → all six tasks running on the survivors: %s (the 6 s session included); the moved tasks read %v changelog records", took.Round(10*time.Millisecond), readAfter)

	want, n := stream.end(t)
	waitCommitted(t, adm, app, in, int64(n), 3*time.Minute, survivors...)
	for _, p := range survivors {
		p.stop()
	}
	rep := checkExactlyOnce(t, out, want)
	t.Logf("standby failover: %s", rep)
}

// seriesOf lists the series of metric name in a Prometheus text body.
func seriesOf(body, name string) []string {
	var out []string
	for line := range strings.SplitSeq(body, "\n") {
		if strings.HasPrefix(line, name+"{") {
			out = append(out, line)
		}
	}
	return out
}
