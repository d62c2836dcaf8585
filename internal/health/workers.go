package health

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Workers is the liveness of a changing set of workers that wait for work
// between steps, as a transformer's tasks do: a worker that has been in one
// step for longer than the limit is stalled; a worker waiting for work is
// not, however long it waits. All workers make one check, however many
// there are, and a worker leaves it when it stops.
type Workers struct {
	reg   *Registry
	name  string
	what  string // one worker, in details: "task"
	limit time.Duration

	mu      sync.Mutex
	workers map[*Worker]struct{}
}

// Workers registers the check of a set of workers, what naming one of them
// in its detail ("task"); each step must end within limit. A nil registry
// returns nil.
func (r *Registry) Workers(name, what string, limit time.Duration) *Workers {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stall > 0 {
		limit = r.stall
	}
	w := &Workers{reg: r, name: name, what: what, limit: limit, workers: map[*Worker]struct{}{}}
	r.workers = append(r.workers, w)
	return w
}

// Worker is the heartbeat of one worker. Its methods are cheap (an atomic
// store), since a worker calls them for every step.
type Worker struct {
	set  *Workers
	id   int32
	busy atomic.Int64 // Unix nanoseconds since the step began; 0 waiting
}

// Add adds worker id, waiting for work. A nil set returns nil.
func (w *Workers) Add(id int32) *Worker {
	if w == nil {
		return nil
	}
	k := &Worker{set: w, id: id}
	w.mu.Lock()
	w.workers[k] = struct{}{}
	w.mu.Unlock()
	return k
}

// Busy records that the worker begins a step: progress since the last.
func (k *Worker) Busy() {
	if k == nil {
		return
	}
	k.busy.Store(k.set.reg.now().UnixNano())
}

// Waiting records that the worker ended its step and waits for work.
func (k *Worker) Waiting() {
	if k == nil {
		return
	}
	k.busy.Store(0)
}

// Done removes the worker: it stopped.
func (k *Worker) Done() {
	if k == nil {
		return
	}
	k.set.mu.Lock()
	delete(k.set.workers, k)
	k.set.mu.Unlock()
}

func (w *Workers) check(now time.Time) Check {
	w.mu.Lock()
	defer w.mu.Unlock()
	var stalled []int32
	var longest time.Duration
	for k := range w.workers {
		since := k.busy.Load()
		if since == 0 {
			continue
		}
		in := now.Sub(time.Unix(0, since))
		longest = max(longest, in)
		if in > w.limit {
			stalled = append(stalled, k.id)
		}
	}
	c := Check{Name: w.name, OK: len(stalled) == 0, LastBeatSeconds: seconds(longest), LimitSeconds: seconds(w.limit)}
	switch {
	case len(stalled) > 0:
		slices.Sort(stalled)
		ids := make([]string, len(stalled))
		for i, id := range stalled {
			ids[i] = strconv.Itoa(int(id))
		}
		c.Detail = fmt.Sprintf("stalled: %s %s in one step for up to %s (limit %s)",
			w.what, strings.Join(ids, ", "), round(longest), round(w.limit))
	case len(w.workers) == 0:
		c.Detail = fmt.Sprintf("no %s running", w.what)
	default:
		c.Detail = fmt.Sprintf("%d %s(s) running; the longest step in progress %s (limit %s)",
			len(w.workers), w.what, round(longest), round(w.limit))
	}
	return c
}
