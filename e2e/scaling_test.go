//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRunnerScalesOutAndIn: a count stage with standby_replicas: 1 over six
// partitions, under a steady input, grows from one `flecht run` instance to
// three and six and shrinks to two (SIGTERM) and one (SIGKILL). After each
// step the instances hold an even share of the tasks, every partition
// commits again within a bounded pause, each task has its standby while
// two or more instances run, and no instance rebuilds a partition's store
// from the whole changelog when it had held that partition before (as its
// task or its standby, kept since): only the first copy of a partition on
// an instance is a full restore. While the group grows, a joiner takes a
// task only once it has warmed it up as a standby, so no task starts
// there from scratch. The output is exactly once throughout.
func TestRunnerScalesOutAndIn(t *testing.T) {
	const (
		keys       = 6000
		partitions = 6
		chunk      = 200 // per 100 ms: 2,000 records/s
		// pause bounds each step, from its start until every partition
		// commits again: seconds here (the kill's include the 6 s
		// session), with room for a loaded CI machine.
		pause = 30 * time.Second
	)
	app, in, out := runnerTopics(t, partitions)
	stageFile := withStandbys(t, countStage(t, app, in, out, "crash", 500), 1)
	adm := admin(t)
	prod := inputProducer(t)

	var all []*proc // every instance started, in order
	live := map[string]*proc{}
	start := func(names ...string) {
		for _, n := range names {
			p := startRun(t, stageFile, n, t.TempDir(), "--leave-group")
			live[n] = p
			all = append(all, p)
		}
	}
	livePs := func() []*proc {
		var ps []*proc
		for _, p := range live {
			ps = append(ps, p)
		}
		return ps
	}

	// settle waits, after a step begun at began, until the live instances
	// hold an even share of the six tasks and every partition has committed
	// what the input held once they did: each task processes again.
	settle := func(step string, began time.Time, limit time.Duration) {
		t.Helper()
		share := partitions / len(live)
		waitUntil(t, limit, step+": an even share of the tasks on every instance", func() bool {
			for _, p := range live {
				if p.exited() {
					t.Fatalf("%s exited (%d) during %s:\n%s", p.name, p.code, step, tail(p.logs(), 30))
				}
				if v, err := p.tryMetric("flechtwerk_tasks_assigned"); err != nil || int(v) != share {
					return false
				}
			}
			return true
		})
		assigned := time.Since(began)
		ends, err := adm.ListEndOffsets(testCtx(t, 10*time.Second), in)
		if err != nil {
			t.Fatal(err)
		}
		left := limit - assigned
		waitUntil(t, left, step+": every partition committing again", func() bool {
			for p := int32(0); p < partitions; p++ {
				end, _ := ends.Lookup(in, p)
				if committedAt(t, adm, app, in, p) < end.Offset {
					return false
				}
			}
			return true
		})
		t.Logf("%s: tasks even after %s, every partition committed past the input of that moment after %s",
			step, assigned.Round(10*time.Millisecond), time.Since(began).Round(10*time.Millisecond))
		if len(live) < 2 {
			return
		}
		waitUntil(t, time.Minute, step+": a standby for every task", func() bool {
			n := 0
			for _, p := range live {
				n += len(seriesOf(p.scrape(), "flechtwerk_standby_lag_records"))
			}
			return n == partitions
		})
	}

	began := time.Now()
	start("sc-a")
	stream := streamInputs(t, prod, in, partitions, keys, chunk, 100*time.Millisecond)
	settle("1 instance", began, 2*time.Minute)
	waitCommitted(t, adm, app, in, keys, 2*time.Minute, livePs()...)

	began = time.Now()
	start("sc-b", "sc-c")
	settle("1 → 3 instances", began, pause)

	// Readiness tells the standbys apart: warm ones are listed, and they
	// never hold an instance back.
	for _, p := range livePs() {
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			why := standbysReadiness(t, p)
			if why == "" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s after 30 s: %s", p.name, why)
			}
		}
	}

	began = time.Now()
	start("sc-d", "sc-e", "sc-f")
	settle("3 → 6 instances", began, pause)

	// Growing moved tasks only to instances that had warmed them up as
	// standbys first (warm-ups): no joiner started a task from scratch.
	for _, p := range all[1:] {
		for _, m := range restoreLine.FindAllStringSubmatch(p.logs(), -1) {
			if m[1] == "task restored" && m[3] == "full" {
				t.Errorf("%s started task %s with a full restore while the group grew; want it warmed up first", p.name, m[2])
			}
		}
	}

	// Shrinking: four leave at once with SIGTERM, each committing what it
	// holds and leaving the group, then one of the last two is killed and
	// its tasks move once its session lapses.
	began = time.Now()
	for _, n := range []string{"sc-c", "sc-d", "sc-e", "sc-f"} {
		live[n].signal(syscall.SIGTERM)
	}
	for _, n := range []string{"sc-c", "sc-d", "sc-e", "sc-f"} {
		if code := live[n].wait(time.Minute); code != 0 {
			t.Fatalf("%s exited %d after SIGTERM, want 0:\n%s", n, code, tail(live[n].logs(), 30))
		}
		delete(live, n)
	}
	settle("6 → 2 instances (SIGTERM)", began, pause)

	began = time.Now()
	live["sc-b"].kill()
	delete(live, "sc-b")
	settle("2 → 1 instance (SIGKILL)", began, pause)

	want, n := stream.end(t)
	waitCommitted(t, adm, app, in, int64(n), 3*time.Minute, livePs()...)
	live["sc-a"].stop()
	rep := checkExactlyOnce(t, out, want)
	t.Logf("scaling 1 → 3 → 6 → 2 → 1: %s", rep)

	for _, p := range all {
		t.Logf("%s: %s", p.name, restoreCounts(p.logs()))
		for _, bad := range fullRestoresOfKnownPartitions(p.logs()) {
			t.Errorf("%s rebuilt a store from the whole changelog although it had held the partition before: %s", p.name, bad)
		}
	}
}

var restoreLine = regexp.MustCompile(`msg="(task restored|standby started)" [^\n]*?\bn=(\d+) restore=(tail|full)`)

// fullRestoresOfKnownPartitions lists the log lines of one instance where
// a task or standby restored its store from the whole changelog although
// the instance had restored that partition before: its store was kept (a
// standby's or a task's, within state_cleanup_delay) and should have been
// used.
func fullRestoresOfKnownPartitions(logs string) []string {
	seen := map[string]bool{}
	var bad []string
	for line := range strings.SplitSeq(logs, "\n") {
		m := restoreLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		if m[3] == "full" && seen[m[2]] {
			bad = append(bad, strings.TrimSpace(line))
		}
		seen[m[2]] = true
	}
	sort.Strings(bad)
	return bad
}

// restoreCounts sums an instance's restores by kind, for the test's log.
func restoreCounts(logs string) string {
	n := map[string]int{}
	for _, m := range restoreLine.FindAllStringSubmatch(logs, -1) {
		n[m[1]+" "+m[3]]++
	}
	keys := make([]string, 0, len(n))
	for k := range n {
		keys = append(keys, fmt.Sprintf("%s: %d", k, n[k]))
	}
	sort.Strings(keys)
	return strings.Join(keys, ", ")
}

// standbysReadiness reads an instance's /readyz and says what is wrong
// with it, if anything: it must be ready, and its standbys check must list
// as warm exactly the partitions its standby lag metric has series for.
func standbysReadiness(t *testing.T, p *proc) string {
	t.Helper()
	var kept []string
	for _, s := range seriesOf(p.scrape(), "flechtwerk_standby_lag_records") {
		if m := partitionLabel.FindStringSubmatch(s); m != nil {
			kept = append(kept, m[1])
		}
	}
	sort.Slice(kept, func(i, j int) bool {
		return len(kept[i]) < len(kept[j]) || len(kept[i]) == len(kept[j]) && kept[i] < kept[j]
	})
	url := strings.TrimSuffix(p.metricsURL(), "/metrics") + "/readyz"
	resp, err := http.Get(url)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	var rep struct {
		OK     bool `json:"ok"`
		Checks []struct {
			Name   string `json:"name"`
			OK     bool   `json:"ok"`
			Detail string `json:"detail"`
		} `json:"checks"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil {
		return "/readyz: " + err.Error()
	}
	want := fmt.Sprintf("warm standbys of tasks [%s]", strings.Join(kept, " "))
	for _, c := range rep.Checks {
		if c.Name != "standbys" {
			continue
		}
		if !rep.OK || !c.OK || !strings.Contains(c.Detail, want) {
			return fmt.Sprintf("/readyz ok=%v, standbys check ok=%v %q; want ready, naming %q", rep.OK, c.OK, c.Detail, want)
		}
		return ""
	}
	return fmt.Sprintf("/readyz has no standbys check: %+v", rep.Checks)
}

var partitionLabel = regexp.MustCompile(`partition="(\d+)"`)
