package replay_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/devenv"
	"github.com/flecht-dev/flecht/internal/devenv/devenvtest"
	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/lineage"
	"github.com/flecht-dev/flecht/internal/replay"
)

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mustCreate(t *testing.T, adm *kadm.Client, topic string, n int32, cfg map[string]string) {
	t.Helper()
	if err := kafkax.CreateTopic(ctxFor(t), adm, topic, n, cfg); err != nil {
		t.Fatal(err)
	}
}

func produce(t *testing.T, cl *kgo.Client, topic string, perPartition, partitions int) {
	t.Helper()
	var recs []*kgo.Record
	for p := range partitions {
		for i := range perPartition {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(p), Key: fmt.Appendf(nil, "k%d", i), Value: []byte(`{}`)})
		}
	}
	if err := cl.ProduceSync(ctxFor(t), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// The whole cycle on the in-process broker: observe, plan, execute, and
// execute again; a zombie's open transaction is aborted and its commit
// fails; only the numbered stores go.
func TestObserveExecute(t *testing.T) {
	env := devenvtest.Start(t)
	cl := devenvtest.KafkaClient(t, env, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(cl)
	ctx := ctxFor(t)

	mustCreate(t, adm, "raw", 3, map[string]string{"retention.ms": "-1"})
	mustCreate(t, adm, "out", 1, nil)
	mustCreate(t, adm, "app-changelog", 3, map[string]string{"cleanup.policy": "compact"})
	produce(t, cl, "raw", 10, 3)
	offs := kadm.Offsets{}
	// Partition 0 was written in generation 3, partition 1 carries none
	// (a stage from before lineage, or the Python library).
	offs.Add(kadm.Offset{Topic: "raw", Partition: 0, At: 10, LeaderEpoch: -1, Metadata: lineage.OffsetMetadata(3)})
	offs.Add(kadm.Offset{Topic: "raw", Partition: 1, At: 4, LeaderEpoch: -1})
	if err := adm.CommitAllOffsets(ctx, "app", offs); err != nil {
		t.Fatal(err)
	}

	// A zombie task producer with a transaction open.
	zombie := devenvtest.KafkaClient(t, env, kgo.TransactionalID("app-0"), kgo.DefaultProduceTopic("out"))
	if err := zombie.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := zombie.ProduceSync(ctx, &kgo.Record{Value: []byte("zombie")}).FirstErr(); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	for _, d := range []string{"0", "2", "keep", "007"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	req := replay.Request{ApplicationID: "app", InputTopics: []string{"raw"}, Target: replay.Target{Kind: replay.TargetEarliest}, StateDir: dir, OutputPolicy: replay.OutputsKeep}
	o, err := replay.Observe(ctx, cl, req)
	if err != nil {
		t.Fatal(err)
	}
	plan := replay.BuildPlan(o)
	if plan.Refused != "" || len(plan.Fence) != 3 || len(plan.DeleteTopics) != 1 || len(plan.Offsets) != 3 {
		t.Fatalf("plan %+v", plan)
	}
	if c := plan.Offsets[1].Current; c == nil || *c != 4 || plan.Offsets[2].Current != nil {
		t.Errorf("currents: %+v", plan.Offsets)
	}
	if want := []string{filepath.Join(dir, "0"), filepath.Join(dir, "2")}; fmt.Sprint(plan.StateDirs) != fmt.Sprint(want) {
		t.Errorf("state dirs %v, want %v (only canonical numbers)", plan.StateDirs, want)
	}
	if plan.Records != 30 {
		t.Errorf("records %d", plan.Records)
	}
	if plan.Generation != 4 || plan.GenerationBefore != 3 {
		t.Errorf("generation %d after %d, want 4 after 3", plan.Generation, plan.GenerationBefore)
	}

	if err := replay.Execute(ctx, cl, plan, replay.ExecOptions{StateDir: dir}); err != nil {
		t.Fatal(err)
	}
	if !plan.Executed || len(plan.Steps) != 4 {
		t.Fatalf("executed %v steps %+v", plan.Executed, plan.Steps)
	}
	// The state before is the plan's; the state after is what the
	// commit left: an empty group holding offsets.
	if plan.GroupState != "Empty" || plan.GroupStateAfter != "Empty" {
		t.Errorf("group state %q, after %q", plan.GroupState, plan.GroupStateAfter)
	}

	// Offsets are exactly the plan's.
	fetched, err := adm.FetchOffsets(ctx, "app")
	if err != nil {
		t.Fatal(err)
	}
	for _, off := range plan.Offsets {
		r, ok := fetched.Lookup(off.Topic, off.Partition)
		if !ok || r.At != off.Target || r.Metadata != lineage.OffsetMetadata(4) {
			t.Errorf("%s/%d committed %v (metadata %q), plan %d with generation 4", off.Topic, off.Partition, r.At, r.Metadata, off.Target)
		}
	}
	// The changelog is gone.
	if _, err := kafkax.DescribeTopics(ctx, adm, "app-changelog"); !errors.As(err, new(*kafkax.MissingTopicsError)) {
		t.Errorf("changelog still there: %v", err)
	}
	// The stores are gone, the rest stays.
	for d, exists := range map[string]bool{"0": false, "2": false, "keep": true, "007": true} {
		if _, err := os.Stat(filepath.Join(dir, d)); (err == nil) != exists {
			t.Errorf("%s: exists=%v, want %v", d, err == nil, exists)
		}
	}
	// The zombie's records never become visible, and its commit fails.
	recs, err := kafkax.ReadToEnd(ctx, cl, "out")
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 0 {
		t.Errorf("read_committed sees %d zombie records", len(recs))
	}
	if err := zombie.EndTransaction(ctx, kgo.TryCommit); err == nil {
		t.Error("the zombie committed after being fenced")
	}

	// Again: idempotent, and it says the changelog is gone.
	o, err = replay.Observe(ctx, cl, req)
	if err != nil {
		t.Fatal(err)
	}
	plan = replay.BuildPlan(o)
	if len(plan.DeleteTopics) != 0 || len(plan.StateDirs) != 0 || plan.Generation != 5 {
		t.Fatalf("second plan %+v", plan)
	}
	if err := replay.Execute(ctx, cl, plan, replay.ExecOptions{StateDir: dir}); err != nil {
		t.Fatal(err)
	}
	for _, off := range plan.Offsets {
		if off.Current == nil || *off.Current != 0 {
			t.Errorf("second plan sees %+v", off)
		}
	}
}

// A live member refuses before anything changes; --wait's poll returns
// once it is gone.
func TestLiveMemberRefuses(t *testing.T) {
	env := devenvtest.Start(t)
	cl := devenvtest.KafkaClient(t, env)
	adm := kadm.NewClient(cl)
	ctx := ctxFor(t)
	mustCreate(t, adm, "raw", 2, nil)
	mustCreate(t, adm, "app-changelog", 2, map[string]string{"cleanup.policy": "compact"})

	member, err := kgo.NewClient(kgo.SeedBrokers(env.KafkaAddr()), kgo.ClientID("count-0"), kgo.ConsumerGroup("app"), kgo.ConsumeTopics("raw"))
	if err != nil {
		t.Fatal(err)
	}
	defer member.Close()
	go func() {
		for ctx.Err() == nil {
			if member.PollFetches(ctx).IsClientClosed() {
				return
			}
		}
	}()
	var g *kafkax.Group
	for deadline := time.Now().Add(20 * time.Second); ; {
		if g, err = kafkax.DescribeGroup(ctx, adm, "app"); err != nil {
			t.Fatal(err)
		}
		if len(g.Members) == 1 && len(g.Members[0].Assigned) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("member never assigned: %+v", g)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if m := g.Members[0]; m.ClientID != "count-0" || g.Protocol != "classic" || fmt.Sprint(m.Assigned[0].Partitions) != "[0 1]" {
		t.Errorf("group %+v", g)
	}

	req := replay.Request{ApplicationID: "app", InputTopics: []string{"raw"}, OutputPolicy: replay.OutputsKeep}
	o, err := replay.Observe(ctx, cl, req)
	if err != nil {
		t.Fatal(err)
	}
	plan := replay.BuildPlan(o)
	if plan.Refused == "" {
		t.Fatal("not refused")
	}
	var live *replay.LiveMembersError
	if err := replay.Execute(ctx, cl, plan, replay.ExecOptions{}); !errors.As(err, &live) || live.Members[0].ClientID != "count-0" {
		t.Fatalf("execute with a live member: %v", err)
	}
	if len(plan.Steps) != 0 || plan.Executed {
		t.Errorf("something was done: %+v", plan.Steps)
	}
	if _, err := kafkax.DescribeTopics(ctx, adm, "app-changelog"); err != nil {
		t.Errorf("the changelog must stay: %v", err)
	}

	if _, err := replay.WaitForEmptyGroup(ctx, cl, "app", 300*time.Millisecond, 50*time.Millisecond); !errors.As(err, &live) || live.Waited == 0 {
		t.Fatalf("wait with the member there: %v", err)
	}
	go func() {
		time.Sleep(300 * time.Millisecond)
		member.Close() // leaves the group
	}()
	g, err = replay.WaitForEmptyGroup(ctx, cl, "app", 20*time.Second, 50*time.Millisecond)
	if err != nil || len(g.Members) != 0 {
		t.Fatalf("wait for the member to leave: %v %+v", err, g)
	}
}

func TestObserveTargets(t *testing.T) {
	env := devenvtest.Start(t)
	cl := devenvtest.KafkaClient(t, env, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(cl)
	ctx := ctxFor(t)
	mustCreate(t, adm, "raw", 2, nil)
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	var recs []*kgo.Record
	for i := range 10 {
		for p := range 2 {
			recs = append(recs, &kgo.Record{Topic: "raw", Partition: int32(p), Value: []byte("{}"), Timestamp: base.Add(time.Duration(i) * time.Minute)})
		}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	observe := func(tg replay.Target) (*replay.Observed, error) {
		return replay.Observe(ctx, cl, replay.Request{ApplicationID: "app", InputTopics: []string{"raw"}, Target: tg})
	}
	o, err := observe(replay.Target{Kind: replay.TargetDatetime, Time: base.Add(4 * time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if got := o.Requested[replay.TP{Topic: "raw", Partition: 1}]; got != 4 {
		t.Errorf("datetime: offset %d, want 4", got)
	}
	// Before 1970: the log start, never the broker's reading of a
	// negative time (-1 is "latest").
	o, err = observe(replay.Target{Kind: replay.TargetDatetime, Time: time.Date(1969, 12, 31, 23, 59, 59, 999_000_000, time.UTC)})
	if err != nil {
		t.Fatal(err)
	}
	for p := range int32(2) {
		if got := o.Requested[replay.TP{Topic: "raw", Partition: p}]; got != 0 {
			t.Errorf("before the epoch: partition %d at %d, want 0", p, got)
		}
	}
	o, err = observe(replay.Target{Kind: replay.TargetDuration, Duration: 100000 * 24 * time.Hour, Time: time.Now().Add(-100000 * 24 * time.Hour)})
	if err != nil {
		t.Fatalf("100000d: %v", err)
	}
	if got := o.Requested[replay.TP{Topic: "raw", Partition: 1}]; got != 0 {
		t.Errorf("100000d: partition 1 at %d, want 0", got)
	}
	o, err = observe(replay.Target{Kind: replay.TargetOffset, Offset: 7})
	if err != nil || o.Requested[replay.TP{Topic: "raw", Partition: 0}] != 7 {
		t.Errorf("offset: %v %v", o, err)
	}

	file := map[replay.TP]int64{{Topic: "raw", Partition: 0}: 3}
	_, err = observe(replay.Target{Kind: replay.TargetFile, File: file, FilePath: "o.csv"})
	var te *replay.TargetError
	if !errors.As(err, &te) || te.Error() != "o.csv lacks raw/1: list every input partition" {
		t.Errorf("file missing a partition: %v", err)
	}
	file[replay.TP{Topic: "raw", Partition: 1}] = 2
	file[replay.TP{Topic: "else", Partition: 0}] = 2
	if _, err = observe(replay.Target{Kind: replay.TargetFile, File: file, FilePath: "o.csv"}); !errors.As(err, &te) {
		t.Errorf("file with a foreign partition: %v", err)
	}
	delete(file, replay.TP{Topic: "else", Partition: 0})
	o, err = observe(replay.Target{Kind: replay.TargetFile, File: file, FilePath: "o.csv"})
	if err != nil || o.Requested[replay.TP{Topic: "raw", Partition: 1}] != 2 {
		t.Errorf("file: %v", err)
	}
	if _, err := replay.Observe(ctx, cl, replay.Request{ApplicationID: "app", InputTopics: []string{"nope"}}); !errors.As(err, new(*kafkax.MissingTopicsError)) {
		t.Errorf("missing input: %v", err)
	}
}

// openTransaction leaves a transaction open on the topic's partition 0
// with n records, as a producer that crashed mid-batch does.
func openTransaction(t *testing.T, env *devenv.Env, id, topic string, n int) {
	t.Helper()
	p := devenvtest.KafkaClient(t, env, kgo.TransactionalID(id), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for range n {
		if err := p.ProduceSync(ctxFor(t), &kgo.Record{Topic: topic, Value: []byte("{}")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

// The end a replay moves an intermediate topic to, and reads an input
// up to, is the last stable offset: past it lie the records of a
// transaction still open, which a committed offset beyond would skip once
// that transaction commits.
func TestObserveStopsAtLastStableOffset(t *testing.T) {
	env := devenvtest.Start(t)
	cl := devenvtest.KafkaClient(t, env, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(cl)
	mustCreate(t, adm, "raw", 1, nil)
	mustCreate(t, adm, "mid", 1, nil)
	produce(t, cl, "raw", 10, 1)
	produce(t, cl, "mid", 5, 1)
	openTransaction(t, env, "upstream-0", "mid", 3)
	openTransaction(t, env, "source-0", "raw", 2)

	o, err := replay.Observe(ctxFor(t), cl, replay.Request{ApplicationID: "app", InputTopics: []string{"raw"}, IntermediateTopics: []string{"mid"}})
	if err != nil {
		t.Fatal(err)
	}
	plan := replay.BuildPlan(o)
	if len(plan.Offsets) != 2 {
		t.Fatalf("offsets %+v", plan.Offsets)
	}
	if in := plan.Offsets[0]; in.LogEnd != 10 || in.Records != 10 {
		t.Errorf("input %+v: the end is 10, not the high watermark 12", in)
	}
	if mid := plan.Offsets[1]; mid.Role != replay.RoleIntermediate || mid.Target != 5 {
		t.Errorf("intermediate %+v: the target is 5, not the high watermark 8", mid)
	}
}

// Only APP-changelog goes: topics whose names merely look like the
// stage's internal topics stay.
func TestExecuteLeavesLookalikes(t *testing.T) {
	env := devenvtest.Start(t)
	cl := devenvtest.KafkaClient(t, env)
	adm := kadm.NewClient(cl)
	ctx := ctxFor(t)
	mustCreate(t, adm, "raw", 2, nil)
	lookalikes := []string{"app-x-changelog", "app-repartition", "app-changelog-old", "xapp-changelog", "app-changelog.dlq", "app-1"}
	for _, topic := range append([]string{"app-changelog"}, lookalikes...) {
		mustCreate(t, adm, topic, 2, map[string]string{"cleanup.policy": "compact"})
	}
	o, err := replay.Observe(ctx, cl, replay.Request{ApplicationID: "app", InputTopics: []string{"raw"}, OutputPolicy: replay.OutputsKeep})
	if err != nil {
		t.Fatal(err)
	}
	plan := replay.BuildPlan(o)
	if fmt.Sprint(plan.DeleteTopics) != "[app-changelog]" {
		t.Fatalf("delete %v", plan.DeleteTopics)
	}
	if err := replay.Execute(ctx, cl, plan, replay.ExecOptions{}); err != nil {
		t.Fatal(err)
	}
	fresh := devenvtest.KafkaClient(t, env) // no metadata cached
	listed, err := kadm.NewClient(fresh).ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if listed.Has("app-changelog") {
		t.Error("app-changelog is still there")
	}
	for _, topic := range lookalikes {
		if !listed.Has(topic) {
			t.Errorf("%s was deleted", topic)
		}
	}
}

// A replay stopped part way (here: its context ends as the offsets step
// starts, after fencing and deleting) is finished by running it again:
// the second plan skips what is done and does the rest.
func TestExecuteResumes(t *testing.T) {
	env := devenvtest.Start(t)
	cl := devenvtest.KafkaClient(t, env, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(cl)
	mustCreate(t, adm, "raw", 2, map[string]string{"retention.ms": "-1"})
	mustCreate(t, adm, "app-changelog", 2, map[string]string{"cleanup.policy": "compact"})
	produce(t, cl, "raw", 5, 2)
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: "raw", Partition: 0, At: 5, LeaderEpoch: -1})
	offs.Add(kadm.Offset{Topic: "raw", Partition: 1, At: 5, LeaderEpoch: -1})
	if err := adm.CommitAllOffsets(ctxFor(t), "app", offs); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, d := range []string{"0", "1"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	req := replay.Request{ApplicationID: "app", InputTopics: []string{"raw"}, StateDir: dir, OutputPolicy: replay.OutputsKeep}

	ctx, cancel := context.WithCancel(ctxFor(t))
	o, err := replay.Observe(ctx, cl, req)
	if err != nil {
		t.Fatal(err)
	}
	plan := replay.BuildPlan(o)
	err = replay.Execute(ctx, cl, plan, replay.ExecOptions{StateDir: dir, OnStep: func(step string) {
		if step == "offsets" {
			cancel()
		}
	}})
	if !errors.Is(err, context.Canceled) || plan.Executed {
		t.Fatalf("interrupted execute: %v, executed %v", err, plan.Executed)
	}
	if got := stepNames(plan.Steps); got != "[fence delete_topics]" {
		t.Fatalf("steps done %s", got)
	}
	if committed := committedAt(t, adm, "app", "raw"); committed != "[5 5]" {
		t.Fatalf("offsets %s moved before their step", committed)
	}

	// Again, from a fresh observation: the changelog is gone, the rest
	// is done now.
	o, err = replay.Observe(ctxFor(t), cl, req)
	if err != nil {
		t.Fatal(err)
	}
	plan = replay.BuildPlan(o)
	if len(plan.DeleteTopics) != 0 || len(plan.StateDirs) != 2 {
		t.Fatalf("second plan %+v", plan)
	}
	if err := replay.Execute(ctxFor(t), cl, plan, replay.ExecOptions{StateDir: dir}); err != nil || !plan.Executed {
		t.Fatalf("second execute: %v", err)
	}
	if got := stepNames(plan.Steps); got != "[fence offsets state_dirs]" {
		t.Errorf("second steps %s", got)
	}
	if committed := committedAt(t, adm, "app", "raw"); committed != "[0 0]" {
		t.Errorf("offsets %s after the second run", committed)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state dir still there: %v", err)
	}
}

func stepNames(steps []replay.Step) string {
	names := make([]string, len(steps))
	for i, s := range steps {
		names[i] = s.Step
	}
	return fmt.Sprint(names)
}

// committedAt lists the group's committed offsets on a topic's partitions
// in order.
func committedAt(t *testing.T, adm *kadm.Client, group, topic string) string {
	t.Helper()
	fetched, err := adm.FetchOffsets(ctxFor(t), group)
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	for p := int32(0); ; p++ {
		r, ok := fetched.Lookup(topic, p)
		if !ok {
			return fmt.Sprint(out)
		}
		out = append(out, r.At)
	}
}
