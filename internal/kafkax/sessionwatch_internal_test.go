package kafkax

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/flecht-dev/flecht/internal/health"
	"github.com/flecht-dev/flecht/internal/logx/logxtest"
)

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time      { return c.t }
func (c *fakeClock) add(d time.Duration) { c.t = c.t.Add(d) }
func answer(w *SessionWatch, key kmsg.Key) {
	w.OnBrokerE2E(kgo.BrokerMetadata{}, int16(key), kgo.BrokerE2E{})
}
func fail(w *SessionWatch, key kmsg.Key) {
	w.OnBrokerE2E(kgo.BrokerMetadata{}, int16(key), kgo.BrokerE2E{ReadErr: errors.New("EOF")})
}
func written(w *SessionWatch, key kmsg.Key) {
	w.OnBrokerWrite(kgo.BrokerMetadata{}, int16(key), 100, 0, 0, nil)
}

// The session is gone once the group coordinator has not answered for the
// session timeout: readiness turns at once with why, the log says so at
// once, again every 15 s with the failed attempts so far (a growing
// count), and "Kafka is back" on the first answer. Answers of other
// requests (a fetch) are no contact with the coordinator.
func TestSessionWatchFollowsTheCoordinator(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1_000_000, 0)}
	w := newSessionWatch(10*time.Second, time.Minute, true, clk.now)
	var logs logxtest.Buffer
	reg := health.New()
	ready := reg.Condition("kafka", "starting")
	f := w.follower(logs.Logger(), ready, "the session in group app")

	answer(w, kmsg.Heartbeat)
	f.step()
	if !ready.Met() {
		t.Fatalf("not ready after an answer: %+v", reg.Readiness())
	}
	clk.add(9 * time.Second)
	answer(w, kmsg.Fetch) // a fetch answered: no word from the coordinator
	fail(w, kmsg.Heartbeat)
	f.step()
	if !ready.Met() {
		t.Fatal("not ready within the session timeout")
	}
	clk.add(1500 * time.Millisecond)
	fail(w, kmsg.Heartbeat)
	f.step()
	if ready.Met() {
		t.Fatal("still ready 10.5 s after the coordinator's last answer (session timeout 10 s)")
	}
	if d := reg.Readiness().Checks[0].Detail; !strings.Contains(d, "the session in group app is gone: no answer from the group coordinator for 11s (limit 10s), 2 failed attempt(s); last error: EOF") {
		t.Fatalf("detail %q", d)
	}
	if n := logs.Count("no answer from the group coordinator for 11s", "attempt=2", "error=EOF"); n != 1 {
		t.Fatalf("want the loss said once at once, got %d:\n%s", n, logs.String())
	}
	for range 3 { // 15 s more, a failure every 5 s: said again, once
		clk.add(5 * time.Second)
		w.OnGroupManageError(errors.New("dial tcp: connection refused"))
		f.step()
	}
	if n := logs.Count("still no answer from the group coordinator", "attempt=5", "since=26s"); n != 1 {
		t.Fatalf("want one repeat with the growing count:\n%s", logs.String())
	}
	if n := logs.Count("level=WARN"); n != 2 {
		t.Fatalf("want 2 warnings in 26 s (at once, then every 15 s), got %d:\n%s", n, logs.String())
	}
	clk.add(time.Second)
	answer(w, kmsg.JoinGroup)
	f.step()
	if !ready.Met() {
		t.Fatal("not ready after the coordinator answered again")
	}
	if n := logs.Count("Kafka is back: the group coordinator answers again (the session in group app)", "unreachable_for=26.5s", "failed_attempts=5"); n != 1 {
		t.Fatalf("want the recovery said once:\n%s", logs.String())
	}
	f.step()
	if n := logs.Count("Kafka is back"); n != 1 {
		t.Fatalf("the recovery said again with nothing lost:\n%s", logs.String())
	}
}

// A JoinGroup the coordinator holds (it waits for every member to
// rejoin) is contact up to the rebalance timeout; a client in no group
// counts any answer.
func TestSessionWatchJoinInFlightAndContact(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1_000_000, 0)}
	w := newSessionWatch(10*time.Second, 30*time.Second, true, clk.now)
	answer(w, kmsg.Heartbeat)
	written(w, kmsg.JoinGroup)
	clk.add(25 * time.Second)
	if s := w.State(); !s.OK {
		t.Fatalf("a join in flight for 25 s (rebalance timeout 30 s) is contact: %+v", s)
	}
	clk.add(10 * time.Second)
	if s := w.State(); s.OK {
		t.Fatalf("a join held past the rebalance timeout is not: %+v", s)
	}

	c := newSessionWatch(10*time.Second, 0, false, clk.now)
	clk.add(11 * time.Second)
	if c.State().OK {
		t.Fatal("no answer at all for 11 s, and OK")
	}
	answer(c, kmsg.Metadata)
	if !c.State().OK {
		t.Fatal("any answer is contact for a client in no group")
	}
}

// An outage shorter than the limit that still failed requests for a
// third of it ends with "Kafka is back" too (the runbook's check appears
// on every recovery); a single failed request among answers does not.
func TestSessionWatchSaysAShortOutageEnded(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1_000_000, 0)}
	w := newSessionWatch(9*time.Second, time.Minute, false, clk.now)
	var logs logxtest.Buffer
	ready := health.New().Condition("kafka", "starting")
	f := w.follower(logs.Logger(), ready, "the bridge's connection to Kafka")
	answer(w, kmsg.Metadata)
	f.step()
	clk.add(time.Second)
	fail(w, kmsg.Metadata)
	f.step()
	answer(w, kmsg.Metadata) // a blip: one failure, answered a second later
	clk.add(time.Second)
	f.step()
	if n := logs.Count("Kafka is back"); n != 0 {
		t.Fatalf("a blip called a recovery:\n%s", logs.String())
	}
	for range 4 { // 4 s of failures: short of the 9 s limit, past a third of it
		clk.add(time.Second)
		fail(w, kmsg.Metadata)
		f.step()
	}
	if !ready.Met() {
		t.Fatal("not ready within the limit")
	}
	answer(w, kmsg.Metadata)
	f.step()
	if n := logs.Count("Kafka is back: Kafka answers again (the bridge's connection to Kafka)", "unreachable_for=5s", "failed_attempts=4"); n != 1 {
		t.Fatalf("want the short outage's end said once:\n%s", logs.String())
	}
}
