package transformer_test

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/flecht-dev/flecht/internal/metrics"
)

// byPartition reads a collector's series by their partition label.
func byPartition(c prometheus.Collector) map[int32]float64 {
	ch := make(chan prometheus.Metric, 64)
	go func() { c.Collect(ch); close(ch) }()
	out := map[int32]float64{}
	for m := range ch {
		var pb dto.Metric
		if m.Write(&pb) != nil {
			continue
		}
		for _, l := range pb.GetLabel() {
			if l.GetName() == "partition" {
				p, _ := strconv.Atoi(l.GetValue())
				out[int32(p)] = pb.GetGauge().GetValue() + pb.GetCounter().GetValue()
			}
		}
	}
	return out
}

// TestStandbyTakesOverWithATailRestore: three instances of a count stage
// over six partitions with standby_replicas: 1 each run two tasks and keep
// standbys of two others (never their own); when one stops, each of its
// tasks goes to the instance keeping its standby, which reads only the
// changelog written since its standby's last poll, not the whole of it,
// and the counts go on exactly once.
func TestStandbyTakesOverWithATailRestore(t *testing.T) {
	f := newFixture(t)
	f.topics(6, "raw", "refined")
	st := stageFile(t, countStage+"standby_replicas: 1\n")
	dir := t.TempDir()
	runners := map[string]*running{}
	for _, name := range []string{"one", "two", "three"} {
		runners[name] = f.start(st, filepath.Join(dir, name), name)
	}
	// The group settles first (two tasks each), so that the records
	// below are not processed while tasks still move to a late joiner.
	waitFor(t, 60*time.Second, "two tasks on each instance", func() bool {
		for _, r := range runners {
			if metrics.Value(r.obs.TasksAssigned) != 2 {
				return false
			}
		}
		return true
	})
	f.produce("raw", keyed(3000, 1500, "a")...)
	waitFor(t, 60*time.Second, "3,000 outputs", func() bool { return len(f.read("refined")) >= 3000 })

	// Each keeps standbys of two tasks another runs, caught up.
	var standbys map[string][]int32
	var lags map[string]map[int32]float64
	settled := func() bool {
		standbys, lags = map[string][]int32{}, map[string]map[int32]float64{}
		caughtUp := true
		for name, r := range runners {
			lags[name] = byPartition(r.obs.StandbyLagRecords)
			for p, behind := range lags[name] {
				caughtUp = caughtUp && behind == 0
				standbys[name] = append(standbys[name], p)
			}
		}
		return caughtUp && len(standbys["one"]) == 2 && len(standbys["two"]) == 2 && len(standbys["three"]) == 2
	}
	for deadline := time.Now().Add(30 * time.Second); !settled(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s the standbys (partition: records behind) are %v; want two caught up on each instance", lags)
		}
	}
	for name, r := range runners {
		if warm, warming := metrics.Value(r.obs.StandbyTasks.WithLabelValues("warm")), metrics.Value(r.obs.StandbyTasks.WithLabelValues("warming")); warm != 2 || warming != 0 {
			t.Errorf("%s: flechtwerk_standby_tasks warm %v, warming %v; want 2 warm, 0 warming", name, warm, warming)
		}
	}
	var all []int32
	for _, sb := range standbys {
		all = append(all, sb...)
	}
	slices.Sort(all)
	if fmt.Sprint(all) != "[0 1 2 3 4 5]" {
		t.Fatalf("standbys %v: want each of the 6 tasks kept once", standbys)
	}
	survivors := []string{"two", "three"}
	restores := func(kind string) (n float64) {
		for _, name := range survivors {
			n += metrics.Value(runners[name].obs.StateRestores.WithLabelValues(kind))
		}
		return n
	}
	read := func() (n float64) {
		for _, name := range survivors {
			n += metrics.Value(runners[name].obs.StateRestored)
		}
		return n
	}
	tails, fulls, readBefore := restores("tail"), restores("full"), read()
	for p, n := range changelogSizes(t, f) {
		if n < 100 {
			t.Fatalf("changelog partition %d holds only %d records: a full restore would read little, the test proves nothing", p, n)
		}
	}

	if err := runners["one"].stop(t); err != nil {
		t.Fatal(err)
	}
	// one's two tasks go to the survivors once its session lapses, each
	// to the instance keeping its standby: a tail of a caught-up store
	// reads nothing (a full restore would read about 250 records, a kept
	// store from before the records came in as many).
	waitFor(t, 60*time.Second, "the survivors to take one's two tasks over", func() bool {
		return restores("tail")+restores("full") >= tails+fulls+2
	})
	if got := restores("tail") - tails; got != 2 {
		t.Errorf("%v tail restores when one's tasks moved, want 2", got)
	}
	if got := restores("full") - fulls; got != 0 {
		t.Errorf("%v full restores when one's tasks moved, want 0", got)
	}
	if got := read() - readBefore; got != 0 {
		t.Errorf("the moved tasks read %v changelog records, want 0 from their caught-up standbys", got)
	}

	f.produce("raw", keyed(1500, 1500, "b")...)
	waitFor(t, 60*time.Second, "4,500 outputs", func() bool { return len(f.read("refined")) >= 4500 })
	for _, name := range survivors {
		if err := runners[name].stop(t); err != nil {
			t.Fatal(err)
		}
	}
	out := f.read("refined")
	if len(out) != 4500 {
		t.Fatalf("%d outputs, want exactly 4,500", len(out))
	}
	counts := checkSeq(t, out)
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		if counts[k] != 3 {
			t.Errorf("key %s has %d outputs, want 3", k, counts[k])
		}
	}
}

// changelogSizes counts the count stage's changelog records per partition.
func changelogSizes(t *testing.T, f *fixture) map[int32]int {
	t.Helper()
	n := map[int32]int{}
	for _, c := range f.read("count-app-changelog") {
		n[c.Partition]++
	}
	return n
}

// TestJoinerTakesTasksOnlyOnceWarm: one instance of a count stage with
// standby_replicas: 1 runs all six tasks and their state; a second one
// joins. It takes its three tasks only after warming them up as standbys:
// the owner keeps processing meanwhile, and each task's start on the
// joiner reads only the changelog's tail, never the whole of it. The
// counts go on exactly once.
func TestJoinerTakesTasksOnlyOnceWarm(t *testing.T) {
	f := newFixture(t)
	f.topics(6, "raw", "refined")
	st := stageFile(t, countStage+"standby_replicas: 1\n")
	dir := t.TempDir()
	one := f.start(st, filepath.Join(dir, "one"), "one")
	waitFor(t, 60*time.Second, "six tasks on one", func() bool { return metrics.Value(one.obs.TasksAssigned) == 6 })
	f.produce("raw", keyed(3000, 1500, "a")...)
	waitFor(t, 60*time.Second, "3,000 outputs", func() bool { return len(f.read("refined")) >= 3000 })

	two := f.start(st, filepath.Join(dir, "two"), "two")
	waitFor(t, 60*time.Second, "three tasks on each", func() bool {
		return metrics.Value(one.obs.TasksAssigned) == 3 && metrics.Value(two.obs.TasksAssigned) == 3
	})
	if full := metrics.Value(two.obs.StateRestores.WithLabelValues("full")); full != 0 {
		t.Errorf("two started %v tasks with a full restore; want every task warmed up first (tail restores only)", full)
	}
	if tail := metrics.Value(two.obs.StateRestores.WithLabelValues("tail")); tail != 3 {
		t.Errorf("two started %v tasks from its warm standbys, want 3", tail)
	}

	f.produce("raw", keyed(1500, 1500, "b")...)
	waitFor(t, 60*time.Second, "4,500 outputs", func() bool { return len(f.read("refined")) >= 4500 })
	for _, r := range []*running{one, two} {
		if err := r.stop(t); err != nil {
			t.Fatal(err)
		}
	}
	out := f.read("refined")
	if len(out) != 4500 {
		t.Fatalf("%d outputs, want exactly 4,500", len(out))
	}
	for k, n := range checkSeq(t, out) {
		if n != 3 {
			t.Errorf("key %s has %d outputs, want 3", k, n)
		}
	}
}
