package doctor

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/devenv/devenvtest"
	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/status"
)

// unread reads a range as a read_committed consumer would: commit and
// abort markers and aborted records are nothing to read, a committed
// record is, a record past the range's end is not (it came after the
// sample), and a range an open transaction keeps undecided may be.
func TestUnreadSeesOnlyWhatAConsumerWouldRead(t *testing.T) {
	env := devenvtest.Start(t)
	cl := devenvtest.KafkaClient(t, env)
	ctx := context.Background()
	if err := kafkax.CreateTopic(ctx, kadm.NewClient(cl), "in", 1, nil); err != nil {
		t.Fatal(err)
	}
	txn := devenvtest.KafkaClient(t, env, kgo.TransactionalID("writer"), kgo.DefaultProduceTopic("in"))
	// write writes n records in a transaction and ends it (end nil: leaves
	// it open).
	write := func(end *kgo.TransactionEndTry, n int) {
		t.Helper()
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for range n {
			if err := txn.ProduceSync(ctx, &kgo.Record{Value: []byte(`{}`)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if end != nil {
			if err := txn.EndTransaction(ctx, *end); err != nil {
				t.Fatal(err)
			}
		}
	}
	tp := status.TP{Topic: "in", Partition: 0}
	check := func(what string, from, to int64, want bool) {
		t.Helper()
		got, err := unread(ctx, cl, map[status.TP][2]int64{tp: {from, to}})
		if err != nil || got != want {
			t.Errorf("%s [%d, %d): unread %v (%v), want %v", what, from, to, got, err, want)
		}
	}
	commit, abort := kgo.TryCommit, kgo.TryAbort
	write(&commit, 2) // records 0, 1; marker 2
	check("a commit marker", 2, 3, false)
	check("a committed record", 1, 3, true)
	write(&abort, 3) // aborted 3, 4, 5; marker 6
	check("aborted records and their marker", 2, 7, false)
	write(&commit, 1) // record 7; marker 8
	check("a record after the range", 2, 7, false)
	check("a record in the range", 2, 8, true)
	write(nil, 1) // record 9, its transaction open
	check("an open transaction", 8, 10, true)
	if err := txn.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
}

// countSince counts the records of a dead-letter topic written at or after
// a time, by their timestamps, as a read_committed reader sees them.
func TestCountSinceCountsRecordsAfterATime(t *testing.T) {
	env := devenvtest.Start(t)
	cl := devenvtest.KafkaClient(t, env, kgo.DefaultProduceTopic("in.dlq"))
	ctx := context.Background()
	if err := kafkax.CreateTopic(ctx, kadm.NewClient(cl), "in.dlq", 2, nil); err != nil {
		t.Fatal(err)
	}
	since := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	for i, at := range []time.Time{since.Add(-time.Minute), since, since.Add(time.Minute)} {
		rec := &kgo.Record{Key: []byte{byte('a' + i)}, Value: []byte(`{}`), Timestamp: at}
		if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	n, err := countSince(ctx, cl, "in.dlq", since)
	if err != nil || n != 2 {
		t.Fatalf("since the second record: %d, %v; want 2", n, err)
	}
	if n, err := countSince(ctx, cl, "in.dlq", since.Add(2*time.Minute)); err != nil || n != 0 {
		t.Fatalf("after the last: %d, %v", n, err)
	}
}
