package replay_test

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/acl"
	"github.com/flecht-dev/flecht/internal/acl/acltest"
	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/replay"
)

// replayACLs is the replay role's plan for app: raw -> out, with a
// changelog, truncating the outputs.
func replayACLs(t *testing.T) []acl.ACL {
	t.Helper()
	top := acl.Topics{Kind: "transformer", ApplicationID: "app", Inputs: []string{"raw"}, Outputs: []string{"out"}, Changelog: "app-changelog"}
	p, err := acl.NewPlan(acltest.Principal, top, acl.Options{Role: acl.RoleReplay, TruncateOutputs: true})
	if err != nil {
		t.Fatal(err)
	}
	return p.ACLs
}

// A replay whose principal lacks one ACL of its plan is refused before its
// first change, naming the ACL: the offsets, the changelog and the output
// are as they were. With the whole plan granted it runs.
func TestReplayPreflightRefusesBeforeAnyChange(t *testing.T) {
	ctx := ctxFor(t)
	for _, drop := range []struct {
		typ  acl.ResourceType
		name string
		op   acl.Operation
		want string
	}{
		{acl.Topic, "app-changelog", acl.Delete, "Delete on topic app-changelog"},
		{acl.TransactionalID, "app-", acl.Write, "Write on transactional IDs prefixed app-"},
		{acl.Topic, "out", acl.Delete, "Describe on topic out"},
		{acl.Topic, "raw", acl.DescribeConfigs, "DescribeConfigs on topic raw"},
	} {
		t.Run(drop.want, func(t *testing.T) {
			c := acltest.Start(t, acltest.Without(replayACLs(t), drop.typ, drop.name, drop.op), 2, "raw", "out", "app-changelog")
			admin := c.AdminClient(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
			adm := kadm.NewClient(admin)
			produce(t, admin, "raw", 5, 2)
			produce(t, admin, "out", 3, 1)
			produce(t, admin, "app-changelog", 2, 2)
			offs := kadm.Offsets{}
			offs.Add(kadm.Offset{Topic: "raw", Partition: 0, At: 5, LeaderEpoch: -1})
			if err := adm.CommitAllOffsets(ctx, "app", offs); err != nil {
				t.Fatal(err)
			}

			req, _, err := replay.NewRequest(replay.Flags{ApplicationID: "app", InputTopics: []string{"raw"}, OutputTopics: []string{"out"}, TruncateOutputs: true, StateDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			plan, err := replay.Run(ctx, c.Client(t), req, replay.RunOptions{Execute: true, Waiting: func(string) {}, Step: func(string) func() { return func() {} }})
			if err == nil || !strings.Contains(err.Error(), drop.want) {
				t.Fatalf("replay: %v, want it to name %q", err, drop.want)
			}
			if plan != nil && len(plan.Steps) > 0 {
				t.Errorf("steps ran: %+v", plan.Steps)
			}
			if plan != nil && plan.Executed {
				t.Error("plan says executed")
			}
			if drop.op != acl.Delete || drop.name != "out" {
				if exitcode.Code(err) != exitcode.Refused {
					t.Errorf("exit %d, want 3", exitcode.Code(err))
				}
			}
			committed, err := adm.FetchOffsets(ctx, "app")
			if err != nil {
				t.Fatal(err)
			}
			if o, _ := committed.Lookup("raw", 0); o.At != 5 {
				t.Errorf("the offset moved to %d", o.At)
			}
			ends, err := adm.ListEndOffsets(ctx, "app-changelog", "out")
			if err != nil {
				t.Fatal(err)
			}
			if o, ok := ends.Lookup("app-changelog", 0); !ok || o.Err != nil {
				t.Errorf("the changelog was deleted: %+v", o)
			}
			starts, err := adm.ListStartOffsets(ctx, "out")
			if err != nil {
				t.Fatal(err)
			}
			if o, _ := starts.Lookup("out", 0); o.Offset != 0 {
				t.Errorf("the output was truncated to %d", o.Offset)
			}
		})
	}

	t.Run("the whole plan", func(t *testing.T) {
		c := acltest.Start(t, replayACLs(t), 2, "raw", "out", "app-changelog")
		admin := c.AdminClient(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
		produce(t, admin, "raw", 5, 2)
		produce(t, admin, "out", 3, 1)
		req, _, err := replay.NewRequest(replay.Flags{ApplicationID: "app", InputTopics: []string{"raw"}, OutputTopics: []string{"out"}, TruncateOutputs: true, StateDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		plan, err := replay.Run(ctx, c.Client(t), req, replay.RunOptions{Execute: true, NewApp: true, Waiting: func(string) {}, Step: func(string) func() { return func() {} }})
		if err != nil || !plan.Executed {
			t.Fatalf("replay with its whole plan granted: %v", err)
		}
	})
}

// A replay's plan says a raw topic's retention is unknown when the
// principal may not describe its configs, instead of aborting.
func TestReplayPlanSaysRetentionIsUnknown(t *testing.T) {
	ctx := ctxFor(t)
	c := acltest.Start(t, acltest.Without(replayACLs(t), acl.Topic, "raw", acl.DescribeConfigs), 2, "raw", "out", "app-changelog")
	produce(t, c.AdminClient(t, kgo.RecordPartitioner(kgo.ManualPartitioner())), "raw", 5, 2)
	req, _, err := replay.NewRequest(replay.Flags{ApplicationID: "app", InputTopics: []string{"raw"}, OutputTopics: []string{"out"}, TruncateOutputs: true, StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	plan, err := replay.Run(ctx, c.Client(t), req, replay.RunOptions{NewApp: true, Waiting: func(string) {}, Step: func(string) func() { return func() {} }})
	if err != nil {
		t.Fatalf("the dry run aborted: %v", err)
	}
	for _, w := range plan.Warnings {
		if w.Kind == replay.WarnNotAuthorized && w.Topic == "raw" && strings.Contains(w.Message, "unknown: not authorized (needs DescribeConfigs on topic raw)") {
			return
		}
	}
	t.Errorf("no not_authorized warning: %+v", plan.Warnings)
}

// A permission revoked while the replay runs stops it part-way: the error
// names the steps that ran and says that running it again finishes it.
func TestReplayStoppedPartWaySaysSo(t *testing.T) {
	ctx := ctxFor(t)
	grant := replayACLs(t)
	c := acltest.Start(t, grant, 2, "raw", "out", "app-changelog")
	produce(t, c.AdminClient(t, kgo.RecordPartitioner(kgo.ManualPartitioner())), "raw", 5, 2)
	req, _, err := replay.NewRequest(replay.Flags{ApplicationID: "app", InputTopics: []string{"raw"}, OutputTopics: []string{"out"}, TruncateOutputs: true, StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	step := func(label string) func() {
		if strings.HasSuffix(label, ": delete_topics") {
			for _, a := range grant {
				if a.ResourceName == "app-changelog" && a.Operation == acl.Delete {
					c.Revoke(t, a)
				}
			}
		}
		return func() {}
	}
	plan, err := replay.Run(ctx, c.Client(t), req, replay.RunOptions{Execute: true, NewApp: true, Waiting: func(string) {}, Step: step})
	if err == nil || !strings.Contains(err.Error(), "replay stopped part-way after fence") || !strings.Contains(err.Error(), "run the same command again to finish it") {
		t.Fatalf("replay: %v", err)
	}
	if plan == nil || plan.Executed || len(plan.Steps) != 1 || plan.Steps[0].Step != "fence" {
		t.Errorf("plan %+v", plan)
	}
}
