package devenv

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
)

// logGate sits between the brokers and Options.Logger. Both brokers log
// routine events (requests, hooks, listeners) at Info, report every
// connection they cut at shutdown as a Warn, and keep a goroutine or two
// running briefly after Close returns. The gate demotes the first to
// Debug, the second to Debug while Close runs, and drops the third, so a
// logger that must not be used after Close (such as one writing to t.Log)
// is safe.
type logGate struct {
	mu    sync.RWMutex // held for writing to close, for reading per record
	state atomic.Int32
}

const (
	gateOpen int32 = iota
	gateClosing
	gateClosed
)

func (g *logGate) closing() { g.state.Store(gateClosing) }

// closed waits for records being handled and drops all later ones.
func (g *logGate) closed() {
	g.mu.Lock()
	g.state.Store(gateClosed)
	g.mu.Unlock()
}

func (g *logGate) logger(h slog.Handler) *slog.Logger {
	return slog.New(gatedHandler{h: h, g: g})
}

func (g *logGate) level(l slog.Level) slog.Level {
	switch {
	case l >= slog.LevelError:
		return l
	case l >= slog.LevelWarn && g.state.Load() == gateOpen:
		return l
	case l >= slog.LevelInfo:
		return slog.LevelDebug
	}
	return l
}

type gatedHandler struct {
	h slog.Handler
	g *logGate
}

func (gh gatedHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return gh.g.state.Load() != gateClosed && gh.h.Enabled(ctx, gh.g.level(l))
}

func (gh gatedHandler) Handle(ctx context.Context, r slog.Record) error {
	gh.g.mu.RLock()
	defer gh.g.mu.RUnlock()
	if gh.g.state.Load() == gateClosed {
		return nil
	}
	r.Level = gh.g.level(r.Level)
	if !gh.h.Enabled(ctx, r.Level) {
		return nil // Enabled was asked with the level before demotion
	}
	return gh.h.Handle(ctx, r)
}

func (gh gatedHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return gatedHandler{h: gh.h.WithAttrs(as), g: gh.g}
}

func (gh gatedHandler) WithGroup(name string) slog.Handler {
	return gatedHandler{h: gh.h.WithGroup(name), g: gh.g}
}
