package launch

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/acl"
	"github.com/flecht-dev/flecht/internal/acl/acltest"
	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/profile"
)

// A stage whose principal lacks Write on its output refuses to start
// (exit 3) naming the topic, the operation and `flecht acl plan`, before
// it joins its group or creates its changelog.
func TestRunRefusesAMissingPermissionBeforeItJoins(t *testing.T) {
	dir := t.TempDir()
	path := writeStage(t, dir, "count.yaml", stageFile(countStage, "items-count"))
	l := New(Options{Log: slog.New(slog.DiscardHandler), Getenv: func(string) string { return "" }, ClientID: "c0", StateDir: dir})
	st, err := l.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	top, _ := acl.StageTopics(st, nil)
	plan, err := acl.NewPlan(acltest.Principal, top, acl.Options{Role: acl.RoleRun})
	if err != nil {
		t.Fatal(err)
	}
	c := acltest.Start(t, acltest.Without(plan.ACLs, acl.Topic, "items.counted", acl.Write), 2, "items.raw", "items.counted")
	l.o.Cluster = func() (*kafkax.Cluster, error) { return c.Kafka(), nil }
	l.o.Resolve = func() (*profile.Resolved, error) { return &profile.Resolved{}, nil }

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	err = l.Run(ctx, st, dir)
	if exitcode.Code(err) != exitcode.Refused {
		t.Fatalf("run: %v (exit %d), want a refusal (exit 3)", err, exitcode.Code(err))
	}
	for _, want := range []string{"Write on topic items.counted", "flecht acl plan -f " + path + " --role run"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not name %q", err, want)
		}
	}
	adm := kadm.NewClient(c.AdminClient(t))
	groups, err := adm.DescribeGroups(ctx, "items-count")
	if err != nil {
		t.Fatal(err)
	}
	if g := groups["items-count"]; len(g.Members) > 0 || (g.State != "Dead" && g.State != "") {
		t.Errorf("the group was joined: %+v", g)
	}
	topics, err := adm.ListTopics(ctx, "items-count-changelog")
	if err != nil {
		t.Fatal(err)
	}
	if topics.Has("items-count-changelog") && topics["items-count-changelog"].Err == nil {
		t.Error("the changelog was created before the refusal")
	}
}

// A bridge whose principal lacks Write on its output refuses to start the
// same way, before it serves or connects to MQTT.
func TestBridgeRefusesAMissingPermissionBeforeItStarts(t *testing.T) {
	dir := t.TempDir()
	path := writeStage(t, dir, "bridge.yaml", "application_id: br\nkind: mqtt\nconfig_topics: [br.config]\nextract: {builtin: mqtt-relay, output_topic: br.raw}\n")
	l := New(Options{Log: slog.New(slog.DiscardHandler), Getenv: func(string) string { return "" }, ClientID: "edge-0", StateDir: dir})
	st, err := l.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	top, _ := acl.StageTopics(st, nil)
	plan, err := acl.NewPlan(acltest.Principal, top, acl.Options{Role: acl.RoleRun})
	if err != nil {
		t.Fatal(err)
	}
	c := acltest.Start(t, acltest.Without(plan.ACLs, acl.TransactionalID, "br-", acl.Write), 1, "br.config", "br.raw")
	l.o.Cluster = func() (*kafkax.Cluster, error) { return c.Kafka(), nil }
	l.o.Resolve = func() (*profile.Resolved, error) { return &profile.Resolved{}, nil }
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	err = l.Run(ctx, st, dir)
	if exitcode.Code(err) != exitcode.Refused || !strings.Contains(err.Error(), "Write on transactional IDs prefixed br-") {
		t.Fatalf("run: %v (exit %d), want a refusal naming the transactional ID", err, exitcode.Code(err))
	}
}

// An extractor's outputs are the output_topic of its config records: a
// principal without Write on the one its config names refuses to start
// naming it, where it would otherwise start and stall on the produce.
func TestExtractorRefusesAMissingWriteOnItsConfigsOutput(t *testing.T) {
	dir := t.TempDir()
	path := writeStage(t, dir, "poll.yaml", "application_id: ex\nkind: extractor\nconfig_topics: [ex.config]\nextract: {builtin: http-poll}\npoll_interval: 1s\n")
	l := New(Options{Log: slog.New(slog.DiscardHandler), Getenv: func(string) string { return "" }, ClientID: "poll-0", StateDir: dir})
	st, err := l.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	top, _ := acl.StageTopics(st, []string{"ex.items"})
	plan, err := acl.NewPlan(acltest.Principal, top, acl.Options{Role: acl.RoleRun})
	if err != nil {
		t.Fatal(err)
	}
	c := acltest.Start(t, acltest.Without(plan.ACLs, acl.Topic, "ex.items", acl.Write), 1, "ex.config", "ex.items")
	rec := &kgo.Record{Topic: "ex.config", Key: []byte("feed-a"), Value: []byte(`{"url":"http://127.0.0.1:1/feed","output_topic":"ex.items","items":"items","id":"id"}`)}
	if err := c.AdminClient(t).ProduceSync(t.Context(), rec).FirstErr(); err != nil {
		t.Fatal(err)
	}
	l.o.Cluster = func() (*kafkax.Cluster, error) { return c.Kafka(), nil }
	l.o.Resolve = func() (*profile.Resolved, error) { return &profile.Resolved{}, nil }
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	err = l.Run(ctx, st, dir)
	if exitcode.Code(err) != exitcode.Refused || !strings.Contains(err.Error(), "Write on topic ex.items") {
		t.Fatalf("run: %v (exit %d), want a refusal naming Write on topic ex.items", err, exitcode.Code(err))
	}
}
