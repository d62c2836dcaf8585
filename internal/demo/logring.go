package demo

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/flecht-dev/flecht/internal/textfmt"
)

// logEntry is one log record kept for the live view.
type logEntry struct {
	Time  time.Time
	Level slog.Level
	Text  string // message and attributes, key=value
}

// logRing is a slog.Handler that keeps the last few records at or above
// a level, so the live view can show them instead of letting them tear
// the screen. Handlers derived with WithAttrs/WithGroup share the ring.
type logRing struct {
	shared *ringBuffer
	level  slog.Level
	prefix string // attributes added with WithAttrs, already formatted
	group  string
}

type ringBuffer struct {
	mu      sync.Mutex
	size    int
	entries []logEntry
}

func newLogRing(size int, level slog.Level) *logRing {
	return &logRing{shared: &ringBuffer{size: size}, level: level}
}

func (h *logRing) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level }

func (h *logRing) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	b.WriteString(h.prefix)
	r.Attrs(func(a slog.Attr) bool {
		writeAttr(&b, h.group, a)
		return true
	})
	e := logEntry{Time: r.Time, Level: r.Level, Text: b.String()}
	rb := h.shared
	rb.mu.Lock()
	defer rb.mu.Unlock()
	rb.entries = append(rb.entries, e)
	if len(rb.entries) > rb.size {
		rb.entries = append(rb.entries[:0], rb.entries[len(rb.entries)-rb.size:]...)
	}
	return nil
}

func (h *logRing) WithAttrs(attrs []slog.Attr) slog.Handler {
	var b strings.Builder
	b.WriteString(h.prefix)
	for _, a := range attrs {
		writeAttr(&b, h.group, a)
	}
	c := *h
	c.prefix = b.String()
	return &c
}

func (h *logRing) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	c := *h
	c.group = h.group + name + "."
	return &c
}

// Recent returns the kept records, oldest first.
func (h *logRing) Recent() []logEntry {
	rb := h.shared
	rb.mu.Lock()
	defer rb.mu.Unlock()
	return append([]logEntry(nil), rb.entries...)
}

func writeAttr(b *strings.Builder, group string, a slog.Attr) {
	a.Value = a.Value.Resolve()
	if a.Equal(slog.Attr{}) {
		return
	}
	if a.Value.Kind() == slog.KindGroup {
		g := group
		if a.Key != "" {
			g += a.Key + "."
		}
		for _, ga := range a.Value.Group() {
			writeAttr(b, g, ga)
		}
		return
	}
	v := a.Value.String()
	if strings.ContainsAny(v, " \t\"=") || v == "" || !textfmt.IsPrintable(v) {
		v = fmt.Sprintf("%q", v)
	}
	fmt.Fprintf(b, " %s%s=%s", group, a.Key, v)
}
