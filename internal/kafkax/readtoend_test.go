package kafkax

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// newFake starts an in-process kfake cluster on loopback with the topics.
func newFake(t *testing.T, partitions int32, topics ...string) *Cluster {
	t.Helper()
	c, err := kfake.NewCluster(
		kfake.NumBrokers(1),
		kfake.ListenFn(func(network, _ string) (net.Listener, error) { return net.Listen(network, "127.0.0.1:0") }),
		kfake.SeedTopics(partitions, topics...),
	)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return &Cluster{Brokers: c.ListenAddrs()}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mustClient(t *testing.T, c *Cluster, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := c.Client(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func TestReadToEndSeesCommittedOnly(t *testing.T) {
	ctx := ctxT(t)
	c := newFake(t, 3, "raw")
	txn := mustClient(t, c, kgo.TransactionalID("writer-0"), kgo.DefaultProduceTopic("raw"))
	plain := mustClient(t, c, kgo.DefaultProduceTopic("raw"))

	produceTxn := func(prefix string, n int, commit kgo.TransactionEndTry) {
		t.Helper()
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := range n {
			r := &kgo.Record{Key: fmt.Appendf(nil, "k%d", i%7), Value: fmt.Appendf(nil, "%s-%d", prefix, i)}
			if err := txn.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if err := txn.EndTransaction(ctx, commit); err != nil {
			t.Fatal(err)
		}
	}
	produceTxn("committed", 40, kgo.TryCommit)
	produceTxn("aborted", 25, kgo.TryAbort)
	for i := range 10 {
		if err := plain.ProduceSync(ctx, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "plain-%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	produceTxn("committed2", 5, kgo.TryCommit)

	reader := mustClient(t, c)
	recs, err := ReadToEnd(ctx, reader, "raw")
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	last := map[int32]int64{}
	for _, r := range recs {
		counts[strings.SplitN(string(r.Value), "-", 2)[0]]++
		if prev, ok := last[r.Partition]; ok && r.Offset <= prev {
			t.Fatalf("partition %d out of order: %d after %d", r.Partition, r.Offset, prev)
		}
		last[r.Partition] = r.Offset
		if want := Partition(r.Key, 3); r.Partition != want {
			t.Errorf("key %s on partition %d, murmur2 says %d", r.Key, r.Partition, want)
		}
	}
	if counts["committed"] != 40 || counts["committed2"] != 5 || counts["plain"] != 10 || counts["aborted"] != 0 {
		t.Fatalf("got %v; want committed 40, committed2 5, plain 10, aborted 0", counts)
	}
}

func TestReadToEndDoesNotWaitForOpenTransaction(t *testing.T) {
	ctx := ctxT(t)
	c := newFake(t, 1, "t")
	plain := mustClient(t, c, kgo.DefaultProduceTopic("t"))
	if err := plain.ProduceSync(ctx, &kgo.Record{Value: []byte("before")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	txn := mustClient(t, c, kgo.TransactionalID("open"), kgo.DefaultProduceTopic("t"))
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := txn.ProduceSync(ctx, &kgo.Record{Value: []byte("pending")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// The transaction stays open while we read.
	recs, err := ReadToEnd(ctx, mustClient(t, c), "t")
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || string(recs[0].Value) != "before" {
		t.Fatalf("want only the record before the open transaction, got %d records", len(recs))
	}
}

func TestReadToEndEmptyAndMissing(t *testing.T) {
	ctx := ctxT(t)
	c := newFake(t, 4, "empty")
	cl := mustClient(t, c)
	recs, err := ReadToEnd(ctx, cl, "empty")
	if err != nil || len(recs) != 0 {
		t.Fatalf("empty topic: %d records, %v", len(recs), err)
	}
	_, err = ReadToEnd(ctx, cl, "empty", "nope")
	var missing *MissingTopicsError
	if !errors.As(err, &missing) || len(missing.Topics) != 1 || missing.Topics[0] != "nope" {
		t.Fatalf("want MissingTopicsError naming nope, got %v", err)
	}
}

func TestReadToEndAfterDeleteRecords(t *testing.T) {
	ctx := ctxT(t)
	c := newFake(t, 1, "trimmed")
	cl := mustClient(t, c, kgo.DefaultProduceTopic("trimmed"))
	for i := range 20 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	adm := kadm.NewClient(cl)
	o := kadm.Offsets{}
	o.AddOffset("trimmed", 0, 12, -1)
	if _, err := adm.DeleteRecords(ctx, o); err != nil {
		t.Fatal(err)
	}
	res := 0
	rr, err := ReadToEndFunc(ctx, cl, []string{"trimmed"}, func(r *kgo.Record) error {
		if r.Offset < 12 {
			t.Errorf("read deleted offset %d", r.Offset)
		}
		res++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if res != 8 || rr.Bounds[TopicPartition{"trimmed", 0}] != (Bounds{Start: 12, End: 20}) {
		t.Fatalf("got %d records, bounds %+v", res, rr.Bounds)
	}
}

func TestPingGivesUpOnASilentBroker(t *testing.T) {
	// A listener that accepts connections and never answers: the hang a
	// black-holed or wedged broker causes.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			defer conn.Close()
		}
	}()
	c := &Cluster{Brokers: []string{l.Addr().String()}, DialTimeout: time.Second, PingTimeout: 2 * time.Second}
	err = c.Ping(context.Background(), mustClient(t, c))
	if err == nil || !strings.Contains(err.Error(), l.Addr().String()) || !strings.Contains(err.Error(), "no answer within 2s") {
		t.Fatalf("want a timeout naming %s, got %v", l.Addr(), err)
	}
}

func TestPingNamesTheAddress(t *testing.T) {
	// A port nobody listens on: take one and release it.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	c := &Cluster{Brokers: []string{addr}, DialTimeout: time.Second}
	cl := mustClient(t, c)
	start := time.Now()
	err = c.Ping(context.Background(), cl)
	var unreachable *UnreachableError
	if !errors.As(err, &unreachable) || !strings.Contains(err.Error(), addr) {
		t.Fatalf("want an UnreachableError naming %s, got %v", addr, err)
	}
	if d := time.Since(start); d > DefaultPingTimeout+5*time.Second {
		t.Fatalf("ping took %s, must be bounded", d)
	}
}
