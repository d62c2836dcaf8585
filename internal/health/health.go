// Package health answers a running stage's liveness and readiness probes.
//
// Liveness asks whether the process's loops still make progress: each loop
// (a transformer's poll loop, an extractor's cycle loop, the MQTT bridge's
// relay loop and its connection supervisor) registers a Loop and beats it
// as it goes round; a loop that has not beaten for longer than its limit
// is stalled, and an orchestrator should restart the process. Workers that
// wait for work between steps (a transformer's tasks, which process and
// commit) share one Workers check: a step that outlasts the limit is a
// stall, a wait for work is not.
//
// Readiness asks whether the stage does its work: it joined its group and
// started (fenced and restored) every task or token it was assigned, or the
// bridge is connected and subscribed. Each such fact is a Condition the
// stage sets as it changes.
//
// Both are served as JSON that names every check and says why one fails,
// with 200 when all pass and 503 otherwise. Every method is safe for
// concurrent use, and every method of a nil *Loop, *Workers, *Worker or
// *Condition does nothing, so code that runs without probes needs no
// checks.
package health

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"time"
)

// Registry holds the checks of one stage.
type Registry struct {
	mu      sync.Mutex
	now     func() time.Time
	stall   time.Duration // when set, every loop's limit
	loops   []*Loop
	workers []*Workers
	conds   []*Condition
}

// Option changes a Registry.
type Option func(*Registry)

// StallLimit makes d the limit of every loop and worker set instead of its
// own: tests use it to see a stall within seconds.
func StallLimit(d time.Duration) Option { return func(r *Registry) { r.stall = d } }

// Clock replaces time.Now (tests).
func Clock(now func() time.Time) Option { return func(r *Registry) { r.now = now } }

// New returns an empty registry.
func New(opts ...Option) *Registry {
	r := &Registry{now: time.Now}
	for _, o := range opts {
		o(r)
	}
	return r
}

// Loop registers a loop that must beat at least every limit; its first
// limit counts from now, so startup must reach the loop in time. A nil
// registry returns a nil loop.
func (r *Registry) Loop(name string, limit time.Duration) *Loop {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stall > 0 {
		limit = r.stall
	}
	l := &Loop{reg: r, name: name, limit: limit, last: r.now()}
	r.loops = append(r.loops, l)
	return l
}

// Condition registers a readiness condition, not met until Set says so;
// detail says what it waits for. A nil registry returns a nil condition.
func (r *Registry) Condition(name, detail string) *Condition {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	c := &Condition{name: name, detail: detail}
	r.conds = append(r.conds, c)
	return c
}

// Loop is the heartbeat of one loop.
type Loop struct {
	reg   *Registry
	name  string
	limit time.Duration

	mu      sync.Mutex
	last    time.Time
	idle    time.Duration // a wait announced by Idle, on top of the limit
	stopped bool
}

// Beat records progress.
func (l *Loop) Beat() {
	if l == nil {
		return
	}
	now := l.reg.now()
	l.mu.Lock()
	l.last, l.idle = now, 0
	l.mu.Unlock()
}

// Idle records progress and that the loop now waits up to d on purpose (a
// poll interval) before it goes round again: the limit counts from the end
// of that wait.
func (l *Loop) Idle(d time.Duration) {
	if l == nil {
		return
	}
	now := l.reg.now()
	l.mu.Lock()
	l.last, l.idle = now, max(d, 0)
	l.mu.Unlock()
}

// Stop records that the loop ended; a process whose loop ended but which
// still runs is not alive.
func (l *Loop) Stop() {
	if l == nil {
		return
	}
	l.mu.Lock()
	l.stopped = true
	l.mu.Unlock()
}

func (l *Loop) check(now time.Time) Check {
	l.mu.Lock()
	defer l.mu.Unlock()
	ago := now.Sub(l.last)
	c := Check{Name: l.name, OK: true, LastBeatSeconds: seconds(ago), LimitSeconds: seconds(l.limit + l.idle)}
	switch {
	case l.stopped:
		c.OK, c.Detail = false, "the loop has ended"
	case ago > l.limit+l.idle:
		c.OK = false
		c.Detail = fmt.Sprintf("stalled: no progress for %s (limit %s)", round(ago), round(l.limit+l.idle))
	case l.idle > 0 && ago <= l.idle:
		c.Detail = fmt.Sprintf("waiting for its next round (%s of %s)", round(ago), round(l.idle))
	default:
		c.Detail = fmt.Sprintf("last progress %s ago (limit %s)", round(ago), round(l.limit+l.idle))
	}
	return c
}

// Condition is one fact readiness needs.
type Condition struct {
	name string

	mu     sync.Mutex
	ok     bool
	detail string
}

// Set records whether the condition holds and why (or why not).
func (c *Condition) Set(ok bool, detail string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.ok, c.detail = ok, detail
	c.mu.Unlock()
}

// Met reports whether the condition holds.
func (c *Condition) Met() bool {
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ok
}

func (c *Condition) check() Check {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Check{Name: c.name, OK: c.ok, Detail: c.detail}
}

// Check is one line of a probe's answer.
type Check struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
	// LastBeatSeconds and LimitSeconds are a loop's: how long ago it last
	// made progress, and how long it may go without.
	LastBeatSeconds *float64 `json:"last_beat_seconds,omitempty"`
	LimitSeconds    *float64 `json:"limit_seconds,omitempty"`
}

// Report is a probe's answer: /healthz says "alive" or "stalled",
// /readyz "ready" or "not_ready".
type Report struct {
	Status string  `json:"status"`
	OK     bool    `json:"ok"`
	Checks []Check `json:"checks"`
}

// Liveness reports every loop. With no loop registered (the stage has not
// started one yet) the process is alive.
func (r *Registry) Liveness() Report {
	r.mu.Lock()
	loops := append([]*Loop(nil), r.loops...)
	workers := append([]*Workers(nil), r.workers...)
	now := r.now()
	r.mu.Unlock()
	rep := Report{Status: "alive", OK: true, Checks: []Check{}}
	add := func(c Check) {
		rep.Checks = append(rep.Checks, c)
		if !c.OK {
			rep.Status, rep.OK = "stalled", false
		}
	}
	for _, l := range loops {
		add(l.check(now))
	}
	for _, w := range workers {
		add(w.check(now))
	}
	sortChecks(rep.Checks)
	return rep
}

// Readiness reports every condition. With none registered the stage is not
// ready: nothing has said it does its work.
func (r *Registry) Readiness() Report {
	r.mu.Lock()
	conds := append([]*Condition(nil), r.conds...)
	r.mu.Unlock()
	rep := Report{Status: "ready", OK: len(conds) > 0, Checks: []Check{}}
	for _, c := range conds {
		ch := c.check()
		rep.Checks = append(rep.Checks, ch)
		rep.OK = rep.OK && ch.OK
	}
	if !rep.OK {
		rep.Status = "not_ready"
	}
	sortChecks(rep.Checks)
	return rep
}

// Paths of the probes on the metrics listener.
const (
	LivenessPath  = "/healthz"
	ReadinessPath = "/readyz"
)

// LivenessHandler serves Liveness: 200 alive, 503 stalled.
func (r *Registry) LivenessHandler() http.Handler { return serve(r.Liveness) }

// ReadinessHandler serves Readiness: 200 ready, 503 not ready.
func (r *Registry) ReadinessHandler() http.Handler { return serve(r.Readiness) }

func serve(report func() Report) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodGet && req.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		rep := report()
		body, err := json.Marshal(rep)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		code := http.StatusOK
		if !rep.OK {
			code = http.StatusServiceUnavailable
		}
		w.WriteHeader(code)
		if req.Method == http.MethodGet {
			_, _ = w.Write(append(body, '\n'))
		}
	})
}

func sortChecks(cs []Check) {
	sort.SliceStable(cs, func(i, j int) bool { return cs[i].Name < cs[j].Name })
}

func seconds(d time.Duration) *float64 {
	s := float64(d.Round(time.Millisecond)) / float64(time.Second)
	return &s
}

func round(d time.Duration) time.Duration {
	if d >= time.Second {
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Millisecond)
}
