package devenv_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/devenv"
	"github.com/flecht-dev/flecht/internal/devenv/devenvtest"
)

// flecht's pages may not outlive a 10-minute transaction (docs/contract.md §4).
const txnTimeout = 10 * time.Minute

func createTopic(t *testing.T, adm *kadm.Client, topic string, partitions int32, configs map[string]*string) {
	t.Helper()
	resp, err := adm.CreateTopic(t.Context(), partitions, -1, configs, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
}

// consumeToMarkers reads topic from the start until it has seen the value
// "end" on each of its partitions, and returns every other value.
func consumeToMarkers(t *testing.T, env *devenv.Env, topic string, partitions int, iso kgo.IsolationLevel) []string {
	t.Helper()
	cl := devenvtest.KafkaClient(t, env,
		kgo.ConsumeTopics(topic),
		kgo.FetchIsolationLevel(iso),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	ended := map[int32]bool{}
	var got []string
	for len(ended) < partitions {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consume %s: timed out with %d values, end markers from %d of %d partitions", topic, len(got), len(ended), partitions)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if string(r.Value) == "end" {
				ended[r.Partition] = true
				return
			}
			got = append(got, string(r.Value))
		})
	}
	return got
}

func TestTransactionsReadCommitted(t *testing.T) {
	env := devenvtest.Start(t)
	ctx := t.Context()
	const topic, partitions = "txn", 3
	createTopic(t, kadm.NewClient(devenvtest.KafkaClient(t, env)), topic, partitions, nil)

	prod := devenvtest.KafkaClient(t, env,
		kgo.TransactionalID("devenv-test-0"),
		kgo.TransactionTimeout(txnTimeout),
		kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
	)
	txn := func(commit bool, values func(p int) string) {
		t.Helper()
		if err := prod.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		var recs []*kgo.Record
		for p := range partitions {
			recs = append(recs, &kgo.Record{Partition: int32(p), Value: []byte(values(p))})
		}
		if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := prod.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}

	var committed, all []string
	for i := range 20 {
		commit := i%3 != 1 // commits and aborts interleave on every partition
		txn(commit, func(p int) string {
			v := fmt.Sprintf("txn%02d-p%d", i, p)
			all = append(all, v)
			if commit {
				committed = append(committed, v)
			}
			return v
		})
	}
	txn(true, func(int) string { return "end" })

	got := consumeToMarkers(t, env, topic, partitions, kgo.ReadCommitted())
	slices.Sort(got)
	slices.Sort(committed)
	if !slices.Equal(got, committed) {
		t.Errorf("read_committed saw %d values, want the %d committed:\n got %v\nwant %v", len(got), len(committed), got, committed)
	}

	// The aborted records are in the log: read_uncommitted sees them.
	// Without this the test above would pass on a broker that drops them.
	got = consumeToMarkers(t, env, topic, partitions, kgo.ReadUncommitted())
	slices.Sort(got)
	slices.Sort(all)
	if !slices.Equal(got, all) {
		t.Errorf("read_uncommitted saw %d values, want all %d", len(got), len(all))
	}
}

// TestTxnOffsetCommit runs the transformer's consume-transform-produce
// loop: input offsets commit for the group inside the transaction.
func TestTxnOffsetCommit(t *testing.T) {
	env := devenvtest.Start(t)
	ctx := t.Context()
	adm := kadm.NewClient(devenvtest.KafkaClient(t, env))
	createTopic(t, adm, "in", 2, nil)
	createTopic(t, adm, "out", 2, nil)

	const n = 50
	in := devenvtest.KafkaClient(t, env, kgo.DefaultProduceTopic("in"))
	for i := range n {
		r := &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "v%d", i)}
		if err := in.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	sess, err := kgo.NewGroupTransactSession(
		kgo.SeedBrokers(env.KafkaAddr()),
		kgo.TransactionalID("app-0"),
		kgo.TransactionTimeout(txnTimeout),
		kgo.ConsumerGroup("app"),
		kgo.ConsumeTopics("in"),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),

		kgo.DefaultProduceTopic("out"),
	)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()

	pollCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for seen := 0; seen < n; {
		fs := sess.PollFetches(pollCtx)
		if pollCtx.Err() != nil {
			t.Fatalf("timed out after %d of %d records", seen, n)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		if err := sess.Begin(); err != nil {
			t.Fatal(err)
		}
		var out []*kgo.Record
		fs.EachRecord(func(r *kgo.Record) {
			out = append(out, &kgo.Record{Key: r.Key, Value: append([]byte("out-"), r.Value...)})
		})
		if err := sess.ProduceSync(ctx, out...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		ok, err := sess.End(ctx, kgo.TryCommit)
		if err != nil || !ok {
			t.Fatalf("end transaction: committed=%v err=%v", ok, err)
		}
		seen += len(out)
	}

	ends, err := adm.ListEndOffsets(ctx, "in")
	if err != nil {
		t.Fatal(err)
	}
	committed, err := adm.FetchOffsets(ctx, "app")
	if err != nil {
		t.Fatal(err)
	}
	ends.Each(func(o kadm.ListedOffset) {
		c, ok := committed.Lookup(o.Topic, o.Partition)
		if !ok || c.Err != nil || c.At != o.Offset {
			t.Errorf("group app at in/%d: committed %+v, want offset %d", o.Partition, c, o.Offset)
		}
	})
	outEnds, err := adm.ListEndOffsets(ctx, "out")
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	outEnds.Each(func(o kadm.ListedOffset) { total += o.Offset })
	// Each committed transaction leaves a commit marker per partition it
	// wrote, so the log holds more than n offsets.
	if total < n {
		t.Errorf("out holds %d offsets, want at least %d records", total, n)
	}
}

func TestAdminTopics(t *testing.T) {
	env := devenvtest.Start(t)
	ctx := t.Context()
	adm := kadm.NewClient(devenvtest.KafkaClient(t, env))
	const topic = "admin-6"

	compact := "compact"
	createTopic(t, adm, topic, 6, map[string]*string{"cleanup.policy": &compact})

	topics, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	td, ok := topics[topic]
	if !ok || td.Err != nil || len(td.Partitions) != 6 {
		t.Fatalf("list topics: %s = %+v (present %v), want 6 partitions", topic, td, ok)
	}

	// ListOffsets: ten records on partition 0 move its end offset to 10.
	prod := devenvtest.KafkaClient(t, env, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := range 10 {
		if err := prod.ProduceSync(ctx, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Partition: 0}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := ends.Lookup(topic, 0); o.Offset != 10 {
		t.Errorf("end offset of %s/0 = %d, want 10", topic, o.Offset)
	}

	// DescribeConfigs: our topic override, a default, and the broker's
	// replication factor that Start sets to what one broker can hold.
	rcs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On(topic, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantConfig(t, rc, "cleanup.policy", "compact")
	wantConfig(t, rc, "min.insync.replicas", "1")
	brcs, err := adm.DescribeBrokerConfigs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(brcs) != 1 {
		t.Fatalf("describe broker configs: %d brokers, want 1", len(brcs))
	}
	wantConfig(t, brcs[0], "default.replication.factor", "1")

	resp, err := adm.DeleteTopic(ctx, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("delete topic: %v", err)
	}
	// kadm answers ListTopics from its client's metadata cache (kgo's
	// MetadataMinAge, 5s by default), so the same client may still list
	// the topic; ask the broker afresh.
	topics, err = kadm.NewClient(devenvtest.KafkaClient(t, env)).ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if topics.Has(topic) {
		t.Errorf("%s still listed after delete", topic)
	}
}

func wantConfig(t *testing.T, rc kadm.ResourceConfig, key, want string) {
	t.Helper()
	if rc.Err != nil {
		t.Fatalf("describe %s: %v", rc.Name, rc.Err)
	}
	for _, c := range rc.Configs {
		if c.Key == key {
			if c.MaybeValue() != want {
				t.Errorf("%s %s = %q, want %q", rc.Name, key, c.MaybeValue(), want)
			}
			return
		}
	}
	t.Errorf("%s: config %s not described", rc.Name, key)
}

func TestDeleteRecords(t *testing.T) {
	env := devenvtest.Start(t)
	ctx := t.Context()
	adm := kadm.NewClient(devenvtest.KafkaClient(t, env))
	createTopic(t, adm, "dr", 1, nil)
	prod := devenvtest.KafkaClient(t, env, kgo.DefaultProduceTopic("dr"))
	for range 10 {
		if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	var to kadm.Offsets
	to.Add(kadm.Offset{Topic: "dr", Partition: 0, At: 4})
	resps, err := adm.DeleteRecords(ctx, to)
	if err == nil {
		err = resps.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	starts, err := adm.ListStartOffsets(ctx, "dr")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := starts.Lookup("dr", 0); o.Offset != 4 {
		t.Errorf("start offset after DeleteRecords = %d, want 4", o.Offset)
	}
}

// TestTransactionAdmin checks what `flecht status` and fencing rely on:
// ListTransactions/DescribeTransactions, the broker's cap on transaction
// timeouts, and the broker aborting a transaction that outlives its timeout.
func TestTransactionAdmin(t *testing.T) {
	env := devenvtest.Start(t)
	ctx := t.Context()
	adm := kadm.NewClient(devenvtest.KafkaClient(t, env))
	createTopic(t, adm, "t", 1, nil)

	prod := devenvtest.KafkaClient(t, env, kgo.TransactionalID("app-7"), kgo.TransactionTimeout(txnTimeout), kgo.DefaultProduceTopic("t"))
	if err := prod.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte("open")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	listed, err := adm.ListTransactions(ctx, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if lt, ok := listed["app-7"]; !ok || lt.State != "Ongoing" {
		t.Errorf("list transactions: app-7 = %+v (present %v), want Ongoing", lt, ok)
	}
	described, err := adm.DescribeTransactions(ctx, "app-7")
	if err != nil {
		t.Fatal(err)
	}
	if dt := described["app-7"]; dt.Err != nil || dt.State != "Ongoing" || !dt.Topics.Lookup("t", 0) || dt.TimeoutMillis != int32(txnTimeout.Milliseconds()) {
		t.Errorf("describe transactions: app-7 = %+v, want Ongoing on t/0 with timeout %v", dt, txnTimeout)
	}
	if err := prod.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}

	t.Run("timeout above transaction.max.timeout.ms", func(t *testing.T) {
		cl := devenvtest.KafkaClient(t, env, kgo.TransactionalID("too-long"), kgo.TransactionTimeout(16*time.Minute), kgo.DefaultProduceTopic("t"))
		// kgo initialises the producer ID in BeginTransaction.
		err := cl.BeginTransaction()
		if err == nil {
			err = cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr()
		}
		if !errors.Is(err, kerr.InvalidTransactionTimeout) {
			t.Errorf("transaction with a 16m timeout: %v, want %v", err, kerr.InvalidTransactionTimeout)
		}
	})

	t.Run("expired transaction is aborted", func(t *testing.T) {
		cl := devenvtest.KafkaClient(t, env, kgo.TransactionalID("slow"), kgo.TransactionTimeout(200*time.Millisecond), kgo.DefaultProduceTopic("t"))
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("late")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		waitCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			// kfake reports only Ongoing and Empty (its transactions
			// complete synchronously); Kafka says CompleteAbort.
			d, err := adm.DescribeTransactions(waitCtx, "slow")
			if s := d["slow"].State; err == nil && (s == "Empty" || s == "CompleteAbort") {
				break
			}
			select {
			case <-waitCtx.Done():
				t.Fatalf("transaction not aborted by the broker: %+v, %v", d["slow"], err)
			case <-tick.C:
			}
		}
		if err := cl.EndTransaction(ctx, kgo.TryCommit); err == nil {
			t.Error("commit of a broker-aborted transaction succeeded")
		}

		if err := prod.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte("end")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := prod.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatal(err)
		}
		if got := consumeToMarkers(t, env, "t", 1, kgo.ReadCommitted()); !slices.Equal(got, []string{"open"}) {
			t.Errorf("read_committed saw %q, want only the committed %q", got, "open")
		}
	})
}
