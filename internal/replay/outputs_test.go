package replay_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/devenv/devenvtest"
	"github.com/flecht-dev/flecht/internal/replay"
)

// The plan names every topic the stage writes with what it holds. While
// one holds records and no choice was made, Execute refuses before it
// changes anything; --truncate-outputs deletes their records up to the end
// after the fence; --keep-outputs leaves them. Empty and missing outputs
// need no choice.
func TestReplayOutputs(t *testing.T) {
	env := devenvtest.Start(t)
	cl := devenvtest.KafkaClient(t, env, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(cl)
	ctx := ctxFor(t)
	mustCreate(t, adm, "raw", 2, map[string]string{"retention.ms": "-1"})
	mustCreate(t, adm, "refined", 2, nil)
	mustCreate(t, adm, "empty", 2, nil)
	produce(t, cl, "raw", 5, 2)
	produce(t, cl, "refined", 7, 2)
	outs := []replay.OutputTopic{{Topic: "refined", Role: replay.RoleOutput}, {Topic: "empty", Role: replay.RoleOutput}, {Topic: "raw.dlq", Role: replay.RoleDeadLetter}}
	plan := func(policy string, known bool) *replay.Plan {
		t.Helper()
		req := replay.Request{ApplicationID: "app", InputTopics: []string{"raw"}, OutputPolicy: policy, OutputsKnown: known}
		if known {
			req.OutputTopics = outs
		}
		o, err := replay.Observe(ctx, cl, req)
		if err != nil {
			t.Fatal(err)
		}
		return replay.BuildPlan(o)
	}

	ask := plan(replay.OutputsAsk, true)
	want := []replay.Output{
		{Topic: "refined", Role: replay.RoleOutput, Exists: true, Partitions: 2, Records: 14, Action: replay.ActionChoose},
		{Topic: "empty", Role: replay.RoleOutput, Exists: true, Partitions: 2, Action: replay.ActionNone},
		{Topic: "raw.dlq", Role: replay.RoleDeadLetter, Action: replay.ActionNone},
	}
	for i, o := range ask.Outputs {
		if o != want[i] {
			t.Errorf("output %d: %+v, want %+v", i, o, want[i])
		}
	}
	why := ask.OutputRefusal()
	for _, part := range []string{"refined (14 offsets)", "--truncate-outputs", "--keep-outputs", "refined.v2"} {
		if !strings.Contains(why, part) {
			t.Errorf("refusal lacks %q: %s", part, why)
		}
	}
	var refused *replay.OutputsError
	if err := replay.Execute(ctx, cl, ask, replay.ExecOptions{}); !errors.As(err, &refused) || len(ask.Steps) != 0 || ask.Executed {
		t.Fatalf("execute without a choice: %v, steps %+v", err, ask.Steps)
	}
	if g, err := adm.FetchOffsets(ctx, "app"); len(g) != 0 || (err != nil && !errors.Is(err, kerr.GroupIDNotFound)) {
		t.Fatalf("a refused replay committed offsets: %v %v", g, err)
	}

	unknown := plan(replay.OutputsAsk, false)
	if why := unknown.OutputRefusal(); !strings.Contains(why, "does not know the topics the stage writes") {
		t.Errorf("unknown outputs: %q", why)
	}
	if why := plan(replay.OutputsKeep, false).OutputRefusal(); why != "" {
		t.Errorf("--keep-outputs with unknown outputs refused: %s", why)
	}

	keep := plan(replay.OutputsKeep, true)
	if keep.Outputs[0].Action != replay.ActionKeep || keep.OutputRefusal() != "" {
		t.Fatalf("keep: %+v", keep.Outputs)
	}

	trunc := plan(replay.OutputsTruncate, true)
	if trunc.Outputs[0].Action != replay.ActionTruncate || trunc.Outputs[1].Action != replay.ActionNone {
		t.Fatalf("truncate: %+v", trunc.Outputs)
	}
	if err := replay.Execute(ctx, cl, trunc, replay.ExecOptions{}); err != nil {
		t.Fatal(err)
	}
	steps := ""
	for _, s := range trunc.Steps {
		steps += s.Step + " "
	}
	if steps != "fence offsets truncate_outputs " {
		t.Errorf("steps %q", steps)
	}
	starts, err := adm.ListStartOffsets(ctx, "refined")
	if err != nil {
		t.Fatal(err)
	}
	starts.Each(func(o kadm.ListedOffset) {
		if o.Offset != 7 {
			t.Errorf("refined/%d starts at %d after the truncation, want its end 7", o.Partition, o.Offset)
		}
	})
	if after := plan(replay.OutputsAsk, true); after.OutputRefusal() != "" || after.Outputs[0].Records != 0 {
		t.Errorf("after truncating, the outputs still need a choice: %+v", after.Outputs)
	}
}
