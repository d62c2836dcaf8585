//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"math"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"
	"github.com/twmb/franz-go/pkg/kgo"
)

// budgetProbe is the part of `flecht budget probe -o json` the tests read.
type budgetProbe struct {
	Published      int    `json:"published"`
	Received       int    `json:"received"`
	QueueLimit     *int   `json:"queue_limit"`
	Keeps          string `json:"keeps"`
	LostCount      int    `json:"lost_count"`
	Kept           []struct{ First, Last int }
	Lost           []struct{ First, Last int }
	ClientID       string `json:"client_id"`
	SessionPresent bool   `json:"session_present"`
	SessionRemoved bool   `json:"session_removed"`
}

// sessionPresent connects as clientID without clean start and reports
// whether the broker still held a session for it. It asks for no expiry,
// so whatever it finds ends when it disconnects.
func sessionPresent(t *testing.T, ctx context.Context, addr, clientID string) bool {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c := paho.NewClient(paho.ClientConfig{ClientID: clientID, Conn: conn})
	ca, err := c.Connect(ctx, &paho.Connect{ClientID: clientID, KeepAlive: 30, CleanStart: false})
	if err != nil {
		t.Fatal(err)
	}
	_ = c.Disconnect(&paho.Disconnect{})
	return ca.SessionPresent
}

// Against Mosquitto with max_queued_messages 100, the probe finds exactly
// 100 and that Mosquitto keeps the oldest; --mosquitto-conf reads the same
// file to the same number.
func TestBudgetProbeMosquitto(t *testing.T) {
	ctx := testCtx(t, 2*time.Minute)
	// The base config sets 100000; the appended line comes later and wins.
	m := startMosquitto(t, "max_queued_messages 100")

	out, stderr, code := runFlecht(t, "", "budget", "probe", "--mqtt", "mqtt://"+m.Addr, "--count", "500", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	p := decodeJSON[budgetProbe](t, out)
	// The probe's session is offline while it publishes, and Mosquitto
	// counts nothing in flight for an offline client (the in-flight
	// allowance applies only to connected ones), so exactly
	// max_queued_messages are kept.
	if p.QueueLimit == nil || *p.QueueLimit != 100 || p.Received != 100 || p.Published != 500 {
		t.Fatalf("queue limit: %s", out)
	}
	if p.Keeps != "oldest" || len(p.Kept) != 1 || p.Kept[0].First != 0 || p.Kept[0].Last != 99 || p.LostCount != 400 {
		t.Errorf("Mosquitto keeps the oldest and drops the newest: %s", out)
	}
	if !p.SessionPresent || !p.SessionRemoved {
		t.Errorf("session: %s", out)
	}
	time.Sleep(300 * time.Millisecond)
	if sessionPresent(t, ctx, m.Addr, p.ClientID) {
		t.Errorf("the probe left session %s behind", p.ClientID)
	}

	out, stderr, code = runFlecht(t, "", "budget", "--mosquitto-conf", m.Conf, "--rate", "1/s", "--session-expiry", "1h", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	b := decodeJSON[map[string]any](t, out)
	if b["queue_limit"] != 100.0 || b["queue_limit_source"] != "mosquitto-conf" || b["inflight_window"] != 20.0 || b["budget_s"] != 100.0 || b["binding"] != "queue" {
		t.Errorf("--mosquitto-conf: %s", out)
	}
	if b["advice"] != "the queue fills in 1m40s; raise the broker's queue to 3,600 or accept a 1m40s budget" {
		t.Errorf("advice %v", b["advice"])
	}

	// Below the limit nothing is lost and no limit is claimed.
	out, _, code = runFlecht(t, "", "budget", "probe", "--mqtt", "mqtt://"+m.Addr, "--count", "50", "-o", "json")
	if p := decodeJSON[budgetProbe](t, out); code != 0 || p.QueueLimit != nil || p.Received != 50 {
		t.Errorf("below the limit nothing is lost: %s", out)
	}
}

// A queue limited by bytes, probed with realistic messages: Mosquitto
// admits a message while the queued bytes are below max_queued_bytes, so
// 2000 bytes hold two 1 KiB messages, and --mosquitto-conf with
// --message-size counts the same.
func TestBudgetProbeMosquittoBytes(t *testing.T) {
	m := startMosquitto(t, "max_queued_bytes 2000")
	out, stderr, code := runFlecht(t, "", "budget", "probe", "--mqtt", "mqtt://"+m.Addr, "--count", "20", "--payload-size", "1KiB", "--quiet", "1s", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	p := decodeJSON[budgetProbe](t, out)
	if p.QueueLimit == nil || *p.QueueLimit != 2 || p.Keeps != "oldest" {
		t.Errorf("max_queued_bytes 2000 with 1 KiB messages: %s", out)
	}
	out, stderr, code = runFlecht(t, "", "budget", "--mosquitto-conf", m.Conf, "--message-size", "1KiB", "--rate", "1/s", "--session-expiry", "1h", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if b := decodeJSON[map[string]any](t, out); b["queue_limit"] != 2.0 || b["queue_limit_source"] != "max_queued_bytes / message size" {
		t.Errorf("--mosquitto-conf: %s", out)
	}
}

// While the bridge is connected but not acknowledging (ACK after commit,
// commit slow), Mosquitto holds max_inflight_messages in flight plus
// max_queued_messages queued: the online queue is the same per-session
// queue the outage budget is about, on top of the window.
func TestMosquittoOnlineQueueIsWindowPlusLimit(t *testing.T) {
	ctx := testCtx(t, time.Minute)
	m := startMosquitto(t, "max_queued_messages 100", "max_inflight_messages 20")
	const id = "e2e-online-window"

	var mu sync.Mutex
	held := map[int]bool{}
	conn, err := net.Dial("tcp", m.Addr)
	if err != nil {
		t.Fatal(err)
	}
	slow := paho.NewClient(paho.ClientConfig{
		ClientID: id, Conn: conn, EnableManualAcknowledgment: true,
		OnPublishReceived: []func(paho.PublishReceived) (bool, error){func(pr paho.PublishReceived) (bool, error) {
			n, _ := strconv.Atoi(string(pr.Packet.Payload))
			mu.Lock()
			held[n] = true
			mu.Unlock()
			return true, nil // never acknowledged
		}},
	})
	expiry := uint32(300)
	if _, err := slow.Connect(ctx, &paho.Connect{ClientID: id, KeepAlive: 30, CleanStart: true, Properties: &paho.ConnectProperties{SessionExpiryInterval: &expiry}}); err != nil {
		t.Fatal(err)
	}
	if _, err := slow.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: "e2e/online", QoS: 1}}}); err != nil {
		t.Fatal(err)
	}
	pub := mqttConnect(t, ctx, m.Addr, "e2e-online-pub", true, nil)
	for i := range 300 {
		if _, err := pub.Publish(ctx, &paho.Publish{Topic: "e2e/online", QoS: 1, Payload: []byte(strconv.Itoa(i))}); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(500 * time.Millisecond)
	mu.Lock()
	inflight := len(held)
	mu.Unlock()
	if inflight != 20 {
		t.Errorf("%d messages in flight unacknowledged, want the window of 20", inflight)
	}
	_ = slow.Disconnect(&paho.Disconnect{})

	// Resume: the un-acked window comes again, then the queue.
	got := make(chan int, 1000)
	mqttConnect(t, ctx, m.Addr, id, false, func(p *paho.Publish) {
		n, _ := strconv.Atoi(string(p.Payload))
		got <- n
	})
	seen := map[int]bool{}
	quiet := time.NewTimer(2 * time.Second)
	for done := false; !done; {
		select {
		case n := <-got:
			seen[n] = true
			quiet.Reset(2 * time.Second)
		case <-quiet.C:
			done = true
		}
	}
	if len(seen) != 120 || !seen[0] || !seen[119] || seen[120] {
		t.Errorf("kept %d messages (0 %v, 119 %v, 120 %v); want 0-119: the window of 20 plus the queue of 100", len(seen), seen[0], seen[119], seen[120])
	}
}

// --measure reads a topic written with a known rate pattern (timestamps
// set explicitly) and finds the burst as the peak, within 5%, reading
// only the records inside --since.
func TestBudgetMeasureKafka(t *testing.T) {
	ctx := testCtx(t, 2*time.Minute)
	topic := topicName(t, "raw")
	createTopic(t, topic, 3, map[string]string{"retention.ms": "-1"})
	cl := client(t, kgo.ProducerLinger(0))

	now := time.Now()
	var recs []*kgo.Record
	add := func(from time.Time, d time.Duration, rate int) {
		step := time.Second / time.Duration(rate)
		for ts := from; ts.Before(from.Add(d)); ts = ts.Add(step) {
			recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(fmt.Sprintf("device-%d", len(recs)%50)), Value: []byte(`{}`), Timestamp: ts})
		}
	}
	// Two days ago: outside --since 1d, never read.
	add(now.Add(-48*time.Hour), time.Minute, 10)
	old := len(recs)
	// Five minutes at 10/s with a one-minute burst at 200/s in the middle,
	// starting off any minute boundary.
	start := now.Add(-20*time.Minute + 7300*time.Millisecond)
	add(start, 2*time.Minute, 10)
	add(start.Add(2*time.Minute), time.Minute, 200)
	add(start.Add(3*time.Minute), 2*time.Minute, 10)
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	recent := len(recs) - old

	out, stderr, code := runFlecht(t, "", "budget", "--queue-limit", "10000", "--session-expiry", "24h", "--measure", topic, "--since", "1d", "--window", "1m", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	type measurement struct {
		Records     int64   `json:"records"`
		OffsetsRead int64   `json:"offsets_read"`
		PeakPerS    float64 `json:"peak_per_s"`
		MeanPerS    float64 `json:"mean_per_s"`
	}
	b := decodeJSON[struct {
		RatePerS    float64      `json:"rate_per_s"`
		RateSource  string       `json:"rate_source"`
		BudgetS     float64      `json:"budget_s"`
		Measurement *measurement `json:"measurement"`
	}](t, out)
	mm := b.Measurement
	if mm == nil {
		t.Fatalf("no measurement: %s", out)
	}
	t.Logf("measured peak %.2f/s, mean %.3f/s over %d records", mm.PeakPerS, mm.MeanPerS, mm.Records)
	if math.Abs(mm.PeakPerS-200)/200 > 0.05 || b.RatePerS != mm.PeakPerS || b.RateSource != "measured-peak" {
		t.Errorf("peak %v/s, want 200/s within 5%%: %s", mm.PeakPerS, out)
	}
	if mm.Records != int64(recent) || mm.OffsetsRead != int64(recent) {
		t.Errorf("counted %d and read %d offsets; want exactly the %d recent records (not the %d old ones)", mm.Records, mm.OffsetsRead, recent, old)
	}
	if want := 10000 / mm.PeakPerS; math.Abs(b.BudgetS-want) > 1e-6 {
		t.Errorf("budget %v, want %v", b.BudgetS, want)
	}
}
