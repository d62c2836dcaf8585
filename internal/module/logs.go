package module

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// Log limits of one instance: a burst, then a steady rate; what goes over
// is counted, and the next line that passes says how much was dropped. So
// that a count is never lost when no line follows, a report of it is due
// as soon as the rate allows one more line (droppedLines), and at once
// when the instance fails or closes (logWriter.flush).
const (
	logBurst   = 50
	logPerSec  = 10
	maxLogLine = 2 << 10 // longer lines are cut
	wordsSize  = 1 << 10 // what is kept of standard error for an error message
)

// moduleLog is an instance's log: lines from the log host function and
// from standard output and error, rate-limited, into the stage's log with
// the module's name and the task's partition.
type moduleLog struct {
	log *slog.Logger
	now func() time.Time

	mu      sync.Mutex
	tokens  float64
	last    time.Time
	dropped int
	// reportDue is armed while lines are dropped and no line has said so
	// yet: it reports them when the rate allows.
	reportDue *time.Timer
	// firstWords is the start of what the module wrote to standard error
	// since the call began: a Go panic or a runtime's fatal error, which
	// says what went wrong in its first line, for the failure's message.
	firstWords []byte
}

func newModuleLog(log *slog.Logger) *moduleLog {
	return &moduleLog{log: log, now: time.Now, tokens: logBurst}
}

// line logs one line at level, if the rate allows.
func (l *moduleLog) line(level slog.Level, msg string) {
	if len(msg) > maxLogLine {
		msg = msg[:maxLogLine] + "…"
	}
	l.mu.Lock()
	l.refill()
	if l.tokens < 1 {
		l.dropped++
		if l.reportDue == nil {
			wait := time.Duration((1 - l.tokens) / logPerSec * float64(time.Second))
			l.reportDue = time.AfterFunc(wait, l.droppedLines)
		}
		l.mu.Unlock()
		return
	}
	l.tokens--
	dropped := l.dropped
	l.dropped = 0
	l.mu.Unlock()
	attrs := []slog.Attr{slog.String("line", msg)}
	if dropped > 0 {
		attrs = append(attrs, slog.Int("dropped_before", dropped))
	}
	l.log.LogAttrs(context.Background(), level, "module log", attrs...)
}

// refill adds the tokens the time since the last line earned; l.mu is
// held.
func (l *moduleLog) refill() {
	now := l.now()
	if !l.last.IsZero() {
		l.tokens = min(logBurst, l.tokens+now.Sub(l.last).Seconds()*logPerSec)
	}
	l.last = now
}

// droppedLines reports the lines dropped since the last line that passed,
// as a line of its own when the rate allows one, else when it next does.
func (l *moduleLog) droppedLines() {
	l.mu.Lock()
	l.reportDue = nil
	l.refill()
	dropped := l.dropped
	switch {
	case dropped == 0:
	case l.tokens < 1:
		wait := time.Duration((1 - l.tokens) / logPerSec * float64(time.Second))
		l.reportDue = time.AfterFunc(wait, l.droppedLines)
		dropped = 0
	default:
		l.tokens--
		l.dropped = 0
	}
	l.mu.Unlock()
	l.logDropped(dropped)
}

// flushDropped reports the lines dropped and not yet reported, whatever
// the rate: the instance failed or closes, and no line may follow.
func (l *moduleLog) flushDropped() {
	l.mu.Lock()
	if l.reportDue != nil {
		l.reportDue.Stop()
		l.reportDue = nil
	}
	dropped := l.dropped
	l.dropped = 0
	l.mu.Unlock()
	l.logDropped(dropped)
}

func (l *moduleLog) logDropped(n int) {
	if n > 0 {
		l.log.Warn("module log lines dropped", "dropped", n,
			"limit", fmt.Sprintf("a burst of %d lines, then %d a second", logBurst, logPerSec))
	}
}

// keep remembers the start of what the call wrote to standard error.
func (l *moduleLog) keep(b []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if room := wordsSize - len(l.firstWords); room > 0 {
		l.firstWords = append(l.firstWords, b[:min(room, len(b))]...)
	}
}

// callStarts forgets what an earlier call wrote to standard error.
func (l *moduleLog) callStarts() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.firstWords = l.firstWords[:0]
}

// words is the start of what the call wrote to standard error, trimmed,
// for an error message.
func (l *moduleLog) words() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.TrimSpace(string(l.firstWords))
}

// logWriter turns a standard stream into log lines.
type logWriter struct {
	log    *moduleLog
	level  slog.Level
	stderr bool
	buf    []byte
	halt   func() // ends an abandoned call
}

func (w *logWriter) Write(p []byte) (int, error) {
	if w.halt != nil {
		w.halt()
	}
	if w.stderr {
		w.log.keep(p)
	}
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		w.log.line(w.level, string(w.buf[:i]))
		w.buf = w.buf[i+1:]
	}
	if len(w.buf) > maxLogLine {
		w.log.line(w.level, string(w.buf))
		w.buf = w.buf[:0]
	}
	return len(p), nil
}

// flush logs a last line without its newline, and how many lines were
// dropped since the last that passed.
func (w *logWriter) flush() {
	if len(w.buf) > 0 {
		w.log.line(w.level, string(w.buf))
		w.buf = w.buf[:0]
	}
	w.log.flushDropped()
}
