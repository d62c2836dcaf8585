package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/devenv/devenvtest"
	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/kafkax"
)

// A static member stopped without leaving keeps its partitions until its
// session times out; `group leave` shows it (dry run), removes it with
// --execute so the group holds no member at once, and refuses an instance
// ID that is no member.
func TestGroupLeaveRemovesAStoppedStaticMember(t *testing.T) {
	env := devenvtest.Start(t)
	cl := devenvtest.KafkaClient(t, env)
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := kafkax.CreateTopic(ctx, adm, "raw", 2, nil); err != nil {
		t.Fatal(err)
	}
	member, err := kgo.NewClient(kgo.SeedBrokers(env.KafkaAddr()), kgo.ConsumerGroup("app"), kgo.ConsumeTopics("raw"),
		kgo.InstanceID("count-2"), kgo.ClientID("count-2"), kgo.SessionTimeout(45*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	members := func() []kafkax.GroupMember {
		g, err := kafkax.DescribeGroup(ctx, adm, "app")
		if err != nil {
			t.Fatal(err)
		}
		return g.Members
	}
	devenvtest.Joined(t, member)
	member.Close() // a static member does not leave on close
	if m := members(); len(m) != 1 || m[0].InstanceID != "count-2" {
		t.Fatalf("after the stop: %+v", m)
	}
	e := map[string]string{"FLECHT_BROKERS": env.KafkaAddr()}

	r := run(t, e, "", "group", "leave", "app", "--instance", "count-2")
	if r.code != 0 || !strings.Contains(r.out, "would remove count-2 (client id count-2") || !strings.Contains(r.out, "raw [0,1]") || len(members()) != 1 {
		t.Fatalf("dry run: exit %d\n%s%s", r.code, r.out, r.err)
	}
	r = run(t, e, "", "group", "leave", "app", "--instance", "count-9", "--execute")
	if r.code != exitcode.Refused || !strings.Contains(r.err, "no static member count-9") || !strings.Contains(r.err, "count-2") {
		t.Fatalf("unknown instance: exit %d %s", r.code, r.err)
	}
	r = run(t, e, "", "group", "leave", "app", "--instance", "count-2", "--execute", "--watch", "2s", "-o", "json")
	var rep kafkax.LeaveReport
	if err := json.Unmarshal([]byte(r.out), &rep); err != nil || r.code != 0 || !rep.Executed || rep.Removed["count-2"] == "" ||
		len(rep.Rejoined) != 0 || rep.WatchedS != 2 {
		t.Fatalf("execute: exit %d %v %+v\n%s", r.code, err, rep, r.err)
	}
	if m := members(); len(m) != 0 {
		t.Errorf("still members after leave: %+v", m)
	}
	if r := run(t, e, "", "group", "leave", "app"); r.code != exitcode.Usage || !strings.Contains(r.err, "--instance") {
		t.Errorf("no --instance: exit %d %s", r.code, r.err)
	}
}

// A member that still runs rejoins at its next heartbeat once removed and
// holds its partition again: `group leave --execute` watches for that,
// says the member is running and exits 3; --force exits 0 all the same.
// (It printed "removed count-1" and exited 0.)
func TestGroupLeaveSaysALiveMemberRejoined(t *testing.T) {
	env := devenvtest.Start(t)
	adm := kadm.NewClient(devenvtest.KafkaClient(t, env))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := kafkax.CreateTopic(ctx, adm, "raw", 1, nil); err != nil {
		t.Fatal(err)
	}
	member := devenvtest.KafkaClient(t, env, kgo.ConsumerGroup("app"), kgo.ConsumeTopics("raw"),
		kgo.InstanceID("count-1"), kgo.ClientID("count-1"), kgo.SessionTimeout(30*time.Second), kgo.HeartbeatInterval(500*time.Millisecond))
	devenvtest.Joined(t, member)
	polling, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { // a running member: it polls, so it rejoins when told
		defer close(done)
		for polling.Err() == nil {
			member.PollRecords(polling, 10)
		}
	}()
	t.Cleanup(func() { stop(); <-done })
	e := map[string]string{"FLECHT_BROKERS": env.KafkaAddr()}

	r := run(t, e, "", "group", "leave", "app", "--instance", "count-1", "--execute", "--watch", "6s")
	if r.code != exitcode.Refused || !strings.Contains(r.out, "removed count-1") ||
		!strings.Contains(r.out, "count-1 is running: it rejoined the group as member") || !strings.Contains(r.out, "give --force") {
		t.Fatalf("a live member: exit %d\n%s%s", r.code, r.out, r.err)
	}
	r = run(t, e, "", "group", "leave", "app", "--instance", "count-1", "--execute", "--watch", "6s", "--force", "-o", "json")
	var rep kafkax.LeaveReport
	if err := json.Unmarshal([]byte(r.out), &rep); err != nil || r.code != 0 || rep.Rejoined["count-1"].MemberID == "" ||
		rep.Rejoined["count-1"].MemberID == rep.Removed["count-1"] {
		t.Fatalf("--force: exit %d %v %+v\n%s", r.code, err, rep, r.err)
	}
	if r := run(t, e, "", "group", "leave", "app", "--instance", "count-1", "--watch", "soon"); r.code != exitcode.Usage {
		t.Errorf("--watch soon: exit %d %s", r.code, r.err)
	}
}
