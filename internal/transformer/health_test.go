package transformer_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/flecht-dev/flecht/internal/attr"
	"github.com/flecht-dev/flecht/internal/devenv/devenvtest"
	"github.com/flecht-dev/flecht/internal/health"
	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/metrics"
	"github.com/flecht-dev/flecht/internal/state"
	"github.com/flecht-dev/flecht/internal/transformer"
	"github.com/flecht-dev/flecht/internal/transformer/builtin"
)

// startProbed runs tf (the stage's builtin when nil) with probes; before,
// when set, runs once the runner exists and before it runs.
func (f *fixture) startProbed(yaml string, probes *health.Registry, tf transformer.Transformer, before func()) (*metrics.Observer, *running) {
	f.t.Helper()
	st := stageFile(f.t, yaml)
	obs := metrics.New(nil)
	r := transformer.NewRunner(transformer.Options{Stage: st, Cluster: f.cluster, ClientID: "c0", StateDir: f.t.TempDir(), Metrics: obs,
		SessionTimeout: 6 * time.Second, Log: testLogger(f.t), Health: probes})
	if tf == nil {
		var err error
		if tf, err = builtin.NewTransformer(st.Transform, builtin.Env{}); err != nil {
			f.t.Fatal(err)
		}
	}
	if before != nil {
		before()
	}
	ctx, cancel := context.WithCancel(context.Background())
	run := &running{cancel: cancel, done: make(chan error, 1), obs: obs}
	go func() { run.done <- r.Run(ctx, tf) }()
	f.t.Cleanup(func() { cancel(); <-run.done })
	return obs, run
}

// holdFetches makes the cluster hold every Fetch that asks for topic until
// release is closed, without stopping it from serving other requests.
func (f *fixture) holdFetches(topic string, release chan struct{}) {
	f.t.Helper()
	listed, err := f.adm.ListTopics(context.Background(), topic)
	if err != nil {
		f.t.Fatal(err)
	}
	id := listed[topic].ID // Fetch v13 names topics by ID
	c := f.env.KafkaCluster()
	c.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		for _, t := range req.(*kmsg.FetchRequest).Topics {
			if t.Topic == topic || t.TopicID == id {
				c.SleepControl(func() { <-release })
				break
			}
		}
		return nil, nil, false
	})
}

// Readiness goes from "starting" through "joined, task restoring, so
// many changelog records left" to ready, and only once the task's changelog partition is
// restored: while the restore is held the probe says 503 and names the
// task; the first ready answer comes with every changelog record restored.
// Liveness holds throughout: a restore in progress is not a stall.
func TestReadinessThroughJoinAndRestore(t *testing.T) {
	f := newFixture(t)
	f.topics(1, "in", "out")
	if err := kafkax.CreateTopic(context.Background(), f.adm, "app-changelog", 1, map[string]string{"cleanup.policy": "compact"}); err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for _, k := range []string{"a", "b", "c"} {
		recs = append(recs, state.ChangelogRecord("app-changelog", 0, k, []byte(`{"seq":1}`)))
	}
	cl := devenvtest.KafkaClient(t, f.env, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	f.holdFetches("app-changelog", release)

	probes := health.New()
	obs, _ := f.startProbed("application_id: app\nkind: transformer\ninput_topics: [in]\ntransform: {builtin: count, output_topic: out}\n", probes, nil, func() {
		rep := probes.Readiness()
		if rep.OK || rep.Checks[0].Detail != "starting: checking topics, not joined yet" {
			t.Fatalf("before Run: %+v", rep)
		}
	})

	waitFor(t, 30*time.Second, "the task waiting for its restore", func() bool {
		r := probes.Readiness()
		return !r.OK && r.Checks[0].Detail == "joined group app; restoring from the changelog: task 0 (3 changelog records left)"
	})
	if got := metrics.Value(obs.StateRestored); got != 0 {
		t.Fatalf("restored %v records while the restore is held", got)
	}
	if live := probes.Liveness(); !live.OK {
		t.Fatalf("a held restore is not a stall: %+v", live)
	}
	close(release)
	var restoredWhenReady float64
	waitFor(t, 30*time.Second, "ready", func() bool {
		if !probes.Readiness().OK {
			return false
		}
		restoredWhenReady = metrics.Value(obs.StateRestored)
		return true
	})
	if restoredWhenReady != 3 {
		t.Fatalf("ready with %v of 3 changelog records restored", restoredWhenReady)
	}
	if d := probes.Readiness().Checks[0].Detail; d != "joined group app; every assigned task started (1 task)" {
		t.Fatalf("ready detail %q", d)
	}
}

// blocking is a transformer that blocks on its first record until released.
type blocking struct {
	once    sync.Once
	entered chan struct{}
	release chan struct{}
}

func (b *blocking) Transform(_ context.Context, _ *transformer.Incoming, _ attr.State, _ transformer.Emit) error {
	b.once.Do(func() {
		close(b.entered)
		<-b.release
	})
	return nil
}

// check is the check of a report by that name.
func check(t *testing.T, rep health.Report, name string) health.Check {
	t.Helper()
	for _, c := range rep.Checks {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no check %q in %+v", name, rep)
	return health.Check{}
}

// A task stuck in a step (here its transformer) fails liveness once past
// its limit, naming the task, although the poll loop, which only hands out
// records, goes on; when the step ends liveness passes again. A task that
// waits for records is no stall, however long it waits.
func TestStalledTaskFailsLiveness(t *testing.T) {
	f := newFixture(t)
	f.topics(1, "in")
	probes := health.New(health.StallLimit(3 * time.Second))
	tf := &blocking{entered: make(chan struct{}), release: make(chan struct{})}
	f.startProbed("application_id: app\nkind: transformer\ninput_topics: [in]\ntransform: {builtin: passthrough, output_topic: in}\n", probes, tf, nil)
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(tf.release) }) }
	t.Cleanup(release) // before the runner's cleanup waits for Run
	waitFor(t, 30*time.Second, "ready", func() bool { return probes.Readiness().OK })
	waitFor(t, 30*time.Second, "alive", func() bool { return probes.Liveness().OK })
	// Idle well past the limit: the task waits for records, which is no stall.
	time.Sleep(4 * time.Second)
	if c := check(t, probes.Liveness(), "tasks"); !c.OK || !strings.HasPrefix(c.Detail, "1 task(s) running") {
		t.Fatalf("an idle task: %+v", c)
	}

	f.produce("in", &kgo.Record{Key: []byte("k"), Value: []byte(`{}`)})
	select {
	case <-tf.entered:
	case <-time.After(30 * time.Second):
		t.Fatal("the record never reached the transformer")
	}
	waitFor(t, 30*time.Second, "liveness to fail", func() bool { return !check(t, probes.Liveness(), "tasks").OK })
	live := probes.Liveness()
	if c := check(t, live, "tasks"); live.Status != "stalled" || !strings.HasPrefix(c.Detail, "stalled: task 0 in one step for up to") {
		t.Fatalf("stalled report: %+v", live)
	}
	release()
	waitFor(t, 30*time.Second, "liveness to recover", func() bool { return probes.Liveness().OK })
}
