//go:build e2e

package e2e

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/transformer"
)

// The transformer runner's exactly-once proofs (issue 4) on the real
// broker: `flecht run` processes killed, stopped, scaled and wiped, and a
// read_committed reader that finds every input exactly once with per-key
// seq 1..n afterwards.

// runnerTopics creates the input and output topics of a count stage and
// returns them with a fresh application id.
func runnerTopics(t *testing.T, partitions int32) (app, in, out string) {
	t.Helper()
	app, in, out = topicName(t, "app"), topicName(t, "in"), topicName(t, "out")
	createTopic(t, in, partitions, nil)
	createTopic(t, out, partitions, nil)
	return app, in, out
}

// Chaos: 1M keyed records through count while the process is SIGKILLed
// at random points, restarted each time with the same client id. (The
// input is sized so that a life lasts seconds: at the runner's speed since
// commit intervals, 100k records were done before a kill could land, and
// on a 2-core Xeon at 300k records/s, 400k were done before the fourth.)
func TestRunnerChaosKill(t *testing.T) {
	const (
		total      = 1_000_000
		keys       = 500
		partitions = 6
	)
	app, in, out := runnerTopics(t, partitions)
	want := produceInputs(t, inputProducer(t), in, partitions, 0, total, keys, 60)
	stageFile := countStage(t, app, in, out, "crash", 500)
	stateDir := t.TempDir()
	atKill := chaosKill(t, app, in, total, func() *proc { return startRun(t, stageFile, "chaos-0", stateDir) }, func(k int) {
		// The state kept across the kill, tailed, is the changelog's.
		read := checkKeptStores(t, app, stateDir, partitions)
		t.Logf("kill %d: every kept store, tailed (%d changelog records), equals its restore from scratch", k+1, read)
	})
	rep := checkExactlyOnce(t, out, want)
	read := checkKeptStores(t, app, stateDir, partitions)
	t.Logf("chaos: %d SIGKILLs at %v committed inputs; %s; after the last stop the kept stores equal the changelog, tails of %d records", len(atKill), atKill, rep, read)

	// flecht verify finds the same: every output once, and the count
	// builtin, rerun from the raw topic's start, makes every one of them.
	start := time.Now()
	audit, code := runVerify(t, append(os.Environ(), "FLECHT_BROKERS="+brokers, "NO_COLOR=1", "HOME="+t.TempDir()), stageFile)
	if code != 0 || audit.Total != 0 || !audit.ContentChecked || audit.Records != total {
		t.Fatalf("verify after the chaos: exit %d, %d records, content checked %v (%s), %d findings:\n%s", code, audit.Records, audit.ContentChecked, audit.ContentNotChecked, audit.Total, audit.named())
	}
	t.Logf("verify: %d outputs clean, content checked, in %s", audit.Records, time.Since(start).Round(time.Millisecond))
}

// chaosKill SIGKILLs the stage start starts at 4 random points, starting
// it again each time, then lets it take all total inputs of in; it returns
// how many inputs had committed at each kill. One kill lands early in a
// life, once the group has assigned the partitions (while fencing,
// restoring, or in the first batches); the others after a random share of
// the input has committed, plus a random delay, so they hit any phase of a
// batch. afterKill (when not nil) runs after each kill, before the next
// start.
func chaosKill(t *testing.T, app, in string, total int, start func() *proc, afterKill func(k int)) []int64 {
	t.Helper()
	const kills = 4
	adm := admin(t)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	var atKill []int64
	for k := range kills {
		p := start()
		var before int64
		if len(atKill) > 0 {
			before = atKill[len(atKill)-1]
		}
		if k == 1 {
			waitUntil(t, 2*time.Minute, "the restarted process to get its partitions", func() bool {
				return p.exited() || p.logCount("partitions assigned") > 0
			})
			time.Sleep(time.Duration(rng.IntN(500)) * time.Millisecond)
		} else {
			// Sevenths, so that the last kill (at most 65 %, plus the
			// random delay) still lands mid-run on a fast machine.
			target := int64(total)*int64(k+1)/7 + rng.Int64N(int64(total)/12)
			waitCommitted(t, adm, app, in, max(target, before+1), 3*time.Minute, p)
			time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
		}
		if p.exited() {
			t.Fatalf("flecht exited (%d) before the kill:\n%s", p.code, tail(p.logs(), 30))
		}
		p.kill()
		c, err := committed(testCtx(t, 30*time.Second), adm, app, in)
		if err != nil {
			t.Fatal(err)
		}
		if c <= 0 || c >= int64(total) {
			t.Fatalf("kill %d was not mid-run: %d of %d inputs committed", k+1, c, total)
		}
		atKill = append(atKill, c)
		t.Logf("kill %d: SIGKILL with %d of %d inputs committed", k+1, c, total)
		if afterKill != nil {
			afterKill(k)
		}
	}
	p := start()
	waitCommitted(t, adm, app, in, int64(total), 5*time.Minute, p)
	p.stop()
	return atKill
}

// Zombie: instance A is frozen with a transaction open; B takes its
// partitions, and its task producers (same static transactional ids) fence
// A. Thawed, A either tries its stale transaction first, is rejected and
// exits non-zero naming the fence, or hears first that its group session
// expired, drops its tasks uncommitted and joins again as a new member
// (what a stage paused by a long GC should do); which comes first is a
// race. Either way nothing of its stale transaction is committed: the
// output is exactly once.
func TestRunnerZombieFenced(t *testing.T) {
	const (
		chunk      = 60_000
		keys       = 300
		partitions = 6
	)
	app, in, out := runnerTopics(t, partitions)
	prod := inputProducer(t)
	total := chunk
	want := produceInputs(t, prod, in, partitions, 0, total, keys, 60)
	stageFile := countStage(t, app, in, out, "crash", 200)
	adm := admin(t)

	a := startRun(t, stageFile, "zombie-a", t.TempDir())
	waitCommitted(t, adm, app, in, 3000, 2*time.Minute, a)

	txnIDs := make([]string, partitions)
	for p := range txnIDs {
		txnIDs[p] = fmt.Sprintf("%s-%d", app, p)
	}
	// Freeze A while one of its transactions is open (Ongoing on the
	// coordinator): that is "mid-batch". Preferably at the sharpest point,
	// after its TxnOffsetCommit and before its EndTxn: the input offsets
	// are then pending in the group (a stable offset fetch answers
	// UNSTABLE_OFFSET_COMMIT) and must vanish with the abort.
	var (
		open    map[string]int16 // transactional id → A's producer epoch
		pending []string         // partitions whose offset commit is pending
	)
	const attempts = 400
	for attempt := 1; ; attempt++ {
		time.Sleep(time.Duration(rand.IntN(30)) * time.Millisecond)
		a.signal(syscall.SIGSTOP)
		// A request A sent just before the stop still lands: look twice,
		// so that what is open stays open while A is frozen.
		time.Sleep(100 * time.Millisecond)
		open = ongoing(t, adm, txnIDs)
		pending = pendingOffsets(t, adm, app)
		time.Sleep(100 * time.Millisecond)
		if again := ongoing(t, adm, txnIDs); len(again) != len(open) {
			a.signal(syscall.SIGCONT)
			continue
		}
		if again := pendingOffsets(t, adm, app); len(again) != len(pending) {
			a.signal(syscall.SIGCONT)
			continue
		}
		c, err := committed(testCtx(t, 10*time.Second), adm, app, in)
		if err != nil {
			t.Fatal(err)
		}
		late := attempt >= attempts
		if len(pending) > 0 || (len(open) > 0 && late) {
			break
		}
		if late {
			t.Fatalf("could not freeze A while a transaction was open in %d attempts", attempt)
		}
		a.signal(syscall.SIGCONT)
		if c > int64(total)*3/4 {
			// A is close to the end: more input, so that it keeps
			// transactions open for the next attempts.
			for id, v := range produceInputs(t, prod, in, partitions, total, total+chunk, keys, 60) {
				want[id] = v
			}
			total += chunk
		}
	}
	frozenAt, err := committed(testCtx(t, 10*time.Second), adm, app, in)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("A frozen (SIGSTOP) with %d inputs committed, open transactions (id: epoch) %v, offsets pending for %v", frozenAt, open, pending)

	b := startRun(t, stageFile, "zombie-b", t.TempDir())
	// B gets every partition once A's session expires, and its task
	// producers fence A's transactional ids.
	waitUntil(t, 2*time.Minute, "B to start all six tasks", func() bool {
		if b.exited() {
			t.Fatalf("B exited (%d):\n%s", b.code, tail(b.logs(), 30))
		}
		return b.logCount("task started") >= partitions
	})
	ids := make([]string, 0, len(open))
	for id := range open {
		ids = append(ids, id)
	}
	described, err := adm.DescribeTransactions(testCtx(t, 10*time.Second), ids...)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range described.Sorted() {
		if d.ProducerEpoch <= open[d.TxnID] {
			t.Fatalf("B did not fence %s: epoch %d, A had %d", d.TxnID, d.ProducerEpoch, open[d.TxnID])
		}
	}

	thawed := time.Now()
	a.signal(syscall.SIGCONT)
	var outcome string
	waitUntil(t, 90*time.Second, "A to exit fenced or to rejoin the group", func() bool {
		errText := a.logs()
		if a.exited() {
			if a.code == 0 {
				t.Fatalf("A exited 0 after being fenced; stderr:\n%s", tail(errText, 30))
			}
			if !strings.Contains(strings.ToLower(errText), "fenc") && !strings.Contains(strings.ToLower(errText), "epoch") {
				t.Errorf("A's stderr does not name the fencing:\n%s", tail(errText, 30))
			}
			outcome = fmt.Sprintf("exited %d %s after SIGCONT: %s", a.code, time.Since(thawed).Round(time.Millisecond), lastLine(errText))
			return true
		}
		// Before the freeze A held every partition from its start: a
		// loss is its expired session, heard after the thaw.
		if lost := strings.Index(errText, `msg="partitions lost"`); lost >= 0 && strings.Contains(errText[lost:], `msg="partitions assigned"`) {
			outcome = fmt.Sprintf("heard its session had expired and rejoined the group, %s after SIGCONT", time.Since(thawed).Round(time.Millisecond))
			return true
		}
		return false
	})
	t.Logf("A %s", outcome)

	live := []*proc{b}
	if !a.exited() {
		live = append(live, a)
	}
	waitCommitted(t, adm, app, in, int64(total), 3*time.Minute, live...)
	for _, p := range live {
		p.stop()
	}
	rep := checkExactlyOnce(t, out, want)
	t.Logf("zombie: A frozen at %d committed, fenced by B, then %s; %s", frozenAt, outcome, rep)
}

// ongoing returns the open transactions among ids with their producer epochs.
func ongoing(t *testing.T, adm *kadm.Client, ids []string) map[string]int16 {
	t.Helper()
	described, err := adm.DescribeTransactions(testCtx(t, 10*time.Second), ids...)
	if err != nil {
		t.Fatal(err)
	}
	open := map[string]int16{}
	for _, d := range described.Sorted() {
		if d.State == "Ongoing" {
			open[d.TxnID] = d.ProducerEpoch
		}
	}
	return open
}

// pendingOffsets lists the partitions whose offset commit in group is part
// of a transaction still open: a stable fetch answers UNSTABLE_OFFSET_COMMIT.
func pendingOffsets(t *testing.T, adm *kadm.Client, group string) []string {
	t.Helper()
	offs, err := adm.FetchOffsets(kadm.RequireStable(testCtx(t, 10*time.Second)), group)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	offs.Each(func(o kadm.OffsetResponse) {
		if errors.Is(o.Err, kerr.UnstableOffsetCommit) {
			out = append(out, fmt.Sprintf("%s/%d", o.Topic, o.Partition))
		}
	})
	return out
}

func lastLine(s string) string {
	ls := strings.Split(strings.TrimSpace(s), "\n")
	return ls[len(ls)-1]
}

// Rebalance: one instance, then two, then one again while input streams
// in; the tasks move between them and their state follows.
func TestRunnerRebalance(t *testing.T) {
	const (
		keys       = 300
		partitions = 6
		chunk      = 500
	)
	app, in, out := runnerTopics(t, partitions)
	stageFile := countStage(t, app, in, out, "crash", 500)
	adm := admin(t)
	prod := inputProducer(t)

	// A steady stream, so every scaling step happens mid-stream.
	want := map[string]input{}
	type result struct {
		n   int
		err error
	}
	stop, stopped := make(chan struct{}), make(chan result, 1)
	streamCtx := testCtx(t, 10*time.Minute)
	go func() {
		n := 0
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				stopped <- result{n: n}
				return
			case <-tick.C:
			}
			got, err := produceInputsErr(streamCtx, prod, in, partitions, n, n+chunk, keys, 60)
			if err != nil {
				stopped <- result{n: n, err: err}
				return
			}
			for id, v := range got {
				want[id] = v
			}
			n += chunk
		}
	}()
	var stream *result
	endStream := func() int {
		if stream == nil {
			close(stop)
			r := <-stopped
			stream = &r
		}
		if stream.err != nil {
			t.Fatalf("producing the input stream: %v", stream.err)
		}
		return stream.n
	}
	defer func() {
		if stream == nil {
			close(stop)
			<-stopped
			stream = &result{}
		}
	}()

	a := startRun(t, stageFile, "scale-a", t.TempDir())
	c := waitCommitted(t, adm, app, in, 5000, 2*time.Minute, a)
	t.Logf("1 instance: %d committed, A started %d tasks", c, a.logCount("task started"))

	b := startRun(t, stageFile, "scale-b", t.TempDir())
	waitUntil(t, 2*time.Minute, "B to commit a transaction", func() bool {
		if b.exited() || a.exited() {
			t.Fatalf("an instance exited: A %v, B %v", a.exited(), b.exited())
		}
		v, err := b.tryMetric("flechtwerk_transactions_committed_total")
		return err == nil && v > 0
	})
	var ta, tb float64
	waitUntil(t, time.Minute, "the tasks to be split between A and B", func() bool {
		ta, tb = a.metric("flechtwerk_tasks_assigned"), b.metric("flechtwerk_tasks_assigned")
		return ta+tb == partitions && ta > 0 && tb > 0
	})
	c = waitCommitted(t, adm, app, in, c+5000, 2*time.Minute, a, b)
	t.Logf("2 instances: %d committed, tasks A %v + B %v", c, ta, tb)

	// B leaves with SIGTERM: it finishes its batch, exits 0, and A takes
	// its partitions back, restoring their state from the changelog.
	b.stop()
	waitUntil(t, 2*time.Minute, "A to hold all tasks again", func() bool {
		v, err := a.tryMetric("flechtwerk_tasks_assigned")
		return err == nil && v == partitions
	})
	c = waitCommitted(t, adm, app, in, c+5000, 2*time.Minute, a)
	t.Logf("1 instance again: %d committed", c)
	produced := endStream()
	waitCommitted(t, adm, app, in, int64(produced), 3*time.Minute, a)
	a.stop()
	rep := checkExactlyOnce(t, out, want)
	if a.logCount("task started") <= partitions || b.logCount("task started") == 0 {
		t.Errorf("tasks did not move: A started %d, B %d", a.logCount("task started"), b.logCount("task started"))
	}
	t.Logf("rebalance 1→2→1: A started %d tasks, B %d; %s", a.logCount("task started"), b.logCount("task started"), rep)
}

// Restore: the whole state directory is deleted between two runs; the
// state comes back from the changelog and the counters continue.
func TestRunnerRestoreAfterStateDirLoss(t *testing.T) {
	const (
		keys       = 60
		partitions = 6
		half       = 6000
	)
	app, in, out := runnerTopics(t, partitions)
	stageFile := countStage(t, app, in, out, "crash", 500)
	stateDir := filepath.Join(t.TempDir(), "state")
	adm := admin(t)
	prod := inputProducer(t)

	want := produceInputs(t, prod, in, partitions, 0, half, keys, 60)
	p := startRun(t, stageFile, "restore-0", stateDir)
	waitCommitted(t, adm, app, in, half, 2*time.Minute, p)
	p.stop()
	// (The tasks wipe their own stores on revoke; the directory itself
	// stays, and goes now.)
	if _, err := os.Stat(stateDir); err != nil {
		t.Fatalf("state dir after the first run: %v", err)
	}
	if err := os.RemoveAll(stateDir); err != nil {
		t.Fatal(err)
	}

	for id, v := range produceInputs(t, prod, in, partitions, half, 2*half, keys, 60) {
		want[id] = v
	}
	p = startRun(t, stageFile, "restore-0", stateDir)
	waitCommitted(t, adm, app, in, 2*half, 2*time.Minute, p)
	restored := p.metric("flechtwerk_state_restored_entries_total")
	p.stop()
	rep := checkExactlyOnce(t, out, want)
	if restored == 0 {
		t.Error("flechtwerk_state_restored_entries_total is 0 after a restart on a non-empty changelog")
	}
	t.Logf("restore: state dir deleted after %d inputs, %v changelog records restored; %s", half, restored, rep)
}

// Invalid: one undecodable record per policy.
func TestRunnerInvalidMessages(t *testing.T) {
	bad := []byte("\xff\xfe not json")
	// messages_invalid_total's outcome is upstream's value for what happened.
	outcome := map[string]string{"skip": "skipped", "dlq": "dead_lettered"}
	for _, policy := range []string{"crash", "skip", "dlq"} {
		t.Run(policy, func(t *testing.T) {
			app, in, out := runnerTopics(t, 1)
			stageFile := countStage(t, app, in, out, policy, 500)
			adm := admin(t)
			prod := inputProducer(t)
			produce := func(recs ...*kgo.Record) {
				t.Helper()
				for _, r := range recs {
					r.Topic = in
				}
				if err := prod.ProduceSync(testCtx(t, 30*time.Second), recs...).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}
			good := func(i int) *kgo.Record {
				return &kgo.Record{Key: []byte("k"), Value: fmt.Appendf(nil, `{"id":"%d"}`, i)}
			}
			produce(good(0), good(1), good(2), good(3), good(4))
			stateDir := t.TempDir()
			p := startRun(t, stageFile, "invalid-0", stateDir)
			waitCommitted(t, adm, app, in, 5, time.Minute, p)
			// The bad record is offset 5, alone in its batch: under skip
			// that batch's transaction carries nothing but the offset.
			produce(&kgo.Record{Key: []byte("k"), Value: bad})
			if policy != "crash" {
				waitCommitted(t, adm, app, in, 6, time.Minute, p)
			}
			produce(good(6), good(7), good(8))

			if policy == "crash" {
				code := p.wait(time.Minute)
				if code == 0 || !strings.Contains(p.logs(), "invalid message at "+in+"/0 offset 5") {
					t.Fatalf("crash policy: exit %d, stderr:\n%s", code, tail(p.logs(), 20))
				}
				if at := committedAt(t, adm, app, in, 0); at != 5 {
					t.Fatalf("committed offset %d after the crash, want 5 (not past the invalid record)", at)
				}
				// The record comes again after a restart, and stops it again.
				p = startRun(t, stageFile, "invalid-0", stateDir)
				if code := p.wait(time.Minute); code == 0 || !strings.Contains(p.logs(), "offset 5") {
					t.Fatalf("restart: exit %d, stderr:\n%s", code, tail(p.logs(), 20))
				}
				if at := committedAt(t, adm, app, in, 0); at != 5 {
					t.Fatalf("committed offset %d after the second crash, want 5", at)
				}
				if recs := readAll(t, out); len(recs) != 5 {
					t.Fatalf("%d outputs, want the 5 before the invalid record", len(recs))
				}
				return
			}

			waitCommitted(t, adm, app, in, 9, time.Minute, p)
			invalid := p.metric("flechtwerk_messages_invalid_total", `outcome="`+outcome[policy]+`"`, `topic="`+in+`"`)
			p.stop()
			if invalid != 1 {
				t.Errorf("flechtwerk_messages_invalid_total{outcome=%q} = %v, want 1", outcome[policy], invalid)
			}
			outs := readAll(t, out)
			if len(outs) != 8 || !strings.Contains(string(outs[7].Value), `"seq":8`) {
				t.Fatalf("%d outputs (want 8, the last with seq 8): %v", len(outs), outs)
			}
			if policy != "dlq" {
				return
			}
			dl := readAll(t, in+".dlq")
			if len(dl) != 1 {
				t.Fatalf("%s holds %d records, want 1", in+".dlq", len(dl))
			}
			d := dl[0]
			h := map[string]string{}
			for _, x := range d.Headers {
				h[x.Key] = string(x.Value)
			}
			if string(d.Value) != string(bad) || string(d.Key) != "k" {
				t.Errorf("dead letter key %q value %q, want the original bytes", d.Key, d.Value)
			}
			if h[transformer.HeaderDLQTopic] != in || h[transformer.HeaderDLQPartition] != "0" || h[transformer.HeaderDLQOffset] != "5" || h[transformer.HeaderDLQError] == "" {
				t.Errorf("dead letter headers %v", h)
			}
			if ts, err := time.Parse(time.RFC3339Nano, h[transformer.HeaderDLQTime]); err != nil || time.Since(ts) > 10*time.Minute {
				t.Errorf("dead letter time %q: %v", h[transformer.HeaderDLQTime], err)
			}
			t.Logf("dlq: %s error=%q", in+".dlq", h[transformer.HeaderDLQError])
		})
	}
}

func readAll(t *testing.T, topic string) []*kgo.Record {
	t.Helper()
	recs, err := kafkax.ReadToEnd(testCtx(t, time.Minute), client(t), topic)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}
