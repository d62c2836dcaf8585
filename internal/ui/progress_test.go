package ui

import (
	"strings"
	"testing"
	"time"
)

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

func newTTYProgress(t *testing.T, label string) (*Progress, *fakeClock, func() string) {
	t.Helper()
	s, _, _, errOut := Test()
	s.SetTTY(false, false, true)
	p := NewProgress(s, label)
	if p == nil {
		t.Fatal("no progress on a terminal")
	}
	clk := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	p.Now = clk.now
	return p, clk, errOut.String
}

func TestProgressSilentWithoutTerminal(t *testing.T) {
	s, _, out, errOut := Test()
	p := NewProgress(s, "reading")
	if p != nil {
		t.Fatal("a progress indicator without a terminal")
	}
	// A nil progress is usable.
	p.SetTotal(10)
	p.Add(5)
	p.Done()
	if errOut.Len() != 0 || out.Len() != 0 {
		t.Errorf("wrote %q / %q", out, errOut)
	}
}

func TestProgressDrawsRateLimited(t *testing.T) {
	p, clk, got := newTTYProgress(t, "reading t")
	p.SetTotal(1000)
	first := got()
	if !strings.Contains(first, "reading t [") || !strings.Contains(first, "0% 0/1,000") {
		t.Fatalf("first draw: %q", first)
	}
	// Many adds within the interval draw nothing new.
	for range 499 {
		p.Add(1)
	}
	if got() != first {
		t.Fatalf("redrew within the interval: %q", got())
	}
	clk.advance(2 * time.Second)
	p.Add(1)
	after := strings.TrimPrefix(got(), first)
	if !strings.HasPrefix(after, "\r") || !strings.Contains(after, " 50% 500/1,000") {
		t.Fatalf("second draw: %q", after)
	}
	if !strings.Contains(after, "############------------") {
		t.Errorf("bar not half full: %q", after)
	}
	if !strings.Contains(after, " 250/s") {
		t.Errorf("rate missing: %q", after)
	}
	if !strings.HasSuffix(after, "\x1b[K") {
		t.Errorf("line not cleared to its end: %q", after)
	}
	p.Done()
	if !strings.HasSuffix(got(), "\r\x1b[K") {
		t.Errorf("Done did not erase the line: %q", got())
	}
	n := len(got())
	p.Add(1)
	p.Done()
	if len(got()) != n {
		t.Error("drew after Done")
	}
}

func TestProgressWithoutTotalCounts(t *testing.T) {
	p, clk, got := newTTYProgress(t, "scan")
	p.Add(1234567)
	clk.advance(time.Second)
	p.Add(1)
	if !strings.Contains(got(), "scan 1,234,568") || strings.Contains(got(), " [") {
		t.Errorf("counter: %q", got())
	}
}
