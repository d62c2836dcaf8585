package replay_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/devenv/devenvtest"
	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/replay"
)

// --truncate-outputs deletes only what the stage alone owns. Each output
// is refused, naming why, when it is one of the stage's inputs, when
// another group has committed offsets on it, or when a producer that is
// none of the stage's transactional IDs writes to it; an open transaction
// of the stage's own ID (a zombie the fence aborts) is no other writer.
// The dry run shows the refusals; --execute refuses (exit 3) before any
// step, and every output keeps its records.
func TestTruncateRefusesWhatTheStageDoesNotOwn(t *testing.T) {
	env := devenvtest.Start(t)
	cl := devenvtest.KafkaClient(t, env, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(cl)
	ctx := ctxFor(t)
	for _, topic := range []string{"raw", "own", "read", "shared"} {
		mustCreate(t, adm, topic, 1, nil)
		produce(t, cl, topic, 5, 1)
	}
	// Another application reads "read".
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: "read", Partition: 0, At: 2, LeaderEpoch: -1})
	if _, err := adm.CommitOffsets(ctx, "downstream", offs); err != nil {
		t.Fatal(err)
	}
	// Another producer writes "shared"; the stage's own zombie writes "own".
	openTransaction(t, env, "elsewhere-0", "shared", 2)
	openTransaction(t, env, "app-0", "own", 2)

	req := replay.Request{ApplicationID: "app", InputTopics: []string{"raw"}, OutputsKnown: true, OutputPolicy: replay.OutputsTruncate,
		OutputTopics: []replay.OutputTopic{{Topic: "own", Role: replay.RoleOutput}, {Topic: "read", Role: replay.RoleOutput}, {Topic: "shared", Role: replay.RoleOutput}, {Topic: "raw", Role: replay.RoleOutput}}}
	o, err := replay.Observe(ctx, cl, req)
	if err != nil {
		t.Fatal(err)
	}
	plan := replay.BuildPlan(o)
	want := map[string]string{
		"own":    "",
		"read":   "group downstream has committed offsets on it",
		"shared": "(transactional ID elsewhere-0) on partition 0 that is none of the stage's transactional IDs",
		"raw":    "it is an input topic of the stage",
	}
	for _, out := range plan.Outputs {
		if out.Action != replay.ActionTruncate {
			t.Errorf("%s: action %s, want truncate", out.Topic, out.Action)
		}
		switch w := want[out.Topic]; {
		case w == "" && out.Refused != "":
			t.Errorf("%s is the stage's alone, yet refused: %s", out.Topic, out.Refused)
		case w != "" && !strings.Contains(out.Refused, w):
			t.Errorf("%s: refusal %q, want it to say %q", out.Topic, out.Refused, w)
		}
	}
	why := plan.TruncateRefusal()
	for _, part := range []string{"read: group downstream", "shared: producer ID", "raw: it is an input topic", "--keep-outputs"} {
		if !strings.Contains(why, part) {
			t.Errorf("refusal lacks %q: %s", part, why)
		}
	}
	if strings.Contains(why, "own:") {
		t.Errorf("the stage's own output is named: %s", why)
	}

	var refused *replay.OutputsError
	if err := replay.Execute(ctx, cl, plan, replay.ExecOptions{}); !errors.As(err, &refused) || len(plan.Steps) != 0 {
		t.Fatalf("execute: %v, steps %+v", err, plan.Steps)
	}
	got, err := replay.Run(ctx, cl, req, replay.RunOptions{Execute: true, NewApp: true, Step: func(string) func() { return func() {} }})
	if exitcode.Code(err) != exitcode.Refused || got == nil || !strings.Contains(got.Refused, "raw: it is an input topic") || got.Executed || len(got.Steps) != 0 {
		t.Fatalf("run --execute: exit %d %v, plan %+v", exitcode.Code(err), err, got)
	}
	starts, err := adm.ListStartOffsets(ctx, "raw", "own", "read", "shared")
	if err != nil {
		t.Fatal(err)
	}
	starts.Each(func(l kadm.ListedOffset) {
		if l.Offset != 0 {
			t.Errorf("%s starts at %d after a refused replay", l.Topic, l.Offset)
		}
	})

	// Without the others, the stage's own output is truncated.
	req.OutputTopics = req.OutputTopics[:1]
	done, err := replay.Run(ctx, cl, req, replay.RunOptions{Execute: true, NewApp: true, Step: func(string) func() { return func() {} }})
	if err != nil || !done.Executed {
		t.Fatalf("truncating the stage's own output: %v %+v", err, done)
	}
}

// What a replay reports is what a read_committed reader then sees: the
// plan counts offsets and says so (transaction markers take offsets, so a
// reader sees fewer records than the plan's number, never more); the
// truncation deletes exactly the offsets it reported, leaving nothing a
// reader sees; the group holds exactly the targets the plan listed, and
// reading from them sees every committed record up to the plan's end.
func TestReplayReportsWhatAReaderSees(t *testing.T) {
	env := devenvtest.Start(t)
	cl := devenvtest.KafkaClient(t, env, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(cl)
	ctx := ctxFor(t)
	mustCreate(t, adm, "raw", 2, map[string]string{"retention.ms": "-1"})
	mustCreate(t, adm, "out", 2, nil)
	// Each transaction of one record ends in a marker; one is aborted.
	txn := func(id, topic string, part int32, n int, commit bool) {
		t.Helper()
		p := devenvtest.KafkaClient(t, env, kgo.TransactionalID(id), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		for range n {
			if err := p.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			if err := p.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: part, Value: []byte("{}")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
			if err := p.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
				t.Fatal(err)
			}
		}
		p.Close()
	}
	txn("feeder-0", "raw", 0, 4, true)
	txn("feeder-1", "raw", 1, 3, true)
	txn("feeder-1", "raw", 1, 1, false)
	txn("app-0", "out", 0, 3, true)
	txn("app-1", "out", 1, 2, true)
	txn("app-1", "out", 1, 1, false)

	read := func(topic string, from map[kafkax.TopicPartition]int64) (n int, offsets map[kafkax.TopicPartition][]int64) {
		t.Helper()
		offsets = map[kafkax.TopicPartition][]int64{}
		start := kafkax.FromLogStart
		if from != nil {
			start = kafkax.FromOffsets(from)
		}
		_, err := kafkax.ReadFrom(ctx, cl, []string{topic}, start, nil, func(r *kgo.Record) error {
			tp := kafkax.TopicPartition{Topic: r.Topic, Partition: r.Partition}
			offsets[tp] = append(offsets[tp], r.Offset)
			n++
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return n, offsets
	}
	outBefore, _ := read("out", nil)
	startsBefore, err := adm.ListStartOffsets(ctx, "out")
	if err != nil {
		t.Fatal(err)
	}

	req := replay.Request{ApplicationID: "app", InputTopics: []string{"raw"}, OutputsKnown: true, OutputPolicy: replay.OutputsTruncate,
		OutputTopics: []replay.OutputTopic{{Topic: "out", Role: replay.RoleOutput}}}
	plan, err := replay.Run(ctx, cl, req, replay.RunOptions{Execute: true, NewApp: true, Step: func(string) func() { return func() {} }})
	if err != nil || !plan.Executed {
		t.Fatalf("replay: %v %+v", err, plan)
	}

	// The output: the offsets reported deleted are the offsets gone, and
	// no record of it is left to a reader.
	startsAfter, err := adm.ListStartOffsets(ctx, "out")
	if err != nil {
		t.Fatal(err)
	}
	var deleted int64
	startsAfter.Each(func(a kadm.ListedOffset) {
		b, _ := startsBefore.Lookup(a.Topic, a.Partition)
		deleted += a.Offset - b.Offset
	})
	if o := plan.Outputs[0]; o.Records != deleted || o.Records < int64(outBefore) {
		t.Errorf("the plan reported %d offsets of out deleted; %d were, holding %d records", o.Records, deleted, outBefore)
	}
	if n, _ := read("out", nil); n != 0 {
		t.Errorf("a reader still sees %d records of the truncated output", n)
	}

	// The inputs: the group holds the targets listed, and a reader from
	// them sees every committed record, within the offsets the plan
	// counted.
	committed, err := adm.FetchOffsets(ctx, "app")
	if err != nil {
		t.Fatal(err)
	}
	from := map[kafkax.TopicPartition]int64{}
	for _, o := range plan.Offsets {
		got, _ := committed.Lookup(o.Topic, o.Partition)
		if got.At != o.Target {
			t.Errorf("%s/%d: the group holds %d, the plan listed %d", o.Topic, o.Partition, got.At, o.Target)
		}
		from[kafkax.TopicPartition{Topic: o.Topic, Partition: o.Partition}] = o.Target
	}
	n, offsets := read("raw", from)
	if n != 7 || int64(n) > plan.Records {
		t.Errorf("a reader from the targets sees %d records; want the 7 committed, within the %d offsets the plan counted", n, plan.Records)
	}
	for _, o := range plan.Offsets {
		for _, off := range offsets[kafkax.TopicPartition{Topic: o.Topic, Partition: o.Partition}] {
			if off < o.Target || off >= o.LogEnd {
				t.Errorf("%s/%d: a record at %d, outside the plan's [%d, %d)", o.Topic, o.Partition, off, o.Target, o.LogEnd)
			}
		}
	}
	t.Logf("plan: %d input offsets for %d records; %d output offsets deleted for %d records", plan.Records, n, deleted, outBefore)
}
