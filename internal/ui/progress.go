package ui

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/flecht-dev/flecht/internal/textfmt"
)

// Progress is a one-line progress indicator on standard error. It draws
// only when standard error is a terminal, so pipes, CI logs and -o json
// stay clean; elsewhere every method is a cheap no-op. Redraws are
// rate-limited, so Add may be called once per record. A nil *Progress is
// valid and does nothing.
//
//	p := ui.NewProgress(io, "reading sensors.raw")
//	p.SetTotal(n)
//	for ... { p.Add(1) }
//	p.Done()
type Progress struct {
	mu       sync.Mutex
	w        io.Writer
	label    string
	total    int64
	done     int64
	start    time.Time
	lastDraw time.Time
	drawn    bool
	finished bool

	// Interval is the least time between two redraws.
	Interval time.Duration
	// Now is the clock (tests replace it).
	Now func() time.Time
}

// DefaultProgressInterval is how often a progress line redraws at most.
const DefaultProgressInterval = 100 * time.Millisecond

const progressBarWidth = 24

// NewProgress returns a progress indicator labelled label, drawing on
// io.ErrOut when it is a terminal and doing nothing otherwise.
func NewProgress(io *IOStreams, label string) *Progress {
	if io == nil || !io.IsStderrTTY() {
		return nil
	}
	return &Progress{w: io.ErrOut, label: label, Interval: DefaultProgressInterval, Now: time.Now}
}

// SetTotal sets how many units the work has; 0 means unknown (a counter
// without a bar).
func (p *Progress) SetTotal(n int64) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.total = max(n, 0)
	p.maybeDraw(true)
}

// Add records n more units done.
func (p *Progress) Add(n int64) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done += n
	p.maybeDraw(false)
}

// Done erases the line, leaving standard error as it was. Later calls do
// nothing.
func (p *Progress) Done() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.finished {
		return
	}
	p.finished = true
	if p.drawn {
		fmt.Fprint(p.w, "\r\x1b[K")
	}
}

func (p *Progress) maybeDraw(force bool) {
	if p.finished {
		return
	}
	now := p.Now()
	if p.start.IsZero() {
		p.start = now
	}
	if !force && p.drawn && now.Sub(p.lastDraw) < p.Interval {
		return
	}
	p.lastDraw, p.drawn = now, true
	fmt.Fprint(p.w, "\r"+p.line(now)+"\x1b[K")
}

// line renders the current state: label, bar, percentage, counts, rate.
func (p *Progress) line(now time.Time) string {
	var b strings.Builder
	b.WriteString(p.label)
	if p.total > 0 {
		frac := min(float64(p.done)/float64(p.total), 1)
		full := int(frac * progressBarWidth)
		fmt.Fprintf(&b, " [%s%s] %3.0f%% %s/%s", strings.Repeat("#", full), strings.Repeat("-", progressBarWidth-full),
			frac*100, textfmt.GroupDigits(p.done), textfmt.GroupDigits(p.total))
	} else {
		fmt.Fprintf(&b, " %s", textfmt.GroupDigits(p.done))
	}
	if el := now.Sub(p.start); el >= time.Second {
		fmt.Fprintf(&b, " %s/s", textfmt.GroupDigits(int64(float64(p.done)/el.Seconds())))
	}
	return b.String()
}

// PhasedProgress is a progress bar per phase of a long job (reading, then
// writing): a new phase ends the bar of the one before.
type PhasedProgress struct {
	io    *IOStreams
	cur   *Progress
	phase string
}

// NewPhasedProgress shows the phases on io's standard error.
func NewPhasedProgress(io *IOStreams) *PhasedProgress { return &PhasedProgress{io: io} }

// Phase moves to phase (a bar of its own unless it is the current one)
// with total units of work.
func (p *PhasedProgress) Phase(phase string, total int64) {
	if p.phase != phase || p.cur == nil {
		p.cur.Done()
		p.phase, p.cur = phase, NewProgress(p.io, phase)
	}
	p.cur.SetTotal(total)
}

// Restart starts phase on a new bar even when it is the current one (a
// job that reads again).
func (p *PhasedProgress) Restart(phase string, total int64) {
	p.phase = ""
	p.Phase(phase, total)
}

// Add counts n units of the current phase's work done.
func (p *PhasedProgress) Add(n int64) { p.cur.Add(n) }

// Done ends the current bar.
func (p *PhasedProgress) Done() { p.cur.Done() }
