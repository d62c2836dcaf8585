package lease_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/devenv/devenvtest"
	"github.com/flecht-dev/flecht/internal/health"
	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/lease"
	"github.com/flecht-dev/flecht/internal/logx/logxtest"
	"github.com/flecht-dev/flecht/internal/metrics"
	"github.com/flecht-dev/flecht/internal/state"
)

func setup(t *testing.T) (lease.Spec, *kgo.Client) {
	t.Helper()
	env := devenvtest.Start(t)
	cl := devenvtest.KafkaClient(t, env, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx := context.Background()
	if err := kafkax.CreateTopic(ctx, kadm.NewClient(cl), "app-changelog", 3, map[string]string{"cleanup.policy": "compact"}); err != nil {
		t.Fatal(err)
	}
	return lease.Spec{
		Cluster: &kafkax.Cluster{Brokers: []string{env.KafkaAddr()}}, Admin: cl,
		ApplicationID: "app", ClientID: "c0", StateDir: t.TempDir(), Changelog: "app-changelog",
		What: "task", ProducerOpts: []kgo.Opt{kgo.TransactionTimeout(10 * time.Second)},
	}, cl
}

// Start fences the previous holder of <app>-<n> before it restores
// changelog partition n (and only n). The old holder left a write ("z") in
// an open transaction, and a committed record ("late") follows it in the
// log: under read_committed the open transaction holds the last stable
// offset before both. Fencing first aborts the transaction, so the restore
// reads past it at once, finding "late" and not "z". A restore before the
// fence would stop short of "late" (reading to the stable offset) or wait
// for the transaction timeout (reading to the high watermark).
func TestStartFencesAndRestores(t *testing.T) {
	spec, cl := setup(t)
	ctx := context.Background()
	recs := []*kgo.Record{
		state.ChangelogRecord("app-changelog", 1, "a", []byte(`{"seq":1}`)),
		state.ChangelogRecord("app-changelog", 1, "b", []byte(`{"seq":2}`)),
		state.ChangelogRecord("app-changelog", 2, "c", []byte(`{"seq":3}`)),
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	const txnTimeout = time.Minute // the broker must not abort the old transaction itself
	oldSpec := spec
	oldSpec.ProducerOpts = []kgo.Opt{kgo.TransactionTimeout(txnTimeout)}
	old, err := lease.Start(ctx, &oldSpec, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if old.TxnID != "app-1" || old.N != 1 {
		t.Fatalf("lease %d %q, want 1 app-1", old.N, old.TxnID)
	}
	if err := old.Prod.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	old.Prod.Produce(ctx, state.ChangelogRecord("app-changelog", 1, "z", []byte(`{"seq":9}`)), nil)
	if err := old.Prod.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, state.ChangelogRecord("app-changelog", 1, "late", []byte(`{"seq":4}`))).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if stable, end := offsets(t, cl, 1); stable >= end {
		t.Fatalf("stable offset %d, end %d: the old transaction is not open", stable, end)
	}

	other := spec // another instance: its own state dir
	other.StateDir, other.ClientID = t.TempDir(), "c1"
	startCtx, cancel := context.WithTimeout(ctx, txnTimeout/2)
	defer cancel()
	began := time.Now()
	l, err := lease.Start(startCtx, &other, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	took := time.Since(began)
	for key, want := range map[string]bool{"a": true, "b": true, "late": true, "z": false, "c": false} {
		if _, ok, err := l.Store.Get(key); err != nil || ok != want {
			t.Errorf("restored %q: present %v (%v), want %v", key, ok, err, want)
		}
	}
	if stable, end := offsets(t, cl, 1); stable != end {
		t.Errorf("after Start: stable offset %d, end %d: the old transaction is still open", stable, end)
	}
	if took > 10*time.Second {
		t.Errorf("Start took %v: it waited for the open transaction", took)
	}

	// The first holder is fenced: the new lease holds the same producer
	// with a newer epoch, the old transaction cannot commit, and "z" never
	// becomes visible.
	oldID, oldEpoch, _ := old.Prod.ProducerID(ctx)
	newID, newEpoch, err := l.Prod.ProducerID(ctx)
	if err != nil || newID != oldID || newEpoch <= oldEpoch {
		t.Errorf("old producer %d epoch %d, new %d epoch %d (%v): want the same producer, a newer epoch", oldID, oldEpoch, newID, newEpoch, err)
	}
	if err := old.Prod.EndTransaction(ctx, kgo.TryCommit); err == nil {
		t.Fatal("the fenced holder committed its transaction")
	}
	committed, err := kafkax.ReadToEnd(ctx, cl, "app-changelog")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range committed {
		if string(r.Key) == "z" {
			t.Fatalf("the fenced holder's write is visible at offset %d", r.Offset)
		}
	}
}

// offsets returns partition p's last stable offset (what read_committed
// may read to) and its high watermark.
func offsets(t *testing.T, cl *kgo.Client, p int32) (stable, end int64) {
	t.Helper()
	adm := kadm.NewClient(cl)
	ctx := context.Background()
	lso, err := adm.ListCommittedOffsets(ctx, "app-changelog")
	if err != nil {
		t.Fatal(err)
	}
	hwm, err := adm.ListEndOffsets(ctx, "app-changelog")
	if err != nil {
		t.Fatal(err)
	}
	s, _ := lso.Lookup("app-changelog", p)
	e, _ := hwm.Lookup("app-changelog", p)
	return s.Offset, e.Offset
}

// A stateless spec opens no store.
func TestStartStateless(t *testing.T) {
	spec, _ := setup(t)
	spec.Changelog = ""
	l, err := lease.Start(context.Background(), &spec, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if l.Store != nil {
		t.Fatal("a stateless lease opened a store")
	}
	if entries, _ := os.ReadDir(spec.StateDir); len(entries) != 0 {
		t.Fatalf("state dir holds %d entries", len(entries))
	}
}

// The set's bookkeeping: one lease per number across topics, started in
// order, closed (its state wiped) on revoke, everything closed at the end.
func TestSetAssignStartRevoke(t *testing.T) {
	spec, _ := setup(t)
	ctx := context.Background()
	s := lease.NewSet(spec)
	s.Assign(map[string][]int32{"in-a": {2, 0}, "in-b": {0, 2}})
	if got := s.Pending(); !slices.Equal(got, []int32{0, 2}) {
		t.Fatalf("pending %v, want [0 2]", got)
	}
	var started []int32
	if err := s.StartPending(ctx, func(n int32) { started = append(started, n) }); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(started, []int32{0, 2}) || s.Len() != 2 || len(s.Pending()) != 0 {
		t.Fatalf("started %v, held %d, pending %v", started, s.Len(), s.Pending())
	}
	l0, ok := s.Get(0)
	if !ok || l0.N != 0 {
		t.Fatal("lease 0 not held")
	}
	if _, ok := s.Get(1); ok {
		t.Fatal("lease 1 held but never assigned")
	}

	s.Assign(map[string][]int32{"in-a": {1}})
	s.Revoke(map[string][]int32{"in-a": {0, 1}, "in-b": {0}})
	if _, ok := s.Get(0); ok || s.Len() != 1 || len(s.Pending()) != 0 {
		t.Fatalf("after revoke: held %d, pending %v", s.Len(), s.Pending())
	}
	// The revoked lease's store stays, with its checkpoint, for the next
	// start of 0 here.
	kept, err := state.Open(filepath.Join(spec.StateDir, "0"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if cp, ok, err := kept.Checkpoint(); err != nil || !ok || cp.ApplicationID != "app" || cp.Partition != 0 {
		t.Fatalf("revoked lease's store kept no checkpoint: %+v, %v, %v", cp, ok, err)
	}
	kept.Close()

	s.Assign(map[string][]int32{"in-a": {1}})
	s.CloseAll()
	if s.Len() != 0 || len(s.Pending()) != 0 {
		t.Fatalf("after CloseAll: held %d, pending %v", s.Len(), s.Pending())
	}
	kept, err = state.Open(filepath.Join(spec.StateDir, "2"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if cp, ok, err := kept.Checkpoint(); err != nil || !ok || cp.Partition != 2 {
		t.Fatalf("closed lease's store kept no checkpoint: %+v, %v, %v", cp, ok, err)
	}
	kept.Close()
}

// A lease started again on the same state directory keeps its store and
// reads only the changelog written since it closed, here by another owner;
// the restore's kind and size are logged and counted. Another instance,
// with a directory of its own, restores in full, and both hold the same.
func TestStartTailsTheKeptStore(t *testing.T) {
	spec, cl := setup(t)
	ctx := context.Background()
	logs := &logxtest.Buffer{}
	spec.Log = logs.Logger()
	spec.Metrics = metrics.New(nil)
	write := func(l *lease.Lease, kv ...string) {
		t.Helper()
		if err := l.Prod.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		var end int64
		var writes []state.Write
		for i := 0; i < len(kv); i += 2 {
			r, err := l.Prod.ProduceSync(ctx, state.ChangelogRecord("app-changelog", 1, kv[i], []byte(kv[i+1]))).First()
			if err != nil {
				t.Fatal(err)
			}
			end = r.Offset + 1
			writes = append(writes, state.Write{Key: kv[i], Value: []byte(kv[i+1])})
		}
		if err := l.Prod.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatal(err)
		}
		if err := l.Store.Apply(writes, state.Position{Offset: end, Since: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	if err := cl.ProduceSync(ctx, state.ChangelogRecord("app-changelog", 1, "a", []byte(`{"seq":1}`))).FirstErr(); err != nil {
		t.Fatal(err)
	}
	first, err := lease.Start(ctx, &spec, 1)
	if err != nil {
		t.Fatal(err)
	}
	if first.Restore.Tail || first.Restored != 1 {
		t.Fatalf("first start: %+v, %d records, want a full restore of 1", first.Restore, first.Restored)
	}
	write(first, "b", `{"seq":1}`, "c", `{"seq":1}`)
	first.Close()

	other := spec
	other.StateDir = t.TempDir()
	second, err := lease.Start(ctx, &other, 1)
	if err != nil {
		t.Fatal(err)
	}
	write(second, "a", `{"seq":2}`)
	second.Close()

	third, err := lease.Start(ctx, &spec, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer third.Close()
	if !third.Restore.Tail || third.Restored != 1 {
		t.Errorf("restart: %+v, %d records, want a tail of the 1 the other owner wrote", third.Restore, third.Restored)
	}
	for k, want := range map[string]string{"a": `{"seq":2}`, "b": `{"seq":1}`, "c": `{"seq":1}`} {
		if v, _, err := third.Store.Get(k); err != nil || string(v) != want {
			t.Errorf("%s = %q (%v), want %q", k, v, err, want)
		}
	}
	if n := metrics.Value(spec.Metrics.StateRestores.WithLabelValues("tail")); n != 1 {
		t.Errorf("tail restores counted: %v", n)
	}
	if n := metrics.Value(spec.Metrics.StateRestores.WithLabelValues("full")); n != 2 {
		t.Errorf("full restores counted: %v, want the first start's and the other instance's", n)
	}
	if !strings.Contains(logs.String(), `msg="task restored" n=1 restore=full from=0`) ||
		!strings.Contains(logs.String(), `why="no local store"`) ||
		!strings.Contains(logs.String(), `msg="task restored" n=1 restore=tail`) {
		t.Errorf("the restores are not logged with their kind:\n%s", logs)
	}
}

// A failed start is returned and leaves the number pending, so nothing
// half-started is held.
func TestSetStartFailure(t *testing.T) {
	spec, _ := setup(t)
	spec.Changelog = "no-such-changelog"
	s := lease.NewSet(spec)
	s.Assign(map[string][]int32{"in": {0}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.StartPending(ctx, nil); err == nil {
		t.Fatal("a restore from a missing changelog succeeded")
	}
	if s.Len() != 0 || !slices.Equal(s.Pending(), []int32{0}) {
		t.Fatalf("held %d, pending %v", s.Len(), s.Pending())
	}
}

// The set tells readiness where the member stands: not ready before it
// joined, nor while an assigned lease waits to be fenced and restored;
// ready once every one started, also after a revocation leaves it fewer;
// not ready after a lost session until it started what it is assigned
// again, nor while a lease restarts; not ready once closed. A restore beats the progress loop as it reads, so
// a long one is not taken for a stall.
func TestSetReportsReadiness(t *testing.T) {
	spec, cl := setup(t)
	ctx := context.Background()
	var recs []*kgo.Record
	for i := range 600 {
		recs = append(recs, state.ChangelogRecord("app-changelog", 0, fmt.Sprintf("k%d", i), []byte(`{"n":1}`)))
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		now   = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		beats int
	)
	// Every call to the clock after registration is a beat (or a probe,
	// which this test does not make while restoring).
	reg := health.New(health.Clock(func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		beats++
		return now
	}))
	spec.Ready = reg.Condition("group", "not joined yet")
	spec.Progress = reg.Loop("poll", time.Minute)
	s := lease.NewSet(spec)
	ready := func() (bool, string) {
		r := reg.Readiness()
		return r.OK, r.Checks[0].Detail
	}
	if ok, d := ready(); ok || d != "not joined yet" {
		t.Fatalf("before joining: %v %q", ok, d)
	}
	s.Assign(map[string][]int32{"in": {0, 1}})
	if ok, d := ready(); ok || d != "joined group app; 0 tasks started, task [0 1] waiting to be fenced and restored" {
		t.Fatalf("assigned: %v %q", ok, d)
	}
	mu.Lock()
	beats = 0
	mu.Unlock()
	if err := s.StartPending(ctx, nil); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	got := beats
	mu.Unlock()
	// 600 records restored for partition 0: two beats while reading (every
	// 256), one before each restore and one after each start.
	if got < 2+2+2 {
		t.Fatalf("restoring 600 records beat the loop %d times", got)
	}
	if ok, d := ready(); !ok || d != "joined group app; every assigned task started (2 tasks)" {
		t.Fatalf("started: %v %q", ok, d)
	}
	s.Revoke(map[string][]int32{"in": {1}})
	if ok, d := ready(); !ok || d != "joined group app; every assigned task started (1 task)" {
		t.Fatalf("after a revoke: %v %q", ok, d)
	}
	s.Lost("its session was lost")
	if ok, d := ready(); ok || d != "rejoining group app: its session was lost" || s.Len() != 0 {
		t.Fatalf("after a lost session: %v %q, %d held", ok, d, s.Len())
	}
	s.Assign(map[string][]int32{"in": {1}})
	if ok, d := ready(); ok || d != "joined group app; 0 tasks started, task [1] waiting to be fenced and restored" {
		t.Fatalf("assigned again: %v %q", ok, d)
	}
	if err := s.StartPending(ctx, nil); err != nil {
		t.Fatal(err)
	}
	s.Restart(1)
	if ok, d := ready(); ok || d != "joined group app; 0 tasks started, task [1] waiting to be fenced and restored" {
		t.Fatalf("restarting: %v %q", ok, d)
	}
	if err := s.StartPending(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if ok, d := ready(); !ok || d != "joined group app; every assigned task started (1 task)" {
		t.Fatalf("restarted: %v %q", ok, d)
	}
	s.CloseAll()
	if ok, d := ready(); ok || d != "stopped: left group app" {
		t.Fatalf("closed: %v %q", ok, d)
	}
}

// A stateful lease with no state directory (a default that could not be
// made from the application id) is refused before anything starts: its
// store would land in the working directory, which a full restore first
// empties.
func TestStartRefusesNoStateDir(t *testing.T) {
	spec := lease.Spec{ApplicationID: "app", Changelog: "app-changelog", What: "task"} // no cluster: nothing may connect
	l, err := lease.Start(context.Background(), &spec, 0)
	if err == nil || l != nil {
		t.Fatalf("started: %v", err)
	}
	if _, serr := os.Stat("0"); serr == nil {
		t.Error("a store 0 was made in the working directory")
	}
}
