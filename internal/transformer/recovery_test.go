package transformer_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/flecht-dev/flecht/internal/health"
	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/logx/logxtest"
	"github.com/flecht-dev/flecht/internal/transformer"
	"github.com/flecht-dev/flecht/internal/transformer/builtin"
)

// startLogged runs the stage's builtin with its log captured; with, when
// set, changes the options first.
func (f *fixture) startLogged(yaml, clientID string, with func(*transformer.Options)) (*running, *logxtest.Buffer) {
	f.t.Helper()
	tf, err := builtin.NewTransformer(stageFile(f.t, yaml).Transform, builtin.Env{})
	if err != nil {
		f.t.Fatal(err)
	}
	return f.runAs(yaml, clientID, tf, with)
}

// alive fails the test if the runner has returned.
func (r *running) alive(t *testing.T) {
	t.Helper()
	select {
	case err := <-r.done:
		r.done <- err
		t.Fatalf("the runner stopped: %v", err)
	default:
	}
}

func isCommit(req kmsg.Request) bool { return req.(*kmsg.EndTxnRequest).Commit }

// isFence matches a task producer's InitProducerID (not the test's own
// idempotent producer's).
func isFence(req kmsg.Request) bool { return req.(*kmsg.InitProducerIDRequest).TransactionalID != nil }

// Commits that fail the way a node's death or a moving coordinator fails
// them, injected at the broker one after the other while records stream
// in: a commit applied and then answered REQUEST_TIMED_OUT (it committed,
// the task cannot know), one refused, outputs refused NOT_ENOUGH_REPLICAS
// past the producer's retries, the offset commit answered
// UNKNOWN_MEMBER_ID, the commit answered PRODUCER_FENCED with no other
// owner about, and a restart whose fence fails twice. The runner never
// stops: each failed task aborts, starts again from its changelog and its
// committed offsets, and the output holds every input exactly once with
// each key's seq 1..n.
func TestTasksRideOutKafkaFailures(t *testing.T) {
	f := newFixture(t)
	f.topics(3, "raw", "refined")
	kf := f.env.KafkaCluster()
	r, logs := f.startLogged(countStage, "c0", nil)
	produced := 0
	more := func(n int) {
		f.produce("raw", keyed(n, 12, "x")...)
		produced += n
	}
	more(600)
	waitFor(t, 30*time.Second, "the first outputs", func() bool { r.alive(t); return len(f.read("refined")) > 0 })

	steps := []struct {
		name   string
		hits   int // before the fault is done
		faults []kfake.Fault
	}{
		{"a commit applied, then answered REQUEST_TIMED_OUT", 1, []kfake.Fault{{Keys: []kmsg.Key{kmsg.EndTxn}, Err: kerr.RequestTimedOut, TopLevel: true, When: isCommit}}},
		{"a commit refused, then two fences refused", 3, []kfake.Fault{
			{Keys: []kmsg.Key{kmsg.EndTxn}, Err: kerr.UnknownServerError, TopLevel: true, When: isCommit},
			{Keys: []kmsg.Key{kmsg.InitProducerID}, Err: kerr.UnknownServerError, TopLevel: true, When: isFence, Count: 2},
		}},
		{"outputs refused NOT_ENOUGH_REPLICAS past the retries", 15, []kfake.Fault{{Keys: []kmsg.Key{kmsg.Produce}, Topic: "refined", Partitions: []int32{1}, Err: kerr.NotEnoughReplicas, Count: 15}}},
		{"the offset commit answered UNKNOWN_MEMBER_ID", 1, []kfake.Fault{{Keys: []kmsg.Key{kmsg.TxnOffsetCommit}, Err: kerr.UnknownMemberID}}},
		{"a commit answered PRODUCER_FENCED, no other owner about", 1, []kfake.Fault{{Keys: []kmsg.Key{kmsg.EndTxn}, Err: kerr.ProducerFenced, TopLevel: true, When: isCommit}}},
	}
	for _, s := range steps {
		h := kf.Fault(s.faults...)
		more(300)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		err := h.Wait(ctx, s.hits)
		cancel()
		if err != nil {
			t.Fatalf("%s: the fault hit %d times, not %d", s.name, h.Hits(), s.hits)
		}
		before := len(f.read("refined"))
		more(300)
		waitFor(t, time.Minute, "outputs after: "+s.name, func() bool { r.alive(t); return len(f.read("refined")) > before })
		h.Remove()
		t.Logf("%s: %d hits; %d restarts so far", s.name, h.Hits(), logs.Count("task resumed from its committed offsets"))
	}
	waitFor(t, time.Minute, "every output", func() bool { r.alive(t); return len(f.read("refined")) >= produced })
	if err := r.stop(t); err != nil {
		t.Fatalf("stop: %v", err)
	}
	out := f.read("refined")
	if len(out) != produced {
		t.Errorf("%d outputs for %d inputs", len(out), produced)
	}
	total := 0
	for _, n := range checkSeq(t, out) {
		total += n
	}
	if total != produced {
		t.Errorf("outputs sum to %d, want %d", total, produced)
	}
	resumed := logs.Count("task resumed from its committed offsets")
	retried := logs.Count("the cluster is unavailable or changing, retrying")
	reinit := logs.Count("initialising the producer again")
	t.Logf("%d task restarts, %d retry logs, %d producer re-initialisations after a fence without another owner", resumed, retried, reinit)
	if resumed < len(steps) || reinit < 2 || logs.Count("starting task", "failed; the cluster is unavailable") < 1 {
		t.Errorf("too few recoveries logged: %d restarts, %d re-initialisations, %d failed starts", resumed, reinit, logs.Count("starting task", "failed"))
	}
}

// While a task restarts the stage is not ready, and names the task; the
// tasks check stays alive throughout, the restart waiting out its
// backoff included. Once the fault is gone the task starts and the stage
// is ready again.
func TestReadinessWhileATaskRestarts(t *testing.T) {
	f := newFixture(t)
	f.topics(1, "in", "out")
	kf := f.env.KafkaCluster()
	probes := health.New()
	yaml := "application_id: app\nkind: transformer\ninput_topics: [in]\ntransform: {builtin: count, output_topic: out}\n"
	r, logs := f.startLogged(yaml, "c0", func(o *transformer.Options) { o.Health = probes })
	f.produce("in", keyed(50, 5, "a")...)
	waitFor(t, 30*time.Second, "ready", func() bool { r.alive(t); return probes.Readiness().OK })

	// Every commit and every fence fails until the fault is removed.
	h := kf.Fault(
		kfake.Fault{Keys: []kmsg.Key{kmsg.EndTxn}, Err: kerr.UnknownServerError, TopLevel: true, When: isCommit, Count: -1},
		kfake.Fault{Keys: []kmsg.Key{kmsg.InitProducerID}, Err: kerr.UnknownServerError, TopLevel: true, When: isFence, Count: -1},
	)
	f.produce("in", keyed(50, 5, "b")...)
	var detail string
	waitFor(t, 30*time.Second, "not ready while the task restarts", func() bool {
		r.alive(t)
		rep := probes.Readiness()
		detail = check(t, rep, "group").Detail
		return !rep.OK && strings.Contains(detail, "task [0] waiting to be fenced and restored")
	})
	// A few failed starts, each waiting out its backoff.
	waitFor(t, 30*time.Second, "failed starts", func() bool { return logs.Count("starting task 0 failed") >= 3 })
	if live := probes.Liveness(); !live.OK {
		t.Fatalf("a restart in backoff is a stall: %+v", live)
	}
	h.Remove()
	waitFor(t, 30*time.Second, "ready again", func() bool { r.alive(t); return probes.Readiness().OK })
	waitFor(t, 30*time.Second, "all 100 outputs", func() bool { return len(f.read("out")) == 100 })
	t.Logf("while restarting: %q", detail)
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	checkSeq(t, f.read("out"))
}

// The start-up checks ride out a cluster that answers but fails them for
// a while (a topic's leader unavailable), and give up with a clear error
// once the start-up timeout has passed.
func TestStartupChecksAreRetried(t *testing.T) {
	f := newFixture(t)
	f.topics(1, "in", "out")
	kf := f.env.KafkaCluster()
	yaml := "application_id: app\nkind: transformer\ninput_topics: [in]\ntransform: {builtin: count, output_topic: out}\n"

	h := kf.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Metadata}, Topic: "in", Err: kerr.LeaderNotAvailable, Count: 3})
	r, logs := f.startLogged(yaml, "c0", nil)
	f.produce("in", keyed(20, 4, "a")...)
	waitFor(t, 30*time.Second, "outputs", func() bool { r.alive(t); return len(f.read("out")) == 20 })
	if h.Hits() != 3 || logs.Count("the start-up checks failed; the cluster is unavailable or changing, retrying") < 1 ||
		logs.Count("the start-up checks passed: Kafka answers again") != 1 {
		t.Errorf("%d faults hit; log:\n%s", h.Hits(), logs.String())
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}

	h = kf.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Metadata}, Topic: "in", Err: kerr.LeaderNotAvailable, Count: -1})
	defer h.Remove()
	start := time.Now()
	r, _ = f.startLogged(yaml, "c1", func(o *transformer.Options) { o.StartupTimeout = 2 * time.Second })
	select {
	case err := <-r.done:
		r.done <- err
		if err == nil || !contains(err.Error(), "LEADER_NOT_AVAILABLE") || !contains(err.Error(), "the start-up checks were tried") {
			t.Fatalf("after the start-up timeout: %v", err)
		}
		t.Logf("gave up after %s: %v", time.Since(start).Round(time.Millisecond), err)
	case <-time.After(30 * time.Second):
		t.Fatal("the start-up checks were retried past their timeout")
	}
}

// A static member that stops stays in its group until its session
// expires, so a restart takes its partitions back without a rebalance;
// with LeaveGroup it leaves at once, for a scale-down.
func TestStopLeavesTheGroupOnlyWhenAsked(t *testing.T) {
	f := newFixture(t)
	f.topics(2, "in", "out")
	yaml := "application_id: app\nkind: transformer\ninput_topics: [in]\ntransform: {builtin: count, output_topic: out}\n"
	members := func() []kafkax.GroupMember {
		g, err := kafkax.DescribeGroup(context.Background(), f.adm, "app")
		if err != nil {
			t.Fatal(err)
		}
		return g.Members
	}
	for _, leave := range []bool{false, true} {
		r, logs := f.startLogged(yaml, "c0", func(o *transformer.Options) { o.LeaveGroup = leave })
		waitFor(t, 30*time.Second, "joined", func() bool { r.alive(t); return logs.Count("tasks started") > 0 })
		if m := members(); len(m) != 1 || m[0].InstanceID != "c0" {
			t.Fatalf("members %+v, want one static member c0", m)
		}
		if err := r.stop(t); err != nil {
			t.Fatal(err)
		}
		m := members()
		switch {
		case leave && len(m) != 0:
			t.Errorf("stopped with LeaveGroup, the group still has %+v", m)
		case !leave && (len(m) != 1 || m[0].InstanceID != "c0"):
			t.Errorf("stopped without LeaveGroup, the group has %+v, want the static member c0 kept", m)
		}
		if !leave {
			// The restart takes the member's place: still one member.
			r, logs = f.startLogged(yaml, "c0", nil)
			waitFor(t, 30*time.Second, "rejoined", func() bool { r.alive(t); return logs.Count("tasks started") > 0 })
			if m := members(); len(m) != 1 {
				t.Errorf("after the restart: %+v", m)
			}
			if err := r.stop(t); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// Two processes with one --client-id share one static member: the newer
// fences the older, which stops with an error that says what to change,
// while the newer goes on.
func TestSameClientIDFencesTheOlder(t *testing.T) {
	f := newFixture(t)
	f.topics(2, "in", "out")
	yaml := "application_id: app\nkind: transformer\ninput_topics: [in]\ntransform: {builtin: count, output_topic: out}\n"
	older, logs := f.startLogged(yaml, "twin", nil)
	waitFor(t, 30*time.Second, "the older joined", func() bool { older.alive(t); return logs.Count("tasks started") > 0 })
	newer, _ := f.startLogged(yaml, "twin", nil)
	select {
	case err := <-older.done:
		older.done <- err
		if err == nil || !contains(err.Error(), "FENCED_INSTANCE_ID") || !contains(err.Error(), "every instance needs its own client id") {
			t.Fatalf("the older stopped with %v", err)
		}
		t.Logf("the older stopped: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("the older runner kept running beside a newer one with its client id")
	}
	f.produce("in", keyed(20, 4, "a")...)
	waitFor(t, 30*time.Second, "the newer processing", func() bool { newer.alive(t); return len(f.read("out")) == 20 })
}
