package budget

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/flecht-dev/flecht/internal/devenv/devenvtest"
)

func seq(from, to int) []int {
	var out []int
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

func TestAnalyze(t *testing.T) {
	// Mosquitto: the oldest 100 of 500.
	r := Analyze(500, seq(0, 99))
	if r.Keeps != KeepsOldest || *r.QueueLimit != 100 || !r.LimitReached || r.LostCount != 400 ||
		FormatRanges(r.Kept) != "0-99" || FormatRanges(r.Lost) != "100-499" {
		t.Errorf("oldest: %+v", r)
	}
	if !strings.Contains(r.Summary, "kept the oldest 100 of 500 and dropped the newest") {
		t.Errorf("summary %q", r.Summary)
	}
	// EMQX: the newest 5 of 20, out of order and with a duplicate.
	r = Analyze(20, []int{17, 15, 16, 19, 18, 19})
	if r.Keeps != KeepsNewest || *r.QueueLimit != 5 || r.Duplicates != 1 || FormatRanges(r.Lost) != "0-14" {
		t.Errorf("newest: %+v", r)
	}
	// Gaps: neither end.
	r = Analyze(10, []int{0, 1, 5, 9})
	if r.Keeps != KeepsUnknown || *r.QueueLimit != 4 || FormatRanges(r.Lost) != "2-4, 6-8" || FormatRanges(r.Kept) != "0-1, 5, 9" {
		t.Errorf("gaps: %+v", r)
	}
	// Everything back: no limit found.
	r = Analyze(50, seq(0, 49))
	if r.QueueLimit != nil || r.LimitReached || r.Keeps != KeepsUnknown || len(r.Lost) != 0 ||
		r.Summary != "all 50 messages came back: the queue holds at least that many; probe again with a larger --count" {
		t.Errorf("all: %+v", r)
	}
	// Nothing back.
	r = Analyze(50, nil)
	if *r.QueueLimit != 0 || r.Keeps != KeepsUnknown || r.LostCount != 50 {
		t.Errorf("none: %+v", r)
	}
	// Numbers out of range are ignored.
	r = Analyze(3, []int{-1, 0, 3, 7})
	if r.Received != 1 {
		t.Errorf("out of range counted: %+v", r)
	}
}

// A padded probe message is exactly the size asked for and still says
// its number; below the number's own width it is the number alone.
func TestProbePayload(t *testing.T) {
	for _, tc := range []struct{ i, size, want int }{{0, 0, 1}, {1999, 0, 4}, {7, 1024, 1024}, {1999, 5, 5}, {1999, 4, 4}, {12345, 3, 5}} {
		p := probePayload(tc.i, tc.size)
		if len(p) != tc.want {
			t.Errorf("payload %d of size %d: %d bytes, want %d", tc.i, tc.size, len(p), tc.want)
		}
		if n, ok := probeNumber(p); !ok || n != tc.i {
			t.Errorf("payload %q reads as %d, %v", p, n, ok)
		}
	}
	if _, ok := probeNumber([]byte("x 1")); ok {
		t.Error("a foreign payload read as a number")
	}
}

func TestParseMQTTURL(t *testing.T) {
	for in, want := range map[string]struct {
		addr string
		tls  bool
	}{
		"mqtt://127.0.0.1":         {"127.0.0.1:1883", false},
		"tcp://127.0.0.1:1884":     {"127.0.0.1:1884", false},
		"mqtts://localhost":        {"localhost:8883", true},
		"ssl://[::1]:9999":         {"[::1]:9999", true},
		"mqtt://user@127.0.0.1:18": {"127.0.0.1:18", false},
	} {
		addr, tls, _, err := ParseMQTTURL(in)
		if err != nil || addr != want.addr || tls != want.tls {
			t.Errorf("%s: %s %v %v", in, addr, tls, err)
		}
	}
	for _, in := range []string{"127.0.0.1:1883", "ws://127.0.0.1", "", "mqtt://"} {
		if _, _, _, err := ParseMQTTURL(in); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
}

// The probe against the embedded broker: everything comes back (its queue
// is far larger than the count), and the session is gone afterwards.
func TestProbeEmbeddedBroker(t *testing.T) {
	env := devenvtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var steps []string
	r, err := Probe(ctx, ProbeOptions{URL: "mqtt://" + env.MQTTAddr(), Count: 200, QoS: 1, Quiet: 3 * time.Second, Settle: time.Second, Step: func(s string) { steps = append(steps, s) }})
	if err != nil {
		t.Fatal(err)
	}
	if r.Published != 200 || r.Received != 200 || r.LimitReached || r.QueueLimit != nil || !r.SessionPresent || !r.SessionRemoved {
		t.Errorf("%+v", r)
	}
	if !strings.HasPrefix(r.ClientID, "flecht-probe-") || !strings.HasPrefix(r.Topic, "flecht/probe/") || len(steps) != 3 {
		t.Errorf("id %q topic %q steps %q", r.ClientID, r.Topic, steps)
	}
	// The session was removed: resuming it finds nothing. (Give the broker
	// a moment to finish the probe's last disconnect: a connect racing it
	// would take the connection over instead.)
	time.Sleep(300 * time.Millisecond)
	conn, err := net.Dial("tcp", env.MQTTAddr())
	if err != nil {
		t.Fatal(err)
	}
	c := paho.NewClient(paho.ClientConfig{ClientID: r.ClientID, Conn: conn})
	ca, err := c.Connect(ctx, &paho.Connect{ClientID: r.ClientID, KeepAlive: 30, CleanStart: false})
	if err != nil {
		t.Fatal(err)
	}
	if ca.SessionPresent {
		t.Error("the probe left its session behind")
	}
	_ = c.Disconnect(&paho.Disconnect{})

	// Padded messages come back and are counted by their numbers.
	// The quiet time is the probe's only end signal: on a machine loaded by
	// the race detector and parallel packages, 500 ms between two messages
	// happened, and the last one was counted as dropped.
	r, err = Probe(ctx, ProbeOptions{URL: "mqtt://" + env.MQTTAddr(), Count: 50, QoS: 1, PayloadSize: 2048, Quiet: 3 * time.Second, Settle: time.Second})
	if err != nil || r.Received != 50 || r.PayloadSize != 2048 {
		t.Errorf("padded: %+v %v", r, err)
	}
}

func TestProbeErrors(t *testing.T) {
	ctx := context.Background()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	if _, err := Probe(ctx, ProbeOptions{URL: "mqtt://" + addr}); err == nil || !strings.Contains(err.Error(), "cannot reach the MQTT broker at "+addr) {
		t.Errorf("dead broker: %v", err)
	}
	if _, err := Probe(ctx, ProbeOptions{URL: "mqtt://" + addr, QoS: 3}); err == nil || !strings.Contains(err.Error(), "QoS 3") {
		t.Errorf("bad QoS: %v", err)
	}
	if _, err := Probe(ctx, ProbeOptions{URL: "http://x"}); err == nil || !strings.Contains(err.Error(), "not supported") {
		t.Errorf("bad scheme: %v", err)
	}
}
