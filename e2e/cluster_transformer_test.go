//go:build e2e && e2ecluster

package e2e

import (
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flecht-dev/flecht/internal/health"
	"github.com/flecht-dev/flecht/internal/stagefile"
)

// `count` over 200,000 records (6 partitions, 500 keys) while the cluster
// loses the leader of an input, output, changelog partition and a task's
// transaction coordinator, a paused node, a rolling restart and all three
// nodes: the one `flecht run` never exits, the read_committed output holds
// every input exactly once with each key's seq exact, and it commits again
// within progressBound of the cluster being whole.
func TestClusterCountFaults(t *testing.T) {
	const (
		records    = 200_000
		partitions = 6
		keys       = 500
		produceFor = 4 * time.Minute
	)
	k := clusterNodes(t)
	app := topicName(t, "app")
	in, out := topicName(t, "in"), topicName(t, "out")
	createTopic(t, in, partitions, nil)
	createTopic(t, out, partitions, nil)
	// Every node must know the topics: the runner's start-up checks ask
	// one, and exit when it has not heard of a topic yet.
	k.waitWhole([]string{in, out})
	stage := countStage(t, app, in, out, "crash", 500)
	p := startRun(t, stage, "count-0", t.TempDir())

	// Inputs arrive throughout, in slices, so every fault falls on a
	// stage with work in hand.
	prod := inputProducer(t)
	want := map[string]input{}
	var produced atomic.Int64
	done := make(chan error, 1)
	go func() {
		const slices = 40
		start := time.Now()
		for s := range slices {
			if ahead := time.Until(start.Add(produceFor * time.Duration(s) / slices)); ahead > 0 {
				time.Sleep(ahead)
			}
			from, to := s*records/slices, (s+1)*records/slices
			got, err := produceInputsErr(testCtx(t, 10*time.Minute), prod, in, partitions, from, to, keys, 100)
			if err != nil {
				done <- err
				return
			}
			for id, v := range got {
				want[id] = v
			}
			produced.Store(int64(to))
		}
		done <- nil
	}()
	waitUntil(t, 2*time.Minute, "the stage committing", func() bool {
		p.alive()
		v, _ := p.tryMetric("flechtwerk_transactions_committed_total")
		return v > 0
	})
	topics := []string{in, out, app + "-changelog"}
	part := int32(k.intn(0, partitions-1))
	faults := []fault{
		killLeader(fmt.Sprintf("input partition %d", part), partitionLeader(in, part)),
		killLeader(fmt.Sprintf("output partition %d", part), partitionLeader(out, part)),
		killLeader(fmt.Sprintf("changelog partition %d", part), partitionLeader(app+"-changelog", part)),
		killLeader(fmt.Sprintf("task %d's __transaction_state partition", part), coordinatorOf(stagefile.TransactionalID(app, part))),
		pauseNode(fmt.Sprintf("task %d's transaction coordinator", part), coordinatorOf(stagefile.TransactionalID(app, part))),
		rollingRestart(topics),
		allDown(),
	}
	// Progress is a transaction committed (a restarted task reading its
	// input again is no progress); once every input is committed there is
	// nothing left to commit, and progress is moot.
	adm := admin(t)
	commits := func() float64 {
		v, err := p.tryMetric("flechtwerk_transactions_committed_total")
		if err != nil {
			return -1
		}
		if produced.Load() == records {
			if c, err := committed(testCtx(t, 10*time.Second), adm, app, in); err == nil && c >= records {
				return v + float64(time.Now().UnixNano())
			}
		}
		return v
	}
	probes := &probeSampler{p: p}
	run := k.injectAll(faults, topics, progressBound, func() { p.alive(); probes.sample(t) }, commits)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	waitCommitted(t, adm, app, in, records, 5*time.Minute, p)
	p.alive()
	retries := fmt.Sprintf("%s, %d task restarts (resumed from the committed offsets), %d tasks back to committing",
		retryLogs(p), p.logCount("task resumed from its committed offsets"), p.logCount("task commits again"))
	p.stop()
	rep := checkExactlyOnce(t, out, want)
	t.Logf("count under %d faults: %s; the process never exited; %s%s", len(run.Faults), rep, retries, run)
	t.Logf("what the stage logged at warn level, by message: %s", warnings(p))
	t.Logf("probes through the faults: liveness 200 in all %d samples; readiness 503 in %d (%s)", probes.n, probes.notReady, probes.lastNotReady)
	if probes.notReady == 0 {
		t.Error("readiness never said not ready while the cluster's faults restarted the tasks")
	}
	logFigures(t, "transformer count", len(run.Faults), records, rep.Outputs, rep.Duplicates, rep.Missing)
}

// warnings counts a stage's warn-level log lines by message, for the
// report: which failures it rode out and how often.
func warnings(p *proc) string {
	counts := map[string]int{}
	for line := range strings.SplitSeq(p.logs(), "\n") {
		if !strings.Contains(line, "level=WARN") {
			continue
		}
		_, msg, ok := strings.Cut(line, ` msg="`)
		if !ok {
			continue
		}
		msg, _, _ = strings.Cut(msg, `"`)
		counts[msg]++
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "\n  %4d  %s", counts[k], k)
	}
	return b.String()
}

// probeSampler reads a stage's probes every half second while faults are
// injected: liveness must hold throughout (a stage waiting out an outage
// is alive), and readiness is expected to say "not ready" at times (a task
// restarting, a group session being rejoined).
type probeSampler struct {
	p            *proc
	last         time.Time
	n, notReady  int
	lastNotReady string
}

func (s *probeSampler) sample(t *testing.T) {
	t.Helper()
	if time.Since(s.last) < 500*time.Millisecond {
		return
	}
	s.last = time.Now()
	base := strings.TrimSuffix(s.p.metricsURL(), "/metrics")
	get := func(path string) (int, string) {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	s.n++
	if code, body := get(health.LivenessPath); code != http.StatusOK {
		t.Errorf("liveness failed while the stage rode out a fault: %d %s", code, body)
	}
	if code, body := get(health.ReadinessPath); code != http.StatusOK {
		s.notReady++
		s.lastNotReady = strings.TrimSpace(body)
	}
}
