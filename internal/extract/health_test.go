package extract_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flecht-dev/flecht/internal/attr"
	"github.com/flecht-dev/flecht/internal/devenv/devenvtest"
	"github.com/flecht-dev/flecht/internal/extract"
	"github.com/flecht-dev/flecht/internal/health"
	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/metrics"
)

// startProbed runs ex with probes; before runs between NewRunner and Run.
func (f *engineFixture) startProbed(name string, probes *health.Registry, ex extract.Extractor, before func()) *runningEngine {
	r := extract.NewRunner(extract.Options{Stage: f.st, Cluster: &kafkax.Cluster{Brokers: []string{f.addr}}, ClientID: name,
		StateDir: f.t.TempDir(), Metrics: metrics.New(nil), Log: f.logs.Logger(), SessionTimeout: 6 * time.Second, Health: probes})
	if before != nil {
		before()
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx, ex) }()
	e := &runningEngine{cancel: cancel, done: done}
	f.t.Cleanup(func() { e.stop(f.t) })
	return e
}

// An extractor is ready once it joined its group and started (fenced and
// restored) every token it was assigned; not before it runs.
func TestExtractorReadiness(t *testing.T) {
	f := newEngineFixture(t, 2, map[string]int{"a": 5})
	probes := health.New()
	ex := &counter{name: "e0", mu: &f.mu, seen: f.seen, polls: f.polls}
	f.startProbed("e0", probes, ex, func() {
		if r := probes.Readiness(); r.OK || r.Checks[0].Detail != "starting: checking topics, not joined yet" {
			t.Fatalf("before Run: %+v", r)
		}
	})
	f.wait("ready", func() bool { return probes.Readiness().OK })
	if d := probes.Readiness().Checks[0].Detail; d != "joined group ext; every assigned token started (2 tokens)" {
		t.Fatalf("ready detail %q", d)
	}
	f.wait("config a polled", func() bool { return f.pollsOf("a") > 0 })
	if l := probes.Liveness(); !l.OK || l.Checks[0].Name != "cycle_loop" {
		t.Fatalf("liveness %+v", l)
	}
}

// stuckPoll blocks its first Poll until released.
type stuckPoll struct {
	once    sync.Once
	entered chan struct{}
	release chan struct{}
}

func (s *stuckPoll) Poll(ctx context.Context, _ string, _ attr.Config, _ attr.State, _ extract.Page) error {
	s.once.Do(func() {
		close(s.entered)
		<-s.release
	})
	return nil
}

// A poll that never returns stalls the cycle loop: liveness fails past the
// limit and passes again once the poll returns.
func TestStalledExtractorFailsLiveness(t *testing.T) {
	f := newEngineFixture(t, 1, map[string]int{"a": 5})
	probes := health.New(health.StallLimit(3 * time.Second))
	ex := &stuckPoll{entered: make(chan struct{}), release: make(chan struct{})}
	f.startProbed("e0", probes, ex, nil)
	select {
	case <-ex.entered:
	case <-time.After(30 * time.Second):
		t.Fatal("never polled")
	}
	f.wait("liveness to fail", func() bool { return !probes.Liveness().OK })
	if d := probes.Liveness().Checks[0].Detail; !strings.HasPrefix(d, "stalled: no progress for") {
		t.Fatalf("detail %q", d)
	}
	close(ex.release)
	f.wait("liveness to recover", func() bool { return probes.Liveness().OK })
}

// During a Kafka outage an extractor is not ready within its session
// timeout and says why, in the probe and in the log at once; when Kafka
// answers again it says "Kafka is back" and is ready once its tokens
// started again. (It stayed ready, "… (0 tokens)", through a whole outage
// and logged nothing.)
func TestExtractorNotReadyDuringOutage(t *testing.T) {
	f := newEngineFixture(t, 2, map[string]int{"a": 5})
	probes := health.New()
	ex := &counter{name: "e0", mu: &f.mu, seen: f.seen, polls: f.polls}
	f.startProbed("e0", probes, ex, nil)
	f.wait("ready", func() bool { return probes.Readiness().OK })

	const session = 6 * time.Second
	end := devenvtest.Outage(t, f.env)
	began := time.Now()
	f.wait("not ready", func() bool { return !probes.Readiness().OK })
	if took := time.Since(began); took > session+time.Second {
		t.Fatalf("not ready %s after the outage began (session timeout %s)", took, session)
	}
	f.wait("the outage named", func() bool {
		for _, c := range probes.Readiness().Checks {
			if c.Name == "kafka" && !c.OK && strings.Contains(c.Detail, "the session in group ext is gone: no answer from the group coordinator") {
				return true
			}
		}
		return false
	})
	if took := time.Since(began); took > session+time.Second {
		t.Fatalf("the outage named %s after it began (session timeout %s)", took, session)
	}
	if n := f.logs.Count("level=WARN", "no answer from the group coordinator", "attempt="); n != 1 {
		t.Fatalf("want the loss said once, at once; got %d:\n%s", n, f.logs.String())
	}
	end()
	f.wait("ready again", func() bool { return probes.Readiness().OK })
	if n := f.logs.Count("Kafka is back: the group coordinator answers again"); n != 1 {
		t.Fatalf("want one recovery line, got %d:\n%s", n, f.logs.String())
	}
	if n := f.logs.Count("Kafka is back: rejoined group ext after its session failed"); n != 1 {
		t.Fatalf("want the rejoin said once, got %d:\n%s", n, f.logs.String())
	}
}
