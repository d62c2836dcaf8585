package health_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flecht-dev/flecht/internal/health"
)

// clock is a settable time for the registry.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func newClock() *clock { return &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

func probe(t *testing.T, h http.Handler) (int, health.Report) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q", ct)
	}
	var rep health.Report
	if err := json.Unmarshal(rec.Body.Bytes(), &rep); err != nil {
		t.Fatalf("body %q: %v", rec.Body.String(), err)
	}
	return rec.Code, rep
}

func TestLoopStallsAfterItsLimit(t *testing.T) {
	c := newClock()
	r := health.New(health.Clock(c.Now))
	poll := r.Loop("poll", 10*time.Second)
	r.Loop("other", time.Hour)

	code, rep := probe(t, r.LivenessHandler())
	if code != 200 || rep.Status != "alive" || !rep.OK || len(rep.Checks) != 2 {
		t.Fatalf("fresh loops: %d %+v", code, rep)
	}
	c.Add(9 * time.Second)
	poll.Beat()
	c.Add(9 * time.Second)
	if code, _ := probe(t, r.LivenessHandler()); code != 200 {
		t.Fatalf("beaten 9s ago with a 10s limit: %d", code)
	}
	c.Add(2 * time.Second)
	code, rep = probe(t, r.LivenessHandler())
	if code != 503 || rep.Status != "stalled" || rep.OK {
		t.Fatalf("11s without a beat: %d %+v", code, rep)
	}
	// Checks are sorted by name: other, poll.
	if rep.Checks[1].Name != "poll" || rep.Checks[1].OK || !strings.Contains(rep.Checks[1].Detail, "stalled: no progress for 11s (limit 10s)") {
		t.Fatalf("poll check: %+v", rep.Checks[1])
	}
	if !rep.Checks[0].OK {
		t.Fatalf("the other loop is fine: %+v", rep.Checks[0])
	}
	if *rep.Checks[1].LastBeatSeconds != 11 || *rep.Checks[1].LimitSeconds != 10 {
		t.Fatalf("seconds: %v %v", *rep.Checks[1].LastBeatSeconds, *rep.Checks[1].LimitSeconds)
	}
	poll.Beat()
	if code, _ := probe(t, r.LivenessHandler()); code != 200 {
		t.Fatalf("a beat recovers: %d", code)
	}
}

func TestIdleExtendsTheLimitOnce(t *testing.T) {
	c := newClock()
	r := health.New(health.Clock(c.Now))
	l := r.Loop("cycle", 10*time.Second)
	l.Idle(time.Minute)
	c.Add(65 * time.Second)
	code, rep := probe(t, r.LivenessHandler())
	if code != 200 {
		t.Fatalf("within the announced wait plus the limit: %d %+v", code, rep)
	}
	c.Add(10 * time.Second)
	if code, _ := probe(t, r.LivenessHandler()); code != 503 {
		t.Fatalf("past the wait plus the limit: %d", code)
	}
	// A plain beat takes the allowance back.
	l.Beat()
	c.Add(11 * time.Second)
	if code, _ := probe(t, r.LivenessHandler()); code != 503 {
		t.Fatalf("after a beat only the limit counts: %d", code)
	}
}

func TestStoppedLoopIsNotAlive(t *testing.T) {
	r := health.New()
	l := r.Loop("relay", time.Hour)
	l.Stop()
	code, rep := probe(t, r.LivenessHandler())
	if code != 503 || rep.Checks[0].Detail != "the loop has ended" {
		t.Fatalf("%d %+v", code, rep)
	}
}

func TestStallLimitOverridesEveryLoop(t *testing.T) {
	c := newClock()
	r := health.New(health.Clock(c.Now), health.StallLimit(time.Second))
	r.Loop("poll", time.Hour)
	c.Add(2 * time.Second)
	if code, _ := probe(t, r.LivenessHandler()); code != 503 {
		t.Fatalf("override ignored: %d", code)
	}
}

func TestReadinessNeedsEveryCondition(t *testing.T) {
	r := health.New()
	if code, rep := probe(t, r.ReadinessHandler()); code != 503 || rep.Status != "not_ready" {
		t.Fatalf("no condition is not ready: %d %+v", code, rep)
	}
	group := r.Condition("group", "not joined yet")
	mqtt := r.Condition("mqtt", "not connected")
	code, rep := probe(t, r.ReadinessHandler())
	if code != 503 || rep.Checks[0].Name != "group" || rep.Checks[0].Detail != "not joined yet" || rep.Checks[0].OK {
		t.Fatalf("%d %+v", code, rep)
	}
	group.Set(true, "joined")
	if code, _ := probe(t, r.ReadinessHandler()); code != 503 {
		t.Fatalf("one condition still unmet: %d", code)
	}
	mqtt.Set(true, "subscribed")
	code, rep = probe(t, r.ReadinessHandler())
	if code != 200 || rep.Status != "ready" || !rep.OK {
		t.Fatalf("%d %+v", code, rep)
	}
	if !group.Met() {
		t.Fatal("Met")
	}
	group.Set(false, "rebalancing")
	if code, rep := probe(t, r.ReadinessHandler()); code != 503 || rep.Checks[0].Detail != "rebalancing" {
		t.Fatalf("%d %+v", code, rep)
	}
}

// A worker in one step past the limit is stalled, named by its id; one
// waiting for work never is, however long it waits; a stopped worker
// leaves the check.
func TestWorkersStallOnlyInAStep(t *testing.T) {
	c := newClock()
	r := health.New(health.Clock(c.Now))
	tasks := r.Workers("tasks", "task", 10*time.Second)
	code, rep := probe(t, r.LivenessHandler())
	if code != 200 || len(rep.Checks) != 1 || rep.Checks[0].Detail != "no task running" {
		t.Fatalf("no worker: %d %+v", code, rep)
	}
	t0, t3 := tasks.Add(0), tasks.Add(3)
	c.Add(time.Hour) // waiting for work since they were added
	if code, rep := probe(t, r.LivenessHandler()); code != 200 || rep.Checks[0].Detail != "2 task(s) running; the longest step in progress 0s (limit 10s)" {
		t.Fatalf("an hour waiting for work: %d %+v", code, rep)
	}
	t0.Busy()
	t3.Busy()
	c.Add(9 * time.Second)
	t3.Waiting()
	if code, rep := probe(t, r.LivenessHandler()); code != 200 || *rep.Checks[0].LastBeatSeconds != 9 {
		t.Fatalf("a step of 9s with a 10s limit: %d %+v", code, rep)
	}
	c.Add(2 * time.Second)
	code, rep = probe(t, r.LivenessHandler())
	if code != 503 || rep.Status != "stalled" || rep.Checks[0].Detail != "stalled: task 0 in one step for up to 11s (limit 10s)" {
		t.Fatalf("task 0 11s in one step: %d %+v", code, rep)
	}
	t3.Busy()
	c.Add(12 * time.Second)
	if _, rep := probe(t, r.LivenessHandler()); rep.Checks[0].Detail != "stalled: task 0, 3 in one step for up to 23s (limit 10s)" {
		t.Fatalf("both stalled: %+v", rep)
	}
	t0.Busy() // the step ended and the next began: progress
	t3.Done()
	code, rep = probe(t, r.LivenessHandler())
	if code != 200 || rep.Checks[0].Detail != "1 task(s) running; the longest step in progress 0s (limit 10s)" {
		t.Fatalf("after progress and a stop: %d %+v", code, rep)
	}
}

func TestNilIsANoOp(t *testing.T) {
	var r *health.Registry
	l := r.Loop("x", time.Second)
	c := r.Condition("y", "z")
	w := r.Workers("tasks", "task", time.Second).Add(1)
	w.Busy()
	w.Waiting()
	w.Done()
	l.Beat()
	l.Idle(time.Second)
	l.Stop()
	c.Set(true, "fine")
	if c.Met() {
		t.Fatal("a nil condition is never met")
	}
}

func TestHandlerMethods(t *testing.T) {
	r := health.New()
	r.Condition("group", "joined").Set(true, "joined")
	rec := httptest.NewRecorder()
	r.ReadinessHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodHead, "/readyz", nil))
	if rec.Code != 200 || rec.Body.Len() != 0 {
		t.Fatalf("HEAD: %d %q", rec.Code, rec.Body.String())
	}
	rec = httptest.NewRecorder()
	r.ReadinessHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/readyz", nil))
	if rec.Code != http.StatusMethodNotAllowed || rec.Header().Get("Allow") != "GET, HEAD" {
		t.Fatalf("POST: %d", rec.Code)
	}
}

func TestConcurrentUse(t *testing.T) {
	r := health.New()
	l := r.Loop("poll", time.Minute)
	c := r.Condition("group", "")
	tasks := r.Workers("tasks", "task", time.Minute)
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := tasks.Add(int32(i))
			defer w.Done()
			for range 200 {
				w.Busy()
				l.Beat()
				w.Waiting()
				c.Set(i%2 == 0, "x")
				_ = r.Liveness()
				_ = r.Readiness()
			}
		}()
	}
	wg.Wait()
}
