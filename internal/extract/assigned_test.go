package extract_test

import (
	"testing"
	"time"

	"github.com/flecht-dev/flecht/internal/stagefile"
)

// An extractor starts the tokens it is assigned, and polls their configs,
// as soon as the assignment arrives, not a poll_interval later: at start,
// and when a second replica takes tokens over. A token the rebalance gives
// back to a replica that polled it less than an interval ago waits for the
// interval, as do the tokens a replica keeps.
func TestExtractorPollsAssignedTokensAtOnce(t *testing.T) {
	f := newEngineFixture(t, 4, map[string]int{"a": 1, "b": 1, "c": 1, "d": 1, "e": 1, "f": 1})
	f.st.PollInterval = stagefile.Duration(time.Hour)
	within := func(what string, d time.Duration, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(d)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within %v of a poll_interval of 1h:\n%s", what, d, f.logs.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	polled := func() int {
		n := 0
		for _, k := range []string{"a", "b", "c", "d", "e", "f"} {
			if f.pollsOf(k) > 0 {
				n++
			}
		}
		return n
	}
	all := func() int {
		n := 0
		for _, k := range []string{"a", "b", "c", "d", "e", "f"} {
			n += f.pollsOf(k)
		}
		return n
	}

	f.start("e0")
	within("the first replica polls every config after joining", 15*time.Second, func() bool { return polled() == 6 })
	first := all()

	b := f.start("e1")
	within("the second replica starts its tokens", 15*time.Second, func() bool { return f.logs.Count("token started") >= 4+2 })
	within("the second replica polls the configs of its tokens", 15*time.Second, func() bool { return all() > first })
	handedOver := all() - first
	if handedOver >= 6 {
		t.Errorf("the second replica's start polled %d configs: more than the tokens it took", handedOver)
	}

	b.stop(t)
	taken := all()
	started := f.logs.Count("token started")
	within("the first replica takes its tokens back", 20*time.Second, func() bool { return f.logs.Count("token started") >= started+2 })
	time.Sleep(500 * time.Millisecond)
	if got := all(); got != taken {
		t.Errorf("%d polls after the first replica took back tokens it polled a moment ago, want none before the interval", got-taken)
	}
}
