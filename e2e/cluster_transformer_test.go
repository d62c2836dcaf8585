//go:build e2e && e2ecluster

package e2e

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
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
	probes := sampleProbes(t, p)
	run := k.injectAll(faults, topics, progressBound, p.alive, commits)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	waitCommitted(t, adm, app, in, records, 5*time.Minute, p)
	p.alive()
	retries := fmt.Sprintf("%s, %d task restarts (resumed from the committed offsets), %d tasks back to committing",
		retryLogs(p), p.logCount("task resumed from its committed offsets"), p.logCount("task commits again"))
	probed := probes.report(t) // before the stop, which ends the probes too
	p.stop()
	rep := checkExactlyOnce(t, out, want)
	t.Logf("count under %d faults: %s; the process never exited; %s%s", len(run.Faults), rep, retries, run)
	t.Logf("what the stage logged at warn level, by message: %s", warnings(p))
	t.Logf("probes through the faults: %s", probed)
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

// probeSampler reads a stage's probes every half second, on its own
// goroutine, from start to stop: liveness must hold throughout (a stage
// waiting out an outage is alive), and readiness is expected to say "not
// ready" at times (a task restarting, a group session being rejoined).
type probeSampler struct {
	stopped, done chan struct{}

	mu           sync.Mutex
	n, notReady  int
	failures     []string
	lastNotReady string
}

func sampleProbes(t *testing.T, p *proc) *probeSampler {
	t.Helper()
	base := strings.TrimSuffix(p.metricsURL(), "/metrics")
	s := &probeSampler{stopped: make(chan struct{}), done: make(chan struct{})}
	cl := &http.Client{Timeout: 5 * time.Second}
	get := func(path string) (int, string, error) {
		resp, err := cl.Get(base + path)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.TrimSpace(string(body)), nil
	}
	go func() {
		defer close(s.done)
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-s.stopped:
				return
			case <-tick.C:
			}
			live, liveBody, liveErr := get(health.LivenessPath)
			ready, readyBody, readyErr := get(health.ReadinessPath)
			s.mu.Lock()
			s.n++
			switch {
			case liveErr != nil:
				s.failures = append(s.failures, liveErr.Error())
			case live != http.StatusOK:
				s.failures = append(s.failures, liveBody)
			}
			if readyErr == nil && ready != http.StatusOK {
				s.notReady++
				s.lastNotReady = readyBody
			}
			s.mu.Unlock()
		}
	}()
	t.Cleanup(s.stop)
	return s
}

func (s *probeSampler) stop() {
	select {
	case <-s.stopped:
	default:
		close(s.stopped)
	}
	<-s.done
}

// report stops sampling, fails t if liveness ever failed, and says what
// was sampled.
func (s *probeSampler) report(t *testing.T) string {
	t.Helper()
	s.stop()
	if len(s.failures) > 0 {
		t.Errorf("liveness failed in %d of %d samples while the stage rode out the faults, e.g. %s", len(s.failures), s.n, s.failures[0])
	}
	return fmt.Sprintf("liveness 200 in %d of %d samples (every 500 ms); readiness 503 in %d, e.g. %s",
		s.n-len(s.failures), s.n, s.notReady, s.lastNotReady)
}

// Outages longer than the tier's: two of the three nodes down for a minute
// (the controller quorum and min.insync.replicas both lost: nothing can be
// written or elected), then all three for three minutes (longer than the
// 60 s transaction timeout and the 2-minute liveness limit). The one
// `flecht run` waits both out, alive throughout, and resumes; the output
// is exact. Opt-in (FLECHT_E2E_SLOW=1): about 15 minutes.
func TestClusterCountLongOutages(t *testing.T) {
	if os.Getenv("FLECHT_E2E_SLOW") == "" {
		t.Skip("about 15 minutes; set FLECHT_E2E_SLOW=1")
	}
	const (
		records    = 60_000
		partitions = 6
		keys       = 500
	)
	k := clusterNodes(t)
	app := topicName(t, "app")
	in, out := topicName(t, "in"), topicName(t, "out")
	createTopic(t, in, partitions, nil)
	createTopic(t, out, partitions, nil)
	k.waitWhole([]string{in, out})
	p := startRun(t, countStage(t, app, in, out, "crash", 500), "count-0", t.TempDir())
	prod := inputProducer(t)
	want := map[string]input{}
	var produced atomic.Int64
	done := make(chan error, 1)
	go func() {
		// A slice every 5 s, retried through the outages.
		for s := range 120 {
			from, to := s*records/120, (s+1)*records/120
			got, err := produceInputsErr(testCtx(t, 15*time.Minute), prod, in, partitions, from, to, keys, 100)
			if err != nil {
				done <- err
				return
			}
			for id, v := range got {
				want[id] = v
			}
			produced.Store(int64(to))
			time.Sleep(5 * time.Second)
		}
		done <- nil
	}()
	adm := admin(t)
	waitCommitted(t, adm, app, in, 1000, 2*time.Minute, p)
	probes := sampleProbes(t, p)
	alive := p.alive
	down := func(nodes []int32, d time.Duration) {
		k.note("fault: SIGKILL nodes %v, down for %s", nodes, d)
		for _, n := range nodes {
			k.op(n, "kill")
		}
		until := time.Now().Add(d)
		for time.Now().Before(until) {
			alive()
			time.Sleep(100 * time.Millisecond)
		}
		var wg sync.WaitGroup
		for _, n := range nodes {
			wg.Go(func() {
				if out, err := exec.Command(k.script, "node", strconv.Itoa(int(n)), "start").CombinedOutput(); err != nil {
					t.Errorf("node %d start: %v\n%s", n, err, out)
				}
			})
		}
		wg.Wait()
		whole := k.waitWhole([]string{in, out})
		healed := time.Now()
		before, _ := p.tryMetric("flechtwerk_transactions_committed_total")
		waitUntil(t, progressBound, "a commit after the outage", func() bool {
			alive()
			v, err := p.tryMetric("flechtwerk_transactions_committed_total")
			return err == nil && v > before
		})
		k.note("whole %s after the start; a commit %s after that", whole.Round(100*time.Millisecond), time.Since(healed).Round(100*time.Millisecond))
	}
	two := k.rnd.Perm(3)[:2]
	down([]int32{int32(two[0] + 1), int32(two[1] + 1)}, time.Minute)
	waitCommitted(t, adm, app, in, produced.Load(), 3*time.Minute, p)
	down([]int32{1, 2, 3}, 3*time.Minute)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	waitCommitted(t, adm, app, in, records, 5*time.Minute, p)
	p.alive()
	retries := fmt.Sprintf("%s, %d task restarts", retryLogs(p), p.logCount("task resumed from its committed offsets"))
	probed := probes.report(t)
	p.stop()
	rep := checkExactlyOnce(t, out, want)
	t.Logf("count through two nodes down for 1 min and all three for 3 min: %s; the process never exited; %s", rep, retries)
	t.Logf("what the stage logged at warn level, by message: %s", warnings(p))
	t.Logf("probes through the outages: %s", probed)
}
