package trace_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/lineage"
	"github.com/flecht-dev/flecht/internal/trace"
)

func cluster(t *testing.T) (*kgo.Client, context.Context) {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "raw", "refined", "refined2"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.TransactionalID("stage-0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return cl, ctx
}

// write writes r in a committed transaction and returns its place.
func write(t *testing.T, ctx context.Context, cl *kgo.Client, r *kgo.Record) lineage.Source {
	t.Helper()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	return lineage.Source{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}
}

func stamped(topic string, p int32, key, value string, src lineage.Source, logic string) *kgo.Record {
	st := lineage.Stamp{Source: src, Logic: logic, Generation: 2}
	return &kgo.Record{Topic: topic, Partition: p, Key: []byte(key), Value: []byte(value), Headers: st.Headers()}
}

func TestFollowsToTheOrigin(t *testing.T) {
	cl, ctx := cluster(t)
	// Filler, so offsets differ between topics.
	write(t, ctx, cl, &kgo.Record{Topic: "raw", Partition: 1, Key: []byte("x"), Value: []byte("{}")})
	raw := write(t, ctx, cl, &kgo.Record{Topic: "raw", Partition: 1, Key: []byte("dev-1"), Value: []byte(`{"n":1}`),
		Headers: []kgo.RecordHeader{{Key: lineage.HeaderOrigin, Value: []byte(lineage.MQTTOrigin("sensors/dev-1/events"))}}})
	refined := write(t, ctx, cl, stamped("refined", 0, "dev-1", `{"n":2}`, raw, lineage.BuiltinLogic("passthrough", "0.31.0")))
	top := write(t, ctx, cl, stamped("refined2", 1, "dev-1", `{"n":3}`, refined, lineage.ModuleLogic("abcdef0123456789abcd")))

	chains, err := trace.Follow(ctx, cl, top)
	if err != nil {
		t.Fatal(err)
	}
	ch := chains[0]
	if len(ch.Hops) != 3 || ch.End != trace.EndOrigin || ch.EndDetail != "mqtt:sensors/dev-1/events" {
		t.Fatalf("chain %+v", ch)
	}
	for i, want := range []struct {
		place, source, logic, value string
	}{
		{top.String(), refined.String(), "module:sha256:abcdef0123456789", `{"n":3}`},
		{refined.String(), raw.String(), "builtin:passthrough@0.31.0", `{"n":2}`},
		{raw.String(), "", "", `{"n":1}`},
	} {
		h := ch.Hops[i]
		if h.Record != want.place || h.Source != want.source || h.Logic != want.logic || string(h.Value) != want.value || !h.Transactional || h.ProducerID <= 0 {
			t.Errorf("hop %d: %+v; want %+v", i, h, want)
		}
	}
	if ch.Hops[2].Origin != "mqtt:sensors/dev-1/events" || *ch.Hops[2].Key != "dev-1" || ch.Hops[0].Generation != 2 {
		t.Errorf("raw hop %+v", ch.Hops[2])
	}

	places, err := trace.FindKey(ctx, cl, "refined2", "dev-1", 10)
	if err != nil || len(places) != 1 || places[0] != top {
		t.Fatalf("FindKey = %v, %v; want [%s]", places, err, top)
	}
}

func TestEnds(t *testing.T) {
	cl, ctx := cluster(t)
	plain := write(t, ctx, cl, &kgo.Record{Topic: "raw", Key: []byte("k"), Value: []byte("v")})
	gone := write(t, ctx, cl, stamped("refined", 0, "k", "v", lineage.Source{Topic: "raw", Partition: 0, Offset: 99}, "builtin:count@1"))
	for _, c := range []struct {
		start lineage.Source
		end   string
		hops  int
	}{{plain, trace.EndNoLineage, 1}, {gone, trace.EndGone, 1}} {
		chains, err := trace.Follow(ctx, cl, c.start)
		if err != nil || chains[0].End != c.end || len(chains[0].Hops) != c.hops {
			t.Errorf("from %s: %+v, %v; want end %s after %d", c.start, chains, err, c.end, c.hops)
		}
	}
	for _, missing := range []lineage.Source{{Topic: "raw", Partition: 0, Offset: 50}, {Topic: "raw", Partition: 7, Offset: 0}, {Topic: "nope", Offset: 0}} {
		if _, err := trace.Follow(ctx, cl, missing); exitcode.Code(err) != exitcode.Refused {
			t.Errorf("%s: %v (exit %d), want exit %d", missing, err, exitcode.Code(err), exitcode.Refused)
		}
	}
	if _, err := trace.FindKey(ctx, cl, "raw", "absent", 10); exitcode.Code(err) != exitcode.Refused {
		t.Errorf("an absent key: %v", err)
	}
}

// TestUnreadableSourceEndsTheChain: a principal that may read an output
// but only describe its source's topic sees the output and a chain that
// ends not_authorized, naming the ACL, never one that looks complete.
func TestUnreadableSourceEndsTheChain(t *testing.T) {
	allow := func(topic string, op kmsg.ACLOperation) kfake.ACL {
		return kfake.ACL{Resource: kmsg.ACLResourceTypeTopic, Name: topic, Pattern: kmsg.ACLResourcePatternTypeLiteral, Operation: op, Allow: true}
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "raw", "refined", "hidden"),
		kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-256", "admin", "admin"), kfake.EnableACLs(),
		kfake.User("SCRAM-SHA-256", "ops", "pw", allow("refined", kmsg.ACLOperationRead), allow("raw", kmsg.ACLOperationDescribe)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	client := func(user, pass string, opts ...kgo.Opt) *kgo.Client {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...), kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha256Mechanism())}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	admin := client("admin", "admin", kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionalID("stage-0"))
	raw := write(t, ctx, admin, &kgo.Record{Topic: "raw", Key: []byte("k"), Value: []byte(`{"n":1}`)})
	refined := write(t, ctx, admin, stamped("refined", 0, "k", `{"n":1}`, raw, "builtin:passthrough@1"))

	chains, err := trace.Follow(ctx, client("ops", "pw"), refined)
	if err != nil {
		t.Fatal(err)
	}
	ch := chains[0]
	if len(ch.Hops) != 1 || ch.Hops[0].Record != refined.String() || ch.End != trace.EndNotAuthorized ||
		!strings.Contains(ch.EndDetail, "needs Read on topic raw") {
		t.Errorf("got %d hops, end %s: %s; want the output, then not_authorized naming Read on topic raw", len(ch.Hops), ch.End, ch.EndDetail)
	}
	// The start record itself unreadable is an error naming the ACL,
	// also where the principal may not even describe its topic.
	if _, err := trace.Follow(ctx, client("ops", "pw"), raw); err == nil || !strings.Contains(err.Error(), "needs Read on topic raw") {
		t.Errorf("tracing from an unreadable record: %v", err)
	}
	if _, err := trace.Follow(ctx, client("ops", "pw"), lineage.Source{Topic: "hidden"}); err == nil || !strings.Contains(err.Error(), "needs Read on topic hidden") {
		t.Errorf("tracing from a topic the principal may not describe: %v", err)
	}
}
