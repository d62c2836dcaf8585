package budget

import (
	"encoding/json"
	"math"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestBudgetQueueBinds(t *testing.T) {
	r := Compute(Inputs{SessionExpiry: 24 * time.Hour, SessionExpirySource: "flag", QueueLimit: 10000, QueueLimitSource: "flag", Rate: 10, RateSource: "flag"})
	if r.Binding != BindingQueue || r.BudgetS != 1000 || r.Budget() != 1000*time.Second {
		t.Fatalf("binding %s, budget %v", r.Binding, r.BudgetS)
	}
	want := "the queue fills in 16m40s; raise the broker's queue to 864,000 or accept a 16m40s budget"
	if r.Advice != want {
		t.Errorf("advice\n got %q\nwant %q", r.Advice, want)
	}
	if *r.QueueLimit != 10000 || *r.QueueFillS != 1000 || r.SessionExpiryS != 86400 || r.Replicas != 1 {
		t.Errorf("fields: %+v", r)
	}
	if len(r.Warnings) != 0 || r.OnlineCapacityPerS != nil {
		t.Errorf("unexpected warnings or capacity: %+v", r)
	}
}

func TestBudgetSessionExpiryBinds(t *testing.T) {
	r := Compute(Inputs{SessionExpiry: time.Hour, QueueLimit: 10000, Rate: 1})
	if r.Binding != BindingSessionExpiry || r.BudgetS != 3600 {
		t.Fatalf("binding %s, budget %v", r.Binding, r.BudgetS)
	}
	want := "the session expires after 1h, before the queue fills (2h46m40s): a session_expiry up to 2h46m40s would lengthen the budget"
	if r.Advice != want {
		t.Errorf("advice\n got %q\nwant %q", r.Advice, want)
	}
	// Exactly equal: the session expiry is named (the queue is just full).
	r = Compute(Inputs{SessionExpiry: 1000 * time.Second, QueueLimit: 10000, Rate: 10})
	if r.Binding != BindingSessionExpiry {
		t.Errorf("tie: binding %s", r.Binding)
	}
}

func TestBudgetNoTrafficAndUnlimitedQueue(t *testing.T) {
	r := Compute(Inputs{SessionExpiry: 24 * time.Hour, QueueLimit: 1000, Rate: 0})
	if r.Binding != BindingSessionExpiry || r.QueueFillS != nil || !strings.Contains(r.Advice, "at no traffic the queue never fills: the budget is the session expiry, 24h") {
		t.Errorf("no traffic: %+v", r)
	}
	r = Compute(Inputs{SessionExpiry: 24 * time.Hour, QueueLimit: 0, Rate: 1000})
	if r.Binding != BindingSessionExpiry || r.QueueLimit != nil || !strings.Contains(r.Advice, "unlimited") {
		t.Errorf("unlimited: %+v", r)
	}
	b, _ := json.Marshal(r)
	if !strings.Contains(string(b), `"queue_limit":null`) || !strings.Contains(string(b), `"queue_fill_s":null`) {
		t.Errorf("unlimited queue must be null in JSON: %s", b)
	}
}

func TestBudgetBytes(t *testing.T) {
	// 1 MiB of 512-byte messages is 2,048 messages: fewer than 10,000.
	r := Compute(Inputs{SessionExpiry: time.Hour, QueueLimit: 10000, QueueBytes: 1 << 20, MessageSize: 512, Rate: 10})
	if *r.QueueLimit != 2048 || r.QueueLimitSource != "max_queued_bytes / message size" || r.Binding != BindingQueue {
		t.Fatalf("%+v", r)
	}
	want := "the queue fills in 3m25s; raise the broker's queue to 36,000 and max_queued_bytes to 18,432,000 or accept a 3m25s budget"
	if r.Advice != want {
		t.Errorf("advice\n got %q\nwant %q", r.Advice, want)
	}
	// Only the bytes are short: only they are named.
	r = Compute(Inputs{SessionExpiry: time.Hour, QueueLimit: 0, QueueBytes: 1 << 20, MessageSize: 512, Rate: 10})
	if !strings.Contains(r.Advice, "raise max_queued_bytes to 18,432,000 or accept") {
		t.Errorf("advice %q", r.Advice)
	}
	// Without a message size the byte limit is only a warning.
	r = Compute(Inputs{SessionExpiry: time.Hour, QueueLimit: 1000, QueueBytes: 1 << 20, Rate: 1})
	if *r.QueueLimit != 1000 || len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "give --message-size") {
		t.Errorf("%+v", r)
	}
}

func TestBudgetReplicasInvertTheTrade(t *testing.T) {
	const head = "with 3 replicas the trade inverts: a replica that stays down keeps receiving its share (about 3.33/s) into its own session until the session expires; then the broker drops that backlog with the session and the survivors take the share over"
	// The expiry outlasts a share's fill time (10,000 at 10/s / 3 = 50m):
	// a longer one only overflows what survivors could take.
	r := Compute(Inputs{SessionExpiry: 24 * time.Hour, QueueLimit: 10000, Rate: 10, Replicas: 3})
	if r.Advice != "the queue fills in 16m40s; raise the broker's queue to 864,000 or accept a 16m40s budget" {
		t.Errorf("advice %q", r.Advice)
	}
	if want := head + ": at that share its session fills in 50m, and the session_expiry of 24h keeps it beyond that, overflowing messages the survivors could have taken; lower session_expiry to 50m or less"; r.ReplicaAdvice != want {
		t.Errorf("replica advice\n got %q\nwant %q", r.ReplicaAdvice, want)
	}

	// The expiry binds: the main advice no longer asks for a longer one,
	// which the replica advice would contradict.
	r = Compute(Inputs{SessionExpiry: 5 * time.Minute, QueueLimit: 10000, Rate: 10, Replicas: 3})
	if r.Binding != BindingSessionExpiry || r.Advice != "the session expires after 5m, before the queue fills (16m40s): the budget is the session expiry" {
		t.Errorf("advice %q", r.Advice)
	}
	if want := head + ": the session_expiry of 5m ends a dead replica's session before its queue overflows (it fills in 50m at that share), so a replica back within 5m loses nothing and one down for good loses at most 1,000 messages"; r.ReplicaAdvice != want {
		t.Errorf("replica advice\n got %q\nwant %q", r.ReplicaAdvice, want)
	}
	for _, text := range []string{r.Advice, r.ReplicaAdvice} {
		if strings.Contains(text, "would lengthen") || strings.Contains(text, "rather than") {
			t.Errorf("contradicting or odd advice: %q", text)
		}
	}

	// No fill time (an unlimited queue): the expiry is how long a dead
	// replica's share is held.
	r = Compute(Inputs{SessionExpiry: 5 * time.Minute, QueueLimit: 0, Rate: 10, Replicas: 2})
	if !strings.HasSuffix(r.ReplicaAdvice, "so a dead replica's share is held for the session_expiry of 5m and lost if it does not return: keep session_expiry as short as a restart needs") {
		t.Errorf("advice %q", r.ReplicaAdvice)
	}
	// One replica: no word about the inverted trade, and the longer
	// expiry is advised.
	r = Compute(Inputs{SessionExpiry: 5 * time.Minute, QueueLimit: 10000, Rate: 10, Replicas: 1})
	if r.ReplicaAdvice != "" || !strings.HasSuffix(r.Advice, "a session_expiry up to 16m40s would lengthen the budget") {
		t.Errorf("advice %q / %q", r.Advice, r.ReplicaAdvice)
	}
}

// Rates past what 64 bits count never print a negative or empty advice.
func TestBudgetHugeRates(t *testing.T) {
	r := Compute(Inputs{SessionExpiry: 24 * time.Hour, QueueLimit: 10000, Rate: 1e26})
	if r.Binding != BindingQueue {
		t.Fatalf("binding %s", r.Binding)
	}
	want := "the queue fills in 0s; lasting the whole session expiry (24h) would take 8.64e+30 messages, more than any broker can hold: accept a 0s budget"
	if r.Advice != want {
		t.Errorf("advice\n got %q\nwant %q", r.Advice, want)
	}
	// The messages fit in 64 bits, their bytes do not.
	r = Compute(Inputs{SessionExpiry: 24 * time.Hour, QueueLimit: 10000, QueueBytes: 1 << 30, MessageSize: 1_000_000, Rate: 1e9})
	if !strings.Contains(r.Advice, "would take 86,400,000,000,000 messages (8.64e+19 bytes), more than any broker can hold") {
		t.Errorf("advice %q", r.Advice)
	}
	for _, text := range append([]string{r.Advice}, r.Warnings...) {
		if strings.Contains(text, "raise  ") || strings.Contains(text, "-9,") {
			t.Errorf("overflowed: %q", text)
		}
	}
	// Far above the online capacity: no in-flight window MQTT allows
	// carries it.
	r = Compute(Inputs{SessionExpiry: time.Hour, QueueLimit: 1000, Rate: 1e26, Inflight: 20, AckLatency: 100 * time.Millisecond})
	if len(findingTexts(r)) != 1 || !strings.Contains(findingTexts(r)[0], "the in-flight window would need 1e+25, above MQTT's 65,535, and no ack latency is short enough: the rate is beyond one bridge") ||
		!strings.Contains(findingTexts(r)[0], "the rate 1e+26/s exceeds") {
		t.Errorf("warnings %q", findingTexts(r))
	}
	r = Compute(Inputs{SessionExpiry: time.Hour, QueueLimit: 1000, Rate: 1e6, Inflight: 20, AckLatency: 100 * time.Millisecond})
	if len(findingTexts(r)) != 1 || !strings.Contains(findingTexts(r)[0], "the in-flight window would need 100,000, above MQTT's 65,535: cut the ack latency below 66ms at a window of 65,535") {
		t.Errorf("warnings %q", findingTexts(r))
	}
}

// Mosquitto admits a message while the queued bytes are below the limit,
// so the last one may cross it: 2000 bytes hold two 1024-byte messages.
func TestBudgetBytesRoundUp(t *testing.T) {
	r := Compute(Inputs{SessionExpiry: time.Hour, QueueLimit: 1000, QueueBytes: 2000, MessageSize: 1024, Rate: 1})
	if *r.QueueLimit != 2 || r.BudgetS != 2 {
		t.Errorf("queue %d, budget %v; want 2 messages", *r.QueueLimit, r.BudgetS)
	}
	r = Compute(Inputs{SessionExpiry: time.Hour, QueueBytes: 100, MessageSize: 1024, Rate: 1})
	if *r.QueueLimit != 1 {
		t.Errorf("queue %d; a byte limit below one message still admits one", *r.QueueLimit)
	}
}

func TestBudgetOnlineCapacity(t *testing.T) {
	// 20 in flight at 125ms per ack: 160/s. A 200/s peak overflows a
	// 10,000-message queue while connected if it lasts 10000/40 = 250s.
	r := Compute(Inputs{SessionExpiry: 24 * time.Hour, QueueLimit: 10000, Rate: 200, Inflight: 20, AckLatency: 125 * time.Millisecond, MeanRate: 170})
	if r.OnlineCapacityPerS == nil || math.Abs(*r.OnlineCapacityPerS-160) > 1e-9 {
		t.Fatalf("capacity %v", r.OnlineCapacityPerS)
	}
	if len(findingTexts(r)) != 1 {
		t.Fatalf("warnings %q", findingTexts(r))
	}
	w := findingTexts(r)[0]
	for _, want := range []string{
		"the rate 200/s exceeds the online capacity of 160/s (20 in flight / 125ms per ack)",
		"while the bridge is connected the queue grows by 40/s and overflows, losing data without any outage, if that lasts more than 4m10s",
		"raise the in-flight window (the stage's receive_maximum, or max_inflight_messages when it sets none) to 25 or cut the ack latency below 100ms",
		"even the mean rate 170/s is above it",
	} {
		if !strings.Contains(w, want) {
			t.Errorf("warning lacks %q:\n%s", want, w)
		}
	}
	if r.DrainS != nil {
		t.Errorf("no drain time when the queue never drains: %v", *r.DrainS)
	}

	// Below capacity: no warning, and a full queue drains in 10000/150.
	r = Compute(Inputs{SessionExpiry: 24 * time.Hour, QueueLimit: 10000, Rate: 10, Inflight: 20, AckLatency: 125 * time.Millisecond})
	if len(r.Warnings)+len(r.Findings) != 0 || r.DrainS == nil || math.Abs(*r.DrainS-10000.0/150) > 1e-9 {
		t.Errorf("%+v", r)
	}
	// Unknown latency: no capacity.
	if r := Compute(Inputs{SessionExpiry: time.Hour, QueueLimit: 10, Rate: 1, Inflight: 20}); r.OnlineCapacityPerS != nil || *r.InflightWindow != 20 {
		t.Errorf("%+v", r)
	}
	// No broker limit: said so.
	if r := Compute(Inputs{SessionExpiry: time.Hour, QueueLimit: 10, Rate: 1, InflightUnlimited: true, AckLatency: time.Second}); r.OnlineCapacityPerS != nil || len(r.Warnings) != 1 {
		t.Errorf("%+v", r)
	}
}

// A peak above the online capacity loses data only if it lasts long
// enough to fill the queue; with measured arrivals the report says
// whether they did.
func TestBudgetLossOnlyIfSustained(t *testing.T) {
	in := Inputs{SessionExpiry: time.Hour, QueueLimit: 10000, Rate: 200, Inflight: 20, AckLatency: 125 * time.Millisecond}
	r := Compute(in)
	if len(findingTexts(r)) != 1 || strings.Contains(findingTexts(r)[0], "so data is lost without any outage") ||
		!strings.Contains(findingTexts(r)[0], "overflows, losing data without any outage, if that lasts more than 4m10s") {
		t.Errorf("warnings %q", findingTexts(r))
	}
	// Unlimited queue: nothing overflows, only memory bounds it.
	in.QueueLimit = 0
	if r := Compute(in); len(findingTexts(r)) != 1 || strings.Contains(findingTexts(r)[0], "losing data") || !strings.Contains(findingTexts(r)[0], "bounded only by the broker's memory") {
		t.Errorf("warnings %q", findingTexts(r))
	}

	// A one-minute burst at 200/s against 160/s builds 2,400: it fits.
	from := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	c, err := NewRateCounter(from, from.Add(time.Hour), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for _, ts := range pattern(from.Add(10*time.Minute), time.Minute, 200) {
		c.Add(ts)
	}
	m := &Measurement{counter: c}
	in.QueueLimit, in.Backlog = 10000, m.Backlog
	r = Compute(in)
	if r.MeasuredBacklog == nil || math.Abs(*r.MeasuredBacklog-2400) > 5 || !strings.Contains(findingTexts(r)[0], "replaying the measured arrivals at 160/s, the backlog peaks at 2,400 messages around 2025-01-01T00:10:59Z, within the queue of 10,000: the measured bursts fit") {
		t.Errorf("backlog %v, warnings %q", r.MeasuredBacklog, findingTexts(r))
	}
	// Ten minutes of it builds 24,000: more than the queue.
	for _, ts := range pattern(from.Add(20*time.Minute), 10*time.Minute, 200) {
		c.Add(ts)
	}
	r = Compute(in)
	if !strings.Contains(findingTexts(r)[0], "the backlog peaks at 24,000 messages around 2025-01-01T00:29:59Z, more than the queue of 10,000: at that capacity data was lost while connected") {
		t.Errorf("warnings %q", findingTexts(r))
	}
	// No counted data: nothing claimed.
	in.Backlog = (&Measurement{}).Backlog
	if r := Compute(in); r.MeasuredBacklog != nil || strings.Contains(findingTexts(r)[0], "replaying") {
		t.Errorf("warnings %q", findingTexts(r))
	}
}

func TestBudgetJSONFields(t *testing.T) {
	r := Compute(Inputs{SessionExpiry: 24 * time.Hour, QueueLimit: 10000, Rate: 10, RateSource: "flag", Inflight: 20, AckLatency: 50 * time.Millisecond})
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	for _, k := range []string{"session_expiry_s", "queue_limit", "rate_per_s", "rate_source", "budget_s", "binding", "online_capacity_per_s", "advice", "warnings"} {
		if _, ok := m[k]; !ok {
			t.Errorf("JSON lacks %q: %s", k, b)
		}
	}
	if m["binding"] != "queue" || m["online_capacity_per_s"].(float64) != 400 {
		t.Errorf("%s", b)
	}
}

var negative = regexp.MustCompile(`(^|\s)-[0-9]`)

// Whatever the inputs the flags allow, the advice never prints a
// negative or overflowed count, nor an empty "raise".
func FuzzCompute(f *testing.F) {
	f.Add(10.0, int64(10000), int64(0), int64(0), uint32(86400), uint8(1), uint16(20), int64(125e6))
	f.Add(1e26, int64(10000), int64(1<<30), int64(1e6), uint32(86400), uint8(3), uint16(20), int64(1e8))
	f.Add(1e9, int64(math.MaxInt64), int64(math.MaxInt64), int64(1), uint32(math.MaxUint32), uint8(2), uint16(65535), int64(1))
	f.Fuzz(func(t *testing.T, rate float64, queue, qbytes, size int64, expiryS uint32, replicas uint8, inflight uint16, latency int64) {
		if rate < 0 || math.IsNaN(rate) || math.IsInf(rate, 0) || queue < 0 || qbytes < 0 || size < 0 || expiryS == 0 || latency < 0 {
			return // the flags refuse these
		}
		r := Compute(Inputs{SessionExpiry: time.Duration(expiryS) * time.Second, QueueLimit: queue, QueueBytes: qbytes, MessageSize: size,
			Rate: rate, Replicas: int(replicas), Inflight: int(inflight), AckLatency: time.Duration(latency)})
		for _, text := range append([]string{r.Advice, r.ReplicaAdvice}, r.Warnings...) {
			if strings.Contains(text, "raise  ") || strings.Contains(text, "raise or") || negative.MatchString(text) || strings.Contains(text, "NaN") {
				t.Fatalf("advice %q", text)
			}
		}
		if r.BudgetS < 0 || (r.QueueLimit != nil && *r.QueueLimit <= 0) {
			t.Fatalf("%+v", r)
		}
	})
}

// findingTexts are the messages of r's findings.
func findingTexts(r *Result) []string {
	out := make([]string, len(r.Findings))
	for i, f := range r.Findings {
		out[i] = f.Message
	}
	return out
}

// A target budget turns a shorter one into a finding that says what
// reaches it: the queue that lasts it at the rate, and a session expiry as
// long; a budget that meets it, or no target, is none.
func TestBudgetBelowMinimum(t *testing.T) {
	in := Inputs{SessionExpiry: 24 * time.Hour, QueueLimit: 1000, Rate: 200, MinBudget: 10 * time.Minute}
	r := Compute(in)
	if len(r.Findings) != 1 || r.Findings[0].Kind != FindBelowMinimum || r.MinBudgetS == nil || *r.MinBudgetS != 600 {
		t.Fatalf("findings %+v, min %v", r.Findings, r.MinBudgetS)
	}
	if want := "the outage budget is 5s, below the 10m asked for (--min-budget): raise the broker's queue (max_queued_messages) to 120,000"; r.Findings[0].Message != want {
		t.Errorf("finding %q, want %q", r.Findings[0].Message, want)
	}
	in.SessionExpiry = 5 * time.Minute
	in.QueueLimit = 0
	if r := Compute(in); len(r.Findings) != 1 || !strings.Contains(r.Findings[0].Message, "raise the session expiry (mqtt.session_expiry) to 10m") {
		t.Errorf("short session: %+v", r.Findings)
	}
	in.SessionExpiry, in.QueueLimit = time.Hour, 200_000
	if r := Compute(in); len(r.Findings) != 0 {
		t.Errorf("a budget above the target: %+v", r.Findings)
	}
	in.MinBudget = 0
	in.QueueLimit = 10
	if r := Compute(in); len(r.Findings) != 0 || r.MinBudgetS != nil {
		t.Errorf("no target: %+v", r.Findings)
	}
}
