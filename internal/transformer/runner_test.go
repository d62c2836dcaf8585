package transformer_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/flecht-dev/flecht/internal/attr"
	"github.com/flecht-dev/flecht/internal/devenv"
	"github.com/flecht-dev/flecht/internal/devenv/devenvtest"
	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/metrics"
	"github.com/flecht-dev/flecht/internal/stagefile"
	"github.com/flecht-dev/flecht/internal/transformer"
	"github.com/flecht-dev/flecht/internal/transformer/builtin"
)

type fixture struct {
	t       *testing.T
	env     *devenv.Env
	cluster *kafkax.Cluster
	adm     *kadm.Client
}

func newFixture(t *testing.T) *fixture {
	env := devenvtest.Start(t)
	c := &kafkax.Cluster{Brokers: []string{env.KafkaAddr()}}
	return &fixture{t: t, env: env, cluster: c, adm: kadm.NewClient(devenvtest.KafkaClient(t, env))}
}

func (f *fixture) topic(name string, partitions int32) {
	f.t.Helper()
	if err := kafkax.CreateTopic(context.Background(), f.adm, name, partitions, nil); err != nil {
		f.t.Fatal(err)
	}
}

// topics creates each topic with the same partition count.
func (f *fixture) topics(partitions int32, names ...string) {
	f.t.Helper()
	for _, n := range names {
		f.topic(n, partitions)
	}
}

func (f *fixture) produce(topic string, recs ...*kgo.Record) {
	f.t.Helper()
	// Place records where the Java client would, so state keys line up.
	for _, r := range recs {
		r.Partition = kafkax.Partition(r.Key, f.partitions(topic))
	}
	cl := devenvtest.KafkaClient(f.t, f.env, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) partitions(topic string) int {
	n, err := kafkax.CommonPartitionCount(context.Background(), f.adm, topic)
	if err != nil {
		f.t.Fatal(err)
	}
	return n
}

func (f *fixture) read(topic string) []*kgo.Record {
	f.t.Helper()
	recs, err := kafkax.ReadToEnd(context.Background(), devenvtest.KafkaClient(f.t, f.env), topic)
	if err != nil {
		f.t.Fatal(err)
	}
	return recs
}

// committed is the offset group committed for topic/partition (-1: none).
func (f *fixture) committed(group, topic string, partition int32) int64 {
	offs, err := f.adm.FetchOffsets(context.Background(), group)
	if err != nil {
		return -1
	}
	if o, ok := offs.Lookup(topic, partition); ok {
		return o.At
	}
	return -1
}

func stageFile(t *testing.T, yaml string) *stagefile.Stage {
	t.Helper()
	s, err := stagefile.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// running is a runner in the background.
type running struct {
	cancel context.CancelFunc
	done   chan error
	obs    *metrics.Observer
}

// start runs the stage's builtin.
func (f *fixture) start(st *stagefile.Stage, stateDir, clientID string) *running {
	f.t.Helper()
	return f.startWith(st, stateDir, clientID, nil)
}

// startWith runs tf, or the stage's builtin when tf is nil.
func (f *fixture) startWith(st *stagefile.Stage, stateDir, clientID string, tf transformer.Transformer) *running {
	f.t.Helper()
	return f.startOpts(st, stateDir, clientID, tf, nil)
}

// startOpts is startWith with opt changing the runner's options first.
func (f *fixture) startOpts(st *stagefile.Stage, stateDir, clientID string, tf transformer.Transformer, opt func(*transformer.Options)) *running {
	f.t.Helper()
	obs := metrics.New(nil)
	o := transformer.Options{Stage: st, Cluster: f.cluster, ClientID: clientID, StateDir: stateDir, Metrics: obs, SessionTimeout: 6 * time.Second, Log: testLogger(f.t)}
	if opt != nil {
		opt(&o)
	}
	r := transformer.NewRunner(o)
	if tf == nil {
		var err error
		if tf, err = builtin.NewTransformer(st.Transform, builtin.Env{Configs: r.Configs()}); err != nil {
			f.t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	run := &running{cancel: cancel, done: make(chan error, 1), obs: obs}
	go func() {
		err := r.Run(ctx, tf)
		if err != nil {
			f.t.Logf("runner %s stopped: %v", clientID, err)
		}
		run.done <- err
	}()
	f.t.Cleanup(func() { cancel(); <-run.done })
	return run
}

func (r *running) stop(t *testing.T) error {
	t.Helper()
	r.cancel()
	select {
	case err := <-r.done:
		r.done <- err // let Cleanup's receive return
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("runner did not stop")
		return nil
	}
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

func keyed(n, keys int, prefix string) []*kgo.Record {
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Key: fmt.Appendf(nil, "key-%d", i%keys), Value: fmt.Appendf(nil, `{"i":%d,"src":"%s"}`, i, prefix)}
	}
	return recs
}

// checkSeq asserts every key's seq values are exactly 1..n and returns the
// total number of outputs.
func checkSeq(t *testing.T, out []*kgo.Record) map[string]int {
	t.Helper()
	seqs := map[string][]int{}
	for _, r := range out {
		var v struct {
			Seq int `json:"seq"`
		}
		if err := json.Unmarshal(r.Value, &v); err != nil {
			t.Fatalf("output %s: %v", r.Value, err)
		}
		seqs[string(r.Key)] = append(seqs[string(r.Key)], v.Seq)
	}
	counts := map[string]int{}
	for k, s := range seqs {
		for i, v := range s {
			if v != i+1 {
				t.Fatalf("key %s: seq %v is not 1..%d (duplicate or gap at position %d)", k, s, len(s), i)
			}
		}
		counts[k] = len(s)
	}
	return counts
}

const countStage = `
application_id: count-app
kind: transformer
input_topics: [raw]
max_poll_records: 100
transform: {builtin: count, output_topic: refined}
`

func TestCountExactlyOnceAcrossRestarts(t *testing.T) {
	f := newFixture(t)
	st := stageFile(t, countStage)
	exactlyOnceAcrossRestarts(t, f, "count-app", func(dir, client string) *running { return f.start(st, dir, client) })
}

// exactlyOnceAcrossRestarts runs a count stage of app (raw → refined, 3
// partitions each, which it creates) over 600 records, stops it, and
// starts it again on an empty state directory for 600 more: the state
// comes back from the changelog, so each of the 12 keys counts 1..100.
func exactlyOnceAcrossRestarts(t *testing.T, f *fixture, app string, start func(stateDir, clientID string) *running) {
	t.Helper()
	f.topic("raw", 3)
	f.topic("refined", 3)
	dir := t.TempDir()
	f.produce("raw", keyed(600, 12, "a")...)
	r := start(filepath.Join(dir, "one"), "one")
	waitFor(t, 30*time.Second, "first 600 outputs", func() bool { return len(f.read("refined")) >= 600 })
	if err := r.stop(t); err != nil {
		t.Fatalf("stop: %v", err)
	}

	// Restart with an empty state dir: state must come back from the
	// changelog, so seq continues rather than restarting at 1.
	f.produce("raw", keyed(600, 12, "b")...)
	r = start(filepath.Join(dir, "two"), "two")
	waitFor(t, 30*time.Second, "1200 outputs", func() bool { return len(f.read("refined")) >= 1200 })
	if err := r.stop(t); err != nil {
		t.Fatalf("stop: %v", err)
	}
	out := f.read("refined")
	if len(out) != 1200 {
		t.Fatalf("%d outputs, want exactly 1200", len(out))
	}
	for k, n := range checkSeq(t, out) {
		if n != 100 {
			t.Errorf("key %s has %d outputs, want 100", k, n)
		}
	}
	// Outputs land on the murmur2 partition of their key.
	for _, o := range out {
		if o.Partition != kafkax.Partition(o.Key, 3) {
			t.Fatalf("output key %s on partition %d", o.Key, o.Partition)
		}
	}
	// The changelog holds one entry per key with the final count.
	latest := map[string]string{}
	for _, c := range f.read(app + "-changelog") {
		latest[string(c.Key)] = string(c.Value)
	}
	if len(latest) != 12 || latest["key-0"] != `{"seq":100}` {
		t.Errorf("changelog latest: %d keys, key-0 = %s", len(latest), latest["key-0"])
	}
	// The group's offsets were committed inside the transactions.
	offs, err := f.adm.FetchOffsets(context.Background(), app)
	if err != nil {
		t.Fatal(err)
	}
	total := int64(0)
	offs.Each(func(o kadm.OffsetResponse) { total += o.At })
	if total != 1200 {
		t.Errorf("committed offsets sum to %d, want 1200", total)
	}
}

func TestInvalidMessagePolicies(t *testing.T) {
	bad := []*kgo.Record{
		{Key: []byte("k1"), Value: []byte(`{"ok":1}`)},
		{Key: []byte("k1"), Value: []byte(`not json`)},
		{Key: []byte("k1"), Value: []byte(`{"ok":2}`)},
	}
	// The outcome label is upstream's value for what the policy did.
	outcome := map[string]string{"crash": "raised", "skip": "skipped", "dlq": "dead_lettered"}
	for _, policy := range []string{"crash", "skip", "dlq"} {
		t.Run(policy, func(t *testing.T) {
			f := newFixture(t)
			f.topic("raw", 1)
			f.topic("refined", 1)
			st := stageFile(t, countStage+"invalid_messages: "+policy+"\n")
			f.produce("raw", bad...)
			r := f.start(st, t.TempDir(), "c")
			defer func() {
				counted := metrics.Value(r.obs.MessagesInvalid.WithLabelValues(outcome[policy], "raw"))
				if counted != 1 || metrics.Value(r.obs.MessagesInvalid) != 1 {
					t.Errorf("messages_invalid_total{outcome=%q} = %v (all outcomes %v), want 1", outcome[policy], counted, metrics.Value(r.obs.MessagesInvalid))
				}
			}()
			if policy == "crash" {
				select {
				case err := <-r.done:
					var inv *transformer.InvalidMessageError
					if !errorsAs(err, &inv) || inv.Offset != 1 {
						t.Fatalf("want InvalidMessageError at offset 1, got %v", err)
					}
					r.done <- err
				case <-time.After(30 * time.Second):
					t.Fatal("crash policy did not stop the runner")
				}
				// Nothing of the batch committed: no output, no offset.
				if n := len(f.read("refined")); n != 0 {
					t.Errorf("%d outputs committed despite the crash", n)
				}
				if at := f.committed("count-app", "raw", 0); at > 1 {
					t.Errorf("offset advanced to %d past the invalid record", at)
				}
				return
			}
			waitFor(t, 30*time.Second, "two outputs", func() bool { return len(f.read("refined")) == 2 })
			waitFor(t, 30*time.Second, "offset 3 committed", func() bool { return f.committed("count-app", "raw", 0) == 3 })
			if policy == "dlq" {
				dl := f.read("raw.dlq")
				if len(dl) != 1 || string(dl[0].Value) != "not json" || string(dl[0].Key) != "k1" {
					t.Fatalf("dlq holds %v", dl)
				}
				h := map[string]string{}
				for _, x := range dl[0].Headers {
					h[x.Key] = string(x.Value)
				}
				if h[transformer.HeaderDLQTopic] != "raw" || h[transformer.HeaderDLQOffset] != "1" || h[transformer.HeaderDLQPartition] != "0" || h[transformer.HeaderDLQError] == "" || h[transformer.HeaderDLQTime] == "" {
					t.Errorf("dlq headers %v", h)
				}
			}
			r.stop(t)
		})
	}
}

// A batch whose records all produce nothing (all skipped) still commits its
// offsets, and leaves no transaction open behind it.
func TestOffsetsOnlyTransactionCommits(t *testing.T) {
	f := newFixture(t)
	f.topic("raw", 1)
	f.topic("refined", 1)
	st := stageFile(t, countStage+"invalid_messages: skip\n")
	junk := make([]*kgo.Record, 5)
	for i := range junk {
		junk[i] = &kgo.Record{Key: []byte("k"), Value: []byte("[]")}
	}
	f.produce("raw", junk...)
	r := f.start(st, t.TempDir(), "c")
	waitFor(t, 30*time.Second, "offset 5", func() bool { return f.committed("count-app", "raw", 0) == 5 })
	// The next transaction of the same producer works.
	f.produce("raw", &kgo.Record{Key: []byte("k"), Value: []byte(`{}`)})
	waitFor(t, 30*time.Second, "one output", func() bool { return len(f.read("refined")) == 1 })
	r.stop(t)
}

func TestStartupErrorsNameTheProblem(t *testing.T) {
	f := newFixture(t)
	f.topic("a", 3)
	f.topic("b", 4)
	f.topic("refined", 1)
	cases := map[string]string{
		"application_id: x\nkind: transformer\ninput_topics: [a, b]\ntransform: {builtin: count, output_topic: refined}\n":                    "a has 3, b has 4",
		"application_id: x\nkind: transformer\ninput_topics: [nope]\ntransform: {builtin: count, output_topic: refined}\n":                    `"nope" does not exist`,
		"application_id: x\nkind: transformer\ninput_topics: [a]\ntransform: {builtin: count, output_topic: missing-out}\n":                   "output topics",
		"application_id: y\nkind: transformer\ninput_topics: [a]\nconfig_topics: [cfg]\ntransform: {builtin: count, output_topic: refined}\n": "config topics",
	}
	for yaml, want := range cases {
		st := stageFile(t, yaml)
		r := f.start(st, t.TempDir(), "c")
		select {
		case err := <-r.done:
			r.done <- err
			if err == nil || !contains(err.Error(), want) {
				t.Errorf("want error containing %q, got %v", want, err)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("no startup error for %q", want)
		}
	}
	// A changelog with another partition count is a startup error naming both.
	if err := kafkax.CreateTopic(context.Background(), f.adm, "z-changelog", 5, map[string]string{"cleanup.policy": "compact"}); err != nil {
		t.Fatal(err)
	}
	st := stageFile(t, "application_id: z\nkind: transformer\ninput_topics: [a]\ntransform: {builtin: count, output_topic: refined}\n")
	r := f.start(st, t.TempDir(), "c")
	err := <-r.done
	r.done <- err
	if err == nil || !contains(err.Error(), "has 5 partitions but the input topics have 3") {
		t.Errorf("changelog mismatch: %v", err)
	}
}

// Stopping while the group waits in a join for a member that does not
// rejoin (gone, or stuck in a long batch) returns after the leave timeout,
// not after that member's session or rebalance timeout: franz-go's Close
// would wait for the join, and the runner has nothing to commit in it.
func TestStopDoesNotWaitForAStalledJoin(t *testing.T) {
	f := newFixture(t)
	f.topic("raw", 3)
	f.topic("refined", 3)
	st := stageFile(t, countStage)
	ctx := context.Background()

	// A member that joins the group once and then never heartbeats or
	// rejoins, with a 30s session.
	cl := devenvtest.KafkaClient(t, f.env)
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Topics = []string{"raw"}
	join := kmsg.NewPtrJoinGroupRequest()
	join.Group, join.ProtocolType = "count-app", "consumer"
	join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = 30_000, 30_000
	proto := kmsg.NewJoinGroupRequestProtocol()
	proto.Name, proto.Metadata = "range", meta.AppendTo(nil)
	join.Protocols = append(join.Protocols, proto)
	var joined *kmsg.JoinGroupResponse
	for range 2 { // the first answer asks for the member id it hands out
		resp, err := join.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		join.MemberID, joined = resp.MemberID, resp
		if err := kerr.ErrorForCode(resp.ErrorCode); err == nil {
			break
		} else if !errors.Is(err, kerr.MemberIDRequired) {
			t.Fatal(err)
		}
	}
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Group, sync.MemberID, sync.Generation = "count-app", join.MemberID, joined.Generation
	sync.ProtocolType, sync.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr("range")
	assignment := kmsg.NewSyncGroupRequestGroupAssignment()
	assignment.MemberID = join.MemberID
	empty := kmsg.NewConsumerMemberAssignment()
	assignment.MemberAssignment = empty.AppendTo(nil)
	sync.GroupAssignment = append(sync.GroupAssignment, assignment)
	if resp, err := sync.RequestWith(ctx, cl); err != nil || resp.ErrorCode != 0 {
		t.Fatalf("sync: %v %v", err, resp)
	}

	r := transformer.NewRunner(transformer.Options{Stage: st, Cluster: f.cluster, ClientID: "c", StateDir: t.TempDir(),
		LeaveTimeout: 500 * time.Millisecond, Log: testLogger(t)})
	tf, err := builtin.NewTransformer(st.Transform, builtin.Env{})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- r.Run(runCtx, tf) }()
	waitFor(t, 30*time.Second, "the runner's join to hold the group in a rebalance", func() bool {
		groups, err := f.adm.DescribeGroups(ctx, "count-app")
		if err != nil {
			return false
		}
		g := groups["count-app"]
		return g.State == "PreparingRebalance" && len(g.Members) >= 1
	})

	start := time.Now()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		if took := time.Since(start); took > 10*time.Second {
			t.Fatalf("Run took %s to stop", took)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not stop within 20s of its context ending while a join waited for a stalled member")
	}
}

// A record a transformer rejects (rekey without its key path) goes through
// the invalid_messages policy exactly like an undecodable one: dlq writes it
// to <topic>.dlq inside the batch's transaction and the stage goes on;
// crash stops it with the location named once.
func TestRejectedRecordFollowsThePolicy(t *testing.T) {
	recs := []*kgo.Record{
		{Key: []byte("t1"), Value: []byte(`{"device":{"id":"d1"}}`)},
		{Key: []byte("t1"), Value: []byte(`{"device":{}}`)},
		{Key: []byte("t1"), Value: []byte(`{"device":{"id":"d2"}}`)},
	}
	const rekeyStage = "application_id: hop-app\nkind: transformer\ninput_topics: [raw]\ntransform: {builtin: rekey, output_topic: hop, key: device.id}\n"
	t.Run("dlq", func(t *testing.T) {
		f := newFixture(t)
		f.topics(1, "raw", "hop")
		f.produce("raw", recs...)
		r := f.start(stageFile(t, rekeyStage+"invalid_messages: dlq\n"), t.TempDir(), "c")
		waitFor(t, 30*time.Second, "offset 3 committed", func() bool { return f.committed("hop-app", "raw", 0) == 3 })
		if n := len(f.read("hop")); n != 2 {
			t.Errorf("%d outputs, want 2", n)
		}
		dl := f.read("raw.dlq")
		if len(dl) != 1 || string(dl[0].Value) != `{"device":{}}` {
			t.Fatalf("dlq holds %v", dl)
		}
		reason := header(dl[0], transformer.HeaderDLQError)
		if !contains(reason, "value.device.id") {
			t.Errorf("dead-letter reason %q does not name the path", reason)
		}
		if got := metrics.Value(r.obs.MessagesInvalid); got != 1 {
			t.Errorf("messages_invalid_total = %v, want 1", got)
		}
		if err := r.stop(t); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("crash", func(t *testing.T) {
		f := newFixture(t)
		f.topics(1, "raw", "hop")
		f.produce("raw", recs...)
		r := f.start(stageFile(t, rekeyStage), t.TempDir(), "c")
		select {
		case err := <-r.done:
			r.done <- err
			var inv *transformer.InvalidMessageError
			if !errorsAs(err, &inv) || inv.Offset != 1 {
				t.Fatalf("want InvalidMessageError at offset 1, got %v", err)
			}
			if n := strings.Count(err.Error(), "raw/0"); n != 1 {
				t.Errorf("the location appears %d times in %q", n, err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("crash policy did not stop the runner")
		}
		if n := len(f.read("hop")); n != 0 {
			t.Errorf("%d outputs committed despite the crash", n)
		}
	})
}

func header(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// A tombstone is a valid record (docs/contract.md §2) even when the state key reads
// the value it lacks: the transformer gets it with an empty state and no
// state key, so under the default crash policy it neither crash-loops the
// stage nor touches anyone's state.
func TestTombstoneWithValueStateKey(t *testing.T) {
	f := newFixture(t)
	f.topics(1, "raw", "refined")
	st := stageFile(t, countStage+"state_key: \"{key}/{value.d}\"\n")
	f.produce("raw",
		&kgo.Record{Key: []byte("k"), Value: []byte(`{"d":"a"}`)},
		&kgo.Record{Key: []byte("k")},
		&kgo.Record{Key: []byte("k"), Value: []byte(`{"d":"a"}`)},
	)
	var tombstones []string
	var mu sync.Mutex
	count, err := builtin.NewTransformer(st.Transform, builtin.Env{})
	if err != nil {
		t.Fatal(err)
	}
	tf := transformer.TransformFunc(func(ctx context.Context, in *transformer.Incoming, s attr.State, out transformer.Emit) error {
		if in.Tombstone {
			mu.Lock()
			tombstones = append(tombstones, fmt.Sprintf("%s state=%d", in.Key, s.Len()))
			mu.Unlock()
		}
		return count.Transform(ctx, in, s, out)
	})
	r := f.startWith(st, t.TempDir(), "c", tf)
	waitFor(t, 30*time.Second, "offset 3 committed", func() bool { return f.committed("count-app", "raw", 0) == 3 })
	if err := r.stop(t); err != nil {
		t.Fatalf("the tombstone stopped the stage: %v", err)
	}
	if got := checkSeq(t, f.read("refined")); got["k"] != 2 {
		t.Errorf("outputs per key %v, want k: 2 (seq 1, 2 under state key k/a)", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(tombstones) != 1 || tombstones[0] != "k state=0" {
		t.Errorf("tombstones delivered: %v, want one for k with an empty state", tombstones)
	}
}

// State emitted for a tombstone that has no state key is a bug in the
// transformer: the stage stops with an error naming the record.
func TestStateForKeylessTombstoneIsAnError(t *testing.T) {
	f := newFixture(t)
	f.topics(1, "raw", "refined")
	st := stageFile(t, countStage+"state_key: \"{key}/{value.d}\"\n")
	f.produce("raw", &kgo.Record{Key: []byte("k")})
	tf := transformer.TransformFunc(func(_ context.Context, _ *transformer.Incoming, _ attr.State, out transformer.Emit) error {
		out.State(attr.State{})
		return nil
	})
	r := f.startWith(st, t.TempDir(), "c", tf)
	select {
	case err := <-r.done:
		r.done <- err
		if err == nil || !contains(err.Error(), "raw/0@0") || !contains(err.Error(), "tombstone") {
			t.Fatalf("want an error naming the tombstone at raw/0@0, got %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("state for a keyless tombstone did not stop the stage")
	}
}

// A stateless transformer never looks state up, so a state_key it does not
// use cannot make its records invalid.
func TestStatelessStageIgnoresStateKey(t *testing.T) {
	f := newFixture(t)
	f.topics(1, "raw", "out")
	st := stageFile(t, "application_id: pass-app\nkind: transformer\ninput_topics: [raw]\nstate_key: \"{key}/{value.d}\"\ntransform: {builtin: passthrough, output_topic: out}\n")
	f.produce("raw", &kgo.Record{Key: []byte("k"), Value: []byte(`{"no_d":1}`)})
	r := f.start(st, t.TempDir(), "c")
	waitFor(t, 30*time.Second, "the record forwarded", func() bool { return len(f.read("out")) == 1 })
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
}

// Under a state_key that is not provably refining, a record whose key holds
// the separator after {key} is invalid: key "a/b" + d "c" and key "a" +
// d "b/c" would both be state key "a/b/c", possibly on two partitions.
func TestKeyHoldingTheSeparatorIsInvalid(t *testing.T) {
	f := newFixture(t)
	f.topics(1, "raw", "refined")
	st := stageFile(t, countStage+"state_key: \"{key}/{value.d}\"\ninvalid_messages: dlq\n")
	f.produce("raw",
		&kgo.Record{Key: []byte("a/b"), Value: []byte(`{"d":"c"}`)},
		&kgo.Record{Key: []byte("a"), Value: []byte(`{"d":"b/c"}`)},
	)
	r := f.start(st, t.TempDir(), "c")
	waitFor(t, 30*time.Second, "one output", func() bool { return len(f.read("refined")) == 1 })
	waitFor(t, 30*time.Second, "one dead letter", func() bool { return len(f.read("raw.dlq")) == 1 })
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if out := f.read("refined"); string(out[0].Key) != "a" {
		t.Errorf("output key %s, want a", out[0].Key)
	}
	dl := f.read("raw.dlq")
	if reason := header(dl[0], transformer.HeaderDLQError); string(dl[0].Key) != "a/b" || !contains(reason, `"/"`) || !contains(reason, "{key}/{value.d}") {
		t.Errorf("dead letter key %s, reason %q: want key a/b and a reason naming the separator and the template", dl[0].Key, reason)
	}
}

// A refined state key ({key}/{value.d}, keys without "/") keeps one state
// entry per (key, d): count runs 1..n for each pair, and the changelog
// holds one entry per pair.
func TestRefinedStateKeyKeepsStatePerKeyAndField(t *testing.T) {
	f := newFixture(t)
	f.topics(3, "raw", "refined")
	st := stageFile(t, countStage+"state_key: \"{key}/{value.d}\"\n")
	recs := make([]*kgo.Record, 60)
	for i := range recs {
		recs[i] = &kgo.Record{Key: fmt.Appendf(nil, "k%d", i%4), Value: fmt.Appendf(nil, `{"d":"%c","i":%d}`, "xyz"[i%3], i)}
	}
	f.produce("raw", recs...)
	r := f.start(st, t.TempDir(), "c")
	waitFor(t, 30*time.Second, "60 outputs", func() bool { return len(f.read("refined")) >= 60 })
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	seqs := map[string][]int{}
	for _, o := range f.read("refined") {
		var v struct {
			D   string `json:"d"`
			Seq int    `json:"seq"`
		}
		if err := json.Unmarshal(o.Value, &v); err != nil {
			t.Fatal(err)
		}
		pair := string(o.Key) + "/" + v.D
		seqs[pair] = append(seqs[pair], v.Seq)
	}
	if len(seqs) != 12 {
		t.Fatalf("%d (key, d) pairs, want 12: %v", len(seqs), seqs)
	}
	latest := map[string]string{}
	for _, c := range f.read("count-app-changelog") {
		latest[string(c.Key)] = string(c.Value)
	}
	for pair, s := range seqs {
		for i, v := range s {
			if v != i+1 {
				t.Fatalf("%s: seq %v is not 1..%d", pair, s, len(s))
			}
		}
		if want := fmt.Sprintf(`{"seq":%d}`, len(s)); latest[pair] != want {
			t.Errorf("changelog %s = %s, want %s", pair, latest[pair], want)
		}
	}
}

// Several co-partitioned input topics feed one state per key: records of a
// key from either topic land on one task and count into one entry.
func TestCoPartitionedInputTopicsShareState(t *testing.T) {
	f := newFixture(t)
	f.topics(3, "a", "b", "refined")
	st := stageFile(t, "application_id: count-app\nkind: transformer\ninput_topics: [a, b]\ntransform: {builtin: count, output_topic: refined}\n")
	f.produce("a", keyed(30, 6, "a")...)
	f.produce("b", keyed(30, 6, "b")...)
	r := f.start(st, t.TempDir(), "c")
	waitFor(t, 30*time.Second, "60 outputs", func() bool { return len(f.read("refined")) >= 60 })
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	out := f.read("refined")
	for k, n := range checkSeq(t, out) {
		if n != 10 {
			t.Errorf("key %s has %d outputs, want 10 (5 from each topic)", k, n)
		}
	}
	for _, topic := range []string{"a", "b"} {
		total := int64(0)
		for p := range int32(3) {
			total += max(f.committed("count-app", topic, p), 0)
		}
		if total != 30 {
			t.Errorf("committed offsets of %s sum to %d, want 30", topic, total)
		}
	}
}

// A transformer with config topics (enrich) sees the table as bootstrapped
// at startup, tombstones applied, and configs written later once drained.
func TestEnrichFromConfigTopics(t *testing.T) {
	f := newFixture(t)
	f.topics(2, "devices.config", "raw", "out")
	f.produce("devices.config",
		&kgo.Record{Key: []byte("dev-1"), Value: []byte(`{"site":"berlin","secret":"s"}`)},
		&kgo.Record{Key: []byte("dev-2"), Value: []byte(`{"site":"paris"}`)},
		&kgo.Record{Key: []byte("dev-2")},
	)
	st := stageFile(t, "application_id: enrich-app\nkind: transformer\ninput_topics: [raw]\nconfig_topics: [devices.config]\n"+
		"transform: {builtin: enrich, output_topic: out, lookup: device, fields: [site], into: info, missing: pass}\n")
	r := f.start(st, t.TempDir(), "c")
	entries := func() float64 { return metrics.Value(r.obs.ConfigEntries) }
	waitFor(t, 30*time.Second, "the config bootstrap", func() bool { return entries() == 1 })
	f.produce("raw",
		&kgo.Record{Key: []byte("r1"), Value: []byte(`{"device":"dev-1"}`)},
		&kgo.Record{Key: []byte("r2"), Value: []byte(`{"device":"dev-2"}`)},
	)
	f.produce("devices.config", &kgo.Record{Key: []byte("dev-3"), Value: []byte(`{"site":"rome"}`)})
	waitFor(t, 30*time.Second, "the new config drained", func() bool { return entries() == 2 })
	f.produce("raw", &kgo.Record{Key: []byte("r3"), Value: []byte(`{"device":"dev-3"}`)})
	waitFor(t, 30*time.Second, "three outputs", func() bool { return len(f.read("out")) == 3 })
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, o := range f.read("out") {
		got[string(o.Key)] = string(o.Value)
	}
	want := map[string]string{
		"r1": `{"device":"dev-1","info":{"site":"berlin"}}`,
		"r2": `{"device":"dev-2"}`, // its config was tombstoned: passed as is
		"r3": `{"device":"dev-3","info":{"site":"rome"}}`,
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: %s, want %s", k, got[k], w)
		}
	}
	topics, err := f.adm.ListTopics(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if topics.Has("enrich-app-changelog") {
		t.Error("a stateless stage created a changelog")
	}
}

// On a config topic an empty value and {} delete a config as a null does
// (upstream's store views), at bootstrap and when drained later, and
// config_store_bytes follows the table.
func TestConfigRecordsEmptyOrBracesDelete(t *testing.T) {
	f := newFixture(t)
	f.topics(1, "devices.config", "raw", "out")
	f.produce("devices.config",
		&kgo.Record{Key: []byte("dev-1"), Value: []byte(`{"site":"berlin"}`)},
		&kgo.Record{Key: []byte("dev-2"), Value: []byte(`{"site":"paris"}`)},
		&kgo.Record{Key: []byte("dev-2"), Value: []byte{}},
		&kgo.Record{Key: []byte("dev-3"), Value: []byte(`{"site": "rome", "n": 1e2}`)},
	)
	st := stageFile(t, "application_id: enrich-app\nkind: transformer\ninput_topics: [raw]\nconfig_topics: [devices.config]\n"+
		"transform: {builtin: enrich, output_topic: out, lookup: device, fields: [site], into: info, missing: pass}\n")
	r := f.start(st, t.TempDir(), "c")
	entries := func() float64 { return metrics.Value(r.obs.ConfigEntries) }
	storeBytes := func() float64 { return metrics.Value(r.obs.ConfigStoreBytes) }
	// dev-1 + {"site":"berlin"}, dev-3 + {"n":100.0,"site":"rome"}
	waitFor(t, 30*time.Second, "the config bootstrap", func() bool { return entries() == 2 && storeBytes() == 5+17+5+25 })
	f.produce("devices.config", &kgo.Record{Key: []byte("dev-1"), Value: []byte(`{}`)})
	waitFor(t, 30*time.Second, "{} drained", func() bool { return entries() == 1 && storeBytes() == 5+25 })
	f.produce("raw",
		&kgo.Record{Key: []byte("r1"), Value: []byte(`{"device":"dev-1"}`)},
		&kgo.Record{Key: []byte("r2"), Value: []byte(`{"device":"dev-2"}`)},
		&kgo.Record{Key: []byte("r3"), Value: []byte(`{"device":"dev-3"}`)},
	)
	waitFor(t, 30*time.Second, "three outputs", func() bool { return len(f.read("out")) == 3 })
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"r1": `{"device":"dev-1"}`, // deleted by {}: passed as is
		"r2": `{"device":"dev-2"}`, // deleted by an empty value
		"r3": `{"device":"dev-3","info":{"site":"rome"}}`,
	}
	for _, o := range f.read("out") {
		if w := want[string(o.Key)]; string(o.Value) != w {
			t.Errorf("%s: %s, want %s", o.Key, o.Value, w)
		}
	}
}

// State that ends a batch as it began writes nothing to the changelog:
// not when emitted again unchanged, not when emptied where there was none.
func TestUnchangedStateWritesNothing(t *testing.T) {
	f := newFixture(t)
	f.topics(1, "raw", "refined")
	st := stageFile(t, countStage)
	one, _, err := attr.Decode[attr.State]([]byte(`{"v":1}`))
	if err != nil {
		t.Fatal(err)
	}
	tf := transformer.TransformFunc(func(_ context.Context, in *transformer.Incoming, _ attr.State, out transformer.Emit) error {
		if in.Key == "empty" {
			out.State(attr.State{})
		} else {
			out.State(one)
		}
		return nil
	})
	r := f.startWith(st, t.TempDir(), "c", tf)
	f.produce("raw", &kgo.Record{Key: []byte("k"), Value: []byte(`{}`)})
	waitFor(t, 30*time.Second, "offset 1", func() bool { return f.committed("count-app", "raw", 0) == 1 })
	if n := len(f.read("count-app-changelog")); n != 1 {
		t.Fatalf("%d changelog records after the first state, want 1", n)
	}
	f.produce("raw", keyedAs("k", 3)...)
	f.produce("raw", keyedAs("empty", 2)...)
	waitFor(t, 30*time.Second, "offset 6", func() bool { return f.committed("count-app", "raw", 0) == 6 })
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if cl := f.read("count-app-changelog"); len(cl) != 1 {
		t.Errorf("%d changelog records, want still 1: unchanged state was written", len(cl))
	}
}

func keyedAs(key string, n int) []*kgo.Record {
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Key: []byte(key), Value: []byte(`{}`)}
	}
	return recs
}
