package transformer_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flecht-dev/flecht/internal/devenv/devenvtest"
	"github.com/flecht-dev/flecht/internal/health"
	"github.com/flecht-dev/flecht/internal/logx/logxtest"
	"github.com/flecht-dev/flecht/internal/transformer"
	"github.com/flecht-dev/flecht/internal/transformer/builtin"
)

// kafkaCheck is the readiness check named "kafka", if any.
func kafkaCheck(reg *health.Registry) (health.Check, bool) {
	for _, c := range reg.Readiness().Checks {
		if c.Name == "kafka" {
			return c, true
		}
	}
	return health.Check{}, false
}

// During a Kafka outage a transformer is not ready within its session
// timeout, names why, says so in the log at once (and only once in the
// first seconds: no "partitions lost" with nothing lost, no retry warning
// per failed rejoin), and says "Kafka is back" when it answers again.
func TestTransformerNotReadyDuringOutage(t *testing.T) {
	f := newFixture(t)
	f.topics(2, "in", "out")
	st := stageFile(t, "application_id: app\nkind: transformer\ninput_topics: [in]\ntransform: {builtin: passthrough, output_topic: out}\n")
	tf, err := builtin.NewTransformer(st.Transform, builtin.Env{})
	if err != nil {
		t.Fatal(err)
	}
	var logs logxtest.Buffer
	probes := health.New()
	const session = 6 * time.Second
	r := transformer.NewRunner(transformer.Options{Stage: st, Cluster: f.cluster, ClientID: "c0", StateDir: t.TempDir(),
		SessionTimeout: session, Log: logs.Logger(), Health: probes})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx, tf) }()
	t.Cleanup(func() { cancel(); <-done })

	waitFor(t, 30*time.Second, "ready", func() bool { return probes.Readiness().OK })
	end := devenvtest.Outage(t, f.env)
	began := time.Now()
	// The lost session may end the tasks first (franz-go's heartbeat
	// fails at once on a closed connection); the session watch names the
	// outage within the session timeout whatever the poll loop does.
	waitFor(t, 2*session, "the outage named", func() bool {
		c, ok := kafkaCheck(probes)
		return ok && !c.OK
	})
	if took := time.Since(began); took > session+time.Second {
		t.Fatalf("the outage named %s after it began (session timeout %s)", took, session)
	}
	if rep := probes.Readiness(); rep.OK {
		t.Fatalf("ready during the outage: %+v", rep)
	}
	if c, _ := kafkaCheck(probes); !strings.Contains(c.Detail, "the session in group app is gone: no answer from the group coordinator") {
		t.Fatalf("readiness does not say why: %+v", probes.Readiness())
	}
	if n := logs.Count("level=WARN", "no answer from the group coordinator", "attempt="); n != 1 {
		t.Fatalf("want the loss said once, at once; got %d:\n%s", n, logs.String())
	}
	time.Sleep(session) // a stretch of the outage: what the log says meanwhile
	if n := logs.Count(`partitions=""`); n != 0 {
		t.Fatalf("an empty loss logged %d times:\n%s", n, logs.String())
	}
	if n := logs.Count("the group session failed"); n > 1 {
		t.Fatalf("the failed session repeated %d times within %s:\n%s", n, session, logs.String())
	}
	end()
	waitFor(t, 60*time.Second, "ready again", func() bool { return probes.Readiness().OK })
	if n := logs.Count("Kafka is back: the group coordinator answers again"); n != 1 {
		t.Fatalf("want one recovery line, got %d:\n%s", n, logs.String())
	}
}

// An outage shorter than the session timeout that still cost the group
// session (a heartbeat failed) ends with "Kafka is back" too: the
// runbook's check appears on every recovery, not only after a task's
// failed commit was retried.
func TestTransformerSaysKafkaIsBackAfterAShortOutage(t *testing.T) {
	f := newFixture(t)
	f.topics(1, "in", "out")
	st := stageFile(t, "application_id: app\nkind: transformer\ninput_topics: [in]\ntransform: {builtin: passthrough, output_topic: out}\n")
	tf, err := builtin.NewTransformer(st.Transform, builtin.Env{})
	if err != nil {
		t.Fatal(err)
	}
	var logs logxtest.Buffer
	probes := health.New()
	r := transformer.NewRunner(transformer.Options{Stage: st, Cluster: f.cluster, ClientID: "c0", StateDir: t.TempDir(),
		SessionTimeout: 6 * time.Second, Log: logs.Logger(), Health: probes})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx, tf) }()
	t.Cleanup(func() { cancel(); <-done })

	waitFor(t, 30*time.Second, "ready", func() bool { return probes.Readiness().OK })
	end := devenvtest.Outage(t, f.env)
	waitFor(t, 30*time.Second, "the session lost", func() bool { return logs.Count("partitions lost") > 0 })
	end()
	waitFor(t, 60*time.Second, "ready again", func() bool { return probes.Readiness().OK })
	waitFor(t, 10*time.Second, "the recovery said", func() bool {
		return logs.Count("Kafka is back: rejoined group app after its session failed", "failed_attempts=") == 1
	})
	if n := logs.Count("no answer from the group coordinator"); n != 0 {
		t.Fatalf("an outage shorter than the session timeout called the session gone:\n%s", logs.String())
	}
}

// A poll loop held up by a busy task (its queue full) cannot take the
// lost session's callback (franz-go blocks rebalances while the loop
// polls), so the group condition stays as it was; readiness still turns
// within the session timeout of an outage, from the session watch. (A
// transformer that was starting tasks when Kafka went away stayed ready
// for most of a minute.)
func TestTransformerNotReadyDuringOutageWhileItsPollLoopIsHeld(t *testing.T) {
	f := newFixture(t)
	f.topics(1, "in", "out")
	probes := health.New()
	tf := &blocking{entered: make(chan struct{}), release: make(chan struct{})}
	const session = 6 * time.Second
	f.startProbed("application_id: app\nkind: transformer\ninput_topics: [in]\nmax_poll_records: 1\ntransform: {builtin: passthrough, output_topic: out}\n", probes, tf, nil)
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(tf.release) }) }
	t.Cleanup(release) // before the runner's cleanup waits for Run
	waitFor(t, 30*time.Second, "ready", func() bool { return probes.Readiness().OK })
	f.produce("in", keyed(200, 1, "a")...)
	select {
	case <-tf.entered:
	case <-time.After(30 * time.Second):
		t.Fatal("the record never reached the transformer")
	}
	end := devenvtest.Outage(t, f.env)
	defer end()
	began := time.Now()
	waitFor(t, 2*session, "not ready", func() bool { return !probes.Readiness().OK })
	if took := time.Since(began); took > session+time.Second {
		t.Fatalf("not ready %s after the outage began (session timeout %s)", took, session)
	}
	if c, _ := kafkaCheck(probes); c.OK || !strings.Contains(c.Detail, "is gone: no answer from the group coordinator") {
		t.Fatalf("readiness does not say why: %+v", probes.Readiness())
	}
}
