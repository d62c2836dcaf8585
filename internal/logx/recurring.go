// Package logx holds logging helpers shared by the long-running stages.
package logx

import (
	"log/slog"
	"sync"
)

// Recurring logs problems that recur every cycle, such as a config that
// fails each time it is polled: once per subject and distinct error, again
// when the error changes, and once when the subject recovers. A log that
// repeats the same line every cycle buries everything else.
type Recurring struct {
	log  *slog.Logger
	mu   sync.Mutex
	last map[string]string // subject → text of the error last logged
}

// NewRecurring returns a Recurring that logs to log.
func NewRecurring(log *slog.Logger) *Recurring {
	return &Recurring{log: log, last: map[string]string{}}
}

// Failed logs err (at error level, after args) unless it is the error
// last logged for subject. It reports whether it logged.
func (r *Recurring) Failed(subject string, err error, msg string, args ...any) bool {
	text := err.Error()
	r.mu.Lock()
	prev, had := r.last[subject]
	r.last[subject] = text
	r.mu.Unlock()
	if had && prev == text {
		return false
	}
	r.log.Error(msg, append(args, "error", err)...)
	return true
}

// Recovered forgets subject's error; if it had one, it logs msg at info
// level so the operator sees the problem is gone.
func (r *Recurring) Recovered(subject string, msg string, args ...any) {
	r.mu.Lock()
	_, had := r.last[subject]
	delete(r.last, subject)
	r.mu.Unlock()
	if had {
		r.log.Info(msg, args...)
	}
}

// Retain silently forgets the subjects keep rejects (a config removed,
// suspended or now owned elsewhere), so their errors are logged afresh if
// they come back.
func (r *Recurring) Retain(keep func(subject string) bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for s := range r.last {
		if !keep(s) {
			delete(r.last, s)
		}
	}
}
