package replay_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/devenv/devenvtest"
	"github.com/flecht-dev/flecht/internal/exitcode"
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
