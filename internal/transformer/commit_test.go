package transformer_test

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/metrics"
)

// The commit interval: a task's transaction spans the polls that arrive
// within commit_interval, capped by max_transaction_records, and ends
// cleanly on revoke and on stop. Each test sets a long interval, so a
// commit seen before it elapses was made by the cap, the revoke or the
// stop, never by the timer.

// commitStage is count with a small poll and the given interval and cap.
func commitStage(interval string, maxRecords int) string {
	return fmt.Sprintf(`
application_id: count-app
kind: transformer
input_topics: [raw]
max_poll_records: 10
commit_interval: %s
max_transaction_records: %d
transform: {builtin: count, output_topic: refined}
`, interval, maxRecords)
}

// One transaction holds the records of several polls: until the interval
// ends nothing is visible to a read_committed reader and no offset is
// committed, then all of it is, in a single transaction.
func TestTransactionSpansSeveralPolls(t *testing.T) {
	f := newFixture(t)
	f.topics(1, "raw", "refined")
	f.produce("raw", keyed(50, 5, "a")...)
	st := stageFile(t, commitStage("6s", 1000))
	r := f.start(st, t.TempDir(), "c")
	opened := time.Now()
	waitFor(t, 30*time.Second, "50 records processed", func() bool { return metrics.Value(r.obs.MessagesIn) == 50 })
	if time.Since(opened) < 5*time.Second { // the check below is only meaningful inside the interval
		if at := f.committed("count-app", "raw", 0); at > 0 {
			t.Fatalf("offset %d committed while the transaction should still be open", at)
		}
		if n := len(f.read("refined")); n != 0 {
			t.Fatalf("%d outputs visible before the transaction committed", n)
		}
	}
	waitFor(t, 30*time.Second, "offset 50 committed", func() bool { return f.committed("count-app", "raw", 0) == 50 })
	// The broker has the commit before the task has its answer and counts it.
	waitFor(t, 10*time.Second, "the task to count its commit", func() bool {
		return metrics.Value(r.obs.TxnCommitted) >= 1 && metrics.Value(r.obs.BatchProcessing) >= metrics.Value(r.obs.BatchSize)
	})
	if polls := metrics.Value(r.obs.BatchSize); polls < 5 {
		t.Errorf("%v polls for 50 records at max_poll_records 10", polls)
	}
	if txns := metrics.Value(r.obs.TxnCommitted); txns != 1 {
		t.Errorf("%v transactions, want the 5 polls in 1", txns)
	}
	// Each poll is observed once, when the transaction holding it
	// committed: after the interval, not before.
	if n := metrics.Value(r.obs.BatchProcessing); n != metrics.Value(r.obs.BatchSize) {
		t.Errorf("batch_processing_seconds observed %v polls of %v", n, metrics.Value(r.obs.BatchSize))
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	for k, n := range checkSeq(t, f.read("refined")) {
		if n != 10 {
			t.Errorf("key %s: %d outputs, want 10", k, n)
		}
	}
}

// The record cap commits a transaction early, long before the interval;
// the next records go on meanwhile, their state carried over from the
// transaction that is committing.
func TestTransactionRecordCap(t *testing.T) {
	f := newFixture(t)
	f.topics(1, "raw", "refined")
	f.produce("raw", keyed(100, 3, "a")...)
	st := stageFile(t, commitStage("30s", 20))
	r := f.start(st, t.TempDir(), "c")
	// Well inside the 30s interval: only the cap commits this soon.
	waitFor(t, 20*time.Second, "offset 100 committed", func() bool { return f.committed("count-app", "raw", 0) == 100 })
	waitFor(t, 10*time.Second, "the task to count its commits", func() bool { return metrics.Value(r.obs.TxnCommitted) >= 5 })
	if txns := metrics.Value(r.obs.TxnCommitted); txns != 5 {
		t.Errorf("%v transactions for 100 records at a cap of 20, want 5", txns)
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	out := f.read("refined")
	if len(out) != 100 {
		t.Fatalf("%d outputs, want 100", len(out))
	}
	checkSeq(t, out)
	latest := map[string]string{}
	for _, c := range f.read("count-app-changelog") {
		latest[string(c.Key)] = string(c.Value)
	}
	if latest["key-0"] != `{"seq":34}` || latest["key-2"] != `{"seq":33}` {
		t.Errorf("changelog latest %v", latest)
	}
}

// Stopping (SIGTERM) while a transaction is open commits it before the
// group is left: nothing waits for the interval, nothing is redone.
func TestStopCommitsTheOpenTransaction(t *testing.T) {
	f := newFixture(t)
	f.topics(1, "raw", "refined")
	f.produce("raw", keyed(30, 3, "a")...)
	st := stageFile(t, commitStage("30s", 1000))
	r := f.start(st, t.TempDir(), "c")
	waitFor(t, 30*time.Second, "30 records processed", func() bool { return metrics.Value(r.obs.MessagesIn) == 30 })
	if at := f.committed("count-app", "raw", 0); at > 0 {
		t.Fatalf("offset %d committed before the stop, inside a 30s interval", at)
	}
	stopped := time.Now()
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(stopped); took > 20*time.Second {
		t.Errorf("stop took %s", took)
	}
	if at := f.committed("count-app", "raw", 0); at != 30 {
		t.Fatalf("offset %d after the stop, want 30", at)
	}
	if out := f.read("refined"); len(out) != 30 {
		t.Fatalf("%d outputs after the stop, want 30", len(out))
	}
}

// A rebalance revokes only the tasks that move (the cooperative task
// assignment): A holds four tasks inside a 30s interval, B joins, and the
// two tasks that go to B commit their open transactions at once, while
// the two A keeps go on with theirs open: nothing of them is committed
// before the interval ends. Under an eager assignment every task would be
// revoked and commit.
func TestRevokeCommitsOnlyTheTasksThatMove(t *testing.T) {
	f := newFixture(t)
	f.topics(4, "raw", "refined")
	f.produce("raw", keyed(80, 16, "a")...)
	st := stageFile(t, commitStage("30s", 1000))
	dir := t.TempDir()
	opened := time.Now() // no transaction of A's opens before this
	a := f.start(st, filepath.Join(dir, "a"), "a")
	waitFor(t, 30*time.Second, "A to process 80 records", func() bool { return metrics.Value(a.obs.MessagesIn) == 80 })
	inputs := map[int32]int64{}
	for _, r := range f.read("raw") {
		inputs[r.Partition]++
	}
	for p := range int32(4) {
		if at := f.committed("count-app", "raw", p); at > 0 {
			t.Fatalf("partition %d: offset %d committed inside a 30s interval", p, at)
		}
	}

	b := f.start(st, filepath.Join(dir, "b"), "b")
	// Well inside the interval: only the revoke commits this soon.
	waitFor(t, 20*time.Second, "the revoke to commit the open transactions of the tasks that move", func() bool {
		return f.committed("count-app", "raw", 2) == inputs[2] && f.committed("count-app", "raw", 3) == inputs[3]
	})
	waitFor(t, 20*time.Second, "the tasks to be split", func() bool {
		return metrics.Value(a.obs.TasksAssigned) == 2 && metrics.Value(b.obs.TasksAssigned) == 2
	})
	if took := time.Since(opened); took > 28*time.Second {
		t.Fatalf("the rebalance ended %s after A started: too close to its 30s interval to tell a revoke's commit from the interval's", took)
	}
	for p := range int32(2) {
		if at := f.committed("count-app", "raw", p); at > 0 {
			t.Errorf("partition %d stayed with A but committed offset %d on the rebalance: its task was revoked", p, at)
		}
	}

	f.produce("raw", keyed(80, 16, "b")...)
	if err := b.stop(t); err != nil { // commits B's open transactions, A takes over again
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "A to hold every task", func() bool { return metrics.Value(a.obs.TasksAssigned) == 4 })
	// B's stop committed what it read; A reads the rest of B's partitions
	// from there, and its stop commits them.
	waitFor(t, 30*time.Second, "every input read", func() bool {
		return metrics.Value(a.obs.MessagesIn)+metrics.Value(b.obs.MessagesIn) == 160
	})
	if err := a.stop(t); err != nil {
		t.Fatal(err)
	}
	out := f.read("refined")
	if len(out) != 160 {
		t.Fatalf("%d outputs, want 160", len(out))
	}
	for k, n := range checkSeq(t, out) {
		if n != 10 {
			t.Errorf("key %s: %d outputs, want 10", k, n)
		}
	}
}

// Records that are not in the canonical form (keys out of order) take the
// decoding path and come out canonical, mixed with fast-path records in
// one transaction.
func TestNonCanonicalInputTakesTheDecodingPath(t *testing.T) {
	f := newFixture(t)
	f.topics(1, "raw", "refined")
	f.produce("raw",
		&kgo.Record{Key: []byte("k"), Value: []byte(`{"b":1,"a":2}`)},
		&kgo.Record{Key: []byte("k"), Value: []byte(`{"a":2,"b":1}`)},
		&kgo.Record{Key: []byte("k"), Value: []byte(`{ "a" : "\u00e9" }`)},
	)
	r := f.start(stageFile(t, commitStage("50ms", 1000)), t.TempDir(), "c")
	waitFor(t, 30*time.Second, "offset 3", func() bool { return f.committed("count-app", "raw", 0) == 3 })
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range f.read("refined") {
		got = append(got, string(o.Value))
	}
	want := []string{`{"a":2,"b":1,"seq":1}`, `{"a":2,"b":1,"seq":2}`, `{"a":"é","seq":3}`}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("outputs %q, want %q", got, want)
	}
}
