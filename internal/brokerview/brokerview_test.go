package brokerview_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/flecht-dev/flecht/internal/brokerview"
	"github.com/flecht-dev/flecht/internal/devenv"
	"github.com/flecht-dev/flecht/internal/devenv/devenvtest"
	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/metrics"
	"github.com/flecht-dev/flecht/internal/stagefile"
)

// member joins group app as clientID on topic and waits for an assignment.
func member(t *testing.T, env *devenv.Env, clientID, topic string) *kgo.Client {
	t.Helper()
	assigned := make(chan struct{}, 1)
	cl := devenvtest.KafkaClient(t, env, kgo.ClientID(clientID), kgo.ConsumerGroup("app"), kgo.ConsumeTopics(topic),
		kgo.Balancers(kgo.RangeBalancer()), kgo.DisableAutoCommit(),
		kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) {
			select {
			case assigned <- struct{}{}:
			default:
			}
		}))
	go func() {
		for {
			if fs := cl.PollFetches(context.Background()); fs.IsClientClosed() {
				return
			}
		}
	}()
	select {
	case <-assigned:
	case <-time.After(30 * time.Second):
		t.Fatal("no assignment")
	}
	return cl
}

// count is how many series a collector has.
func count(c prometheus.Collector) int {
	ch := make(chan prometheus.Metric, 64)
	go func() { c.Collect(ch); close(ch) }()
	n := 0
	for range ch {
		n++
	}
	return n
}

func itoa(p int32) string { return strconv.Itoa(int(p)) }

// A transformer instance exports the lag of the partitions its member owns
// (end − committed, end − log start without a commit) and how long the
// transactions of their IDs have been open; another member's partitions
// and IDs are the other instance's to export.
func TestSampleOwnedLagAndOpenTransactions(t *testing.T) {
	env := devenvtest.Start(t)
	cl := devenvtest.KafkaClient(t, env, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(cl)
	ctx := context.Background()
	if err := kafkax.CreateTopic(ctx, adm, "in", 4, nil); err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for p, n := range map[int32]int{0: 10, 1: 4, 2: 7, 3: 1} {
		for range n {
			recs = append(recs, &kgo.Record{Topic: "in", Partition: p, Value: []byte("{}")})
		}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	c0 := member(t, env, "c0", "in")
	member(t, env, "c1", "in")
	// Wait until the range balancer gave each member two partitions.
	waitOwned := func() bool {
		g, err := kafkax.DescribeGroup(ctx, adm, "app")
		if err != nil || len(g.Members) != 2 {
			return false
		}
		for _, m := range g.Members {
			if len(m.Assigned) != 1 || len(m.Assigned[0].Partitions) != 2 {
				return false
			}
		}
		return true
	}
	deadline := time.Now().Add(30 * time.Second)
	for !waitOwned() {
		if time.Now().After(deadline) {
			t.Fatal("the group never settled on two members")
		}
		time.Sleep(50 * time.Millisecond)
	}
	g, _ := kafkax.DescribeGroup(ctx, adm, "app")
	var mine []int32
	for _, m := range g.Members {
		if m.ClientID == "c0" {
			mine = m.Assigned[0].Partitions
		}
	}
	// Commit 3 on c0's first partition; its second has no commit.
	var commitErr error
	c0.CommitOffsetsSync(ctx, map[string]map[int32]kgo.EpochOffset{"in": {mine[0]: {Epoch: -1, Offset: 3}}},
		func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, _ *kmsg.OffsetCommitResponse, err error) {
			commitErr = err
		})
	if commitErr != nil {
		t.Fatal(commitErr)
	}
	// An open transaction on c0's first task, begun "90 s ago".
	prod := devenvtest.KafkaClient(t, env, kgo.TransactionalID(stagefile.TransactionalID("app", mine[0])),
		kgo.TransactionTimeout(time.Minute), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := prod.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := prod.ProduceSync(ctx, &kgo.Record{Topic: "in", Partition: mine[0], Value: []byte("{}")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = prod.EndTransaction(context.Background(), kgo.TryAbort) })

	obs := metrics.New(nil)
	o := brokerview.Options{Admin: adm, ApplicationID: "app", ClientID: "c0", Kind: stagefile.KindTransformer, InputTopics: []string{"in"},
		Gauges: obs.BrokerView(), Now: func() time.Time { return time.Now().Add(90 * time.Second) }}
	if err := brokerview.Sample(ctx, o); err != nil {
		t.Fatal(err)
	}
	ends := map[int32]float64{0: 10, 1: 4, 2: 7, 3: 1}
	ends[mine[0]]++ // the open transaction's record
	want := map[int32]float64{mine[0]: ends[mine[0]] - 3, mine[1]: ends[mine[1]]}
	for p, n := range want {
		got := metrics.Value(obs.BrokerView().ConsumerLag.WithLabelValues("in", itoa(p)))
		if got != n {
			t.Errorf("lag of in/%d: %v, want %v", p, got, n)
		}
	}
	if n := count(obs.BrokerView().ConsumerLag); n != 2 {
		t.Errorf("%d lag series, want c0's 2 partitions only", n)
	}
	open := metrics.Value(obs.BrokerView().TransactionOpen.WithLabelValues(stagefile.TransactionalID("app", mine[0])))
	if open < 89 || open > 120 {
		t.Errorf("open for %vs, want about 90", open)
	}
	if to := metrics.Value(obs.BrokerView().TransactionTimeout.WithLabelValues(stagefile.TransactionalID("app", mine[0]))); to != 60 {
		t.Errorf("timeout %v, want 60", to)
	}
	// The second task's ID was never used: the coordinator does not know
	// it, and nothing is exported for it; nor for c1's IDs.
	if n := count(obs.BrokerView().TransactionOpen); n != 1 {
		t.Errorf("%d transaction series, want 1", n)
	}

	// After the commit the transaction is no longer open.
	if err := prod.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	if err := brokerview.Sample(ctx, o); err != nil {
		t.Fatal(err)
	}
	if open := metrics.Value(obs.BrokerView().TransactionOpen.WithLabelValues(stagefile.TransactionalID("app", mine[0]))); open != 0 {
		t.Errorf("open for %vs after the commit, want 0", open)
	}
}

// An MQTT bridge has no group: its one ID is <app>-<client_id>.
func TestSampleBridgeTransaction(t *testing.T) {
	env := devenvtest.Start(t)
	cl := devenvtest.KafkaClient(t, env)
	adm := kadm.NewClient(cl)
	ctx := context.Background()
	if err := kafkax.CreateTopic(ctx, adm, "raw", 1, nil); err != nil {
		t.Fatal(err)
	}
	prod := devenvtest.KafkaClient(t, env, kgo.TransactionalID("bridge-b0"), kgo.TransactionTimeout(30*time.Second))
	if _, _, err := prod.ProducerID(ctx); err != nil {
		t.Fatal(err)
	}
	obs := metrics.New(nil)
	if err := brokerview.Sample(ctx, brokerview.Options{Admin: adm, ApplicationID: "bridge", ClientID: "b0", Kind: stagefile.KindMQTT, Gauges: obs.BrokerView()}); err != nil {
		t.Fatal(err)
	}
	if to := metrics.Value(obs.BrokerView().TransactionTimeout.WithLabelValues("bridge-b0")); to != 30 {
		t.Errorf("timeout %v, want 30", to)
	}
	if open := metrics.Value(obs.BrokerView().TransactionOpen.WithLabelValues("bridge-b0")); open != 0 {
		t.Errorf("open %v with no transaction begun", open)
	}
	if n := count(obs.BrokerView().ConsumerLag); n != 0 {
		t.Errorf("a bridge exports lag: %d series", n)
	}
}
