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

	"github.com/flecht-dev/flecht/internal/devenv/devenvtest"
	"github.com/flecht-dev/flecht/internal/kafkax"
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
	offs.Add(kadm.Offset{Topic: "raw", Partition: 0, At: 10, LeaderEpoch: -1})
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
	req := replay.Request{ApplicationID: "app", InputTopics: []string{"raw"}, Target: replay.Target{Kind: replay.TargetEarliest}, StateDir: dir}
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

	if err := replay.Execute(ctx, cl, plan, replay.ExecOptions{StateDir: dir}); err != nil {
		t.Fatal(err)
	}
	if !plan.Executed || len(plan.Steps) != 4 {
		t.Fatalf("executed %v steps %+v", plan.Executed, plan.Steps)
	}

	// Offsets are exactly the plan's.
	fetched, err := adm.FetchOffsets(ctx, "app")
	if err != nil {
		t.Fatal(err)
	}
	for _, off := range plan.Offsets {
		r, ok := fetched.Lookup(off.Topic, off.Partition)
		if !ok || r.At != off.Target {
			t.Errorf("%s/%d committed %v, plan %d", off.Topic, off.Partition, r.At, off.Target)
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
	if len(plan.DeleteTopics) != 0 || len(plan.StateDirs) != 0 {
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

	req := replay.Request{ApplicationID: "app", InputTopics: []string{"raw"}}
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

	if _, err := replay.WaitForEmptyGroup(ctx, adm, "app", 300*time.Millisecond, 50*time.Millisecond); !errors.As(err, &live) || live.Waited == 0 {
		t.Fatalf("wait with the member there: %v", err)
	}
	go func() {
		time.Sleep(300 * time.Millisecond)
		member.Close() // leaves the group
	}()
	g, err = replay.WaitForEmptyGroup(ctx, adm, "app", 20*time.Second, 50*time.Millisecond)
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
