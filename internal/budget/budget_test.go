package budget

import (
	"encoding/json"
	"math"
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
	r := Compute(Inputs{SessionExpiry: 24 * time.Hour, QueueLimit: 10000, Rate: 10, Replicas: 3})
	if r.Advice != "the queue fills in 16m40s; raise the broker's queue to 864,000 or accept a 16m40s budget" ||
		!strings.HasPrefix(r.ReplicaAdvice, "with 3 replicas the trade inverts: a replica that stays down keeps receiving its share into its own session until the session expires") ||
		!strings.HasSuffix(r.ReplicaAdvice, "so lower session_expiry well below the queue's fill time of 16m40s, or a dead replica's share overflows before it is handed over") {
		t.Errorf("advice %q / %q", r.Advice, r.ReplicaAdvice)
	}
	r = Compute(Inputs{SessionExpiry: 5 * time.Minute, QueueLimit: 10000, Rate: 10, Replicas: 2})
	if r.Binding != BindingSessionExpiry || !strings.Contains(r.ReplicaAdvice, "the session_expiry of 5m hands it over before the queue fills (16m40s)") {
		t.Errorf("advice %q", r.ReplicaAdvice)
	}
	r = Compute(Inputs{SessionExpiry: 24 * time.Hour, QueueLimit: 0, Rate: 10, Replicas: 2})
	if !strings.Contains(r.ReplicaAdvice, "a session_expiry of minutes rather than 24h") {
		t.Errorf("advice %q", r.ReplicaAdvice)
	}
	// One replica: no word about the inverted trade.
	if r := Compute(Inputs{SessionExpiry: time.Hour, QueueLimit: 10, Rate: 1, Replicas: 1}); r.ReplicaAdvice != "" {
		t.Errorf("advice %q", r.ReplicaAdvice)
	}
}

func TestBudgetOnlineCapacity(t *testing.T) {
	// 20 in flight at 125ms per ack: 160/s. A 200/s peak overflows a
	// 10,000-message queue while connected after 10000/40 = 250s.
	r := Compute(Inputs{SessionExpiry: 24 * time.Hour, QueueLimit: 10000, Rate: 200, Inflight: 20, AckLatency: 125 * time.Millisecond, MeanRate: 170})
	if r.OnlineCapacityPerS == nil || math.Abs(*r.OnlineCapacityPerS-160) > 1e-9 {
		t.Fatalf("capacity %v", r.OnlineCapacityPerS)
	}
	if len(r.Warnings) != 1 {
		t.Fatalf("warnings %q", r.Warnings)
	}
	w := r.Warnings[0]
	for _, want := range []string{
		"the rate 200/s exceeds the online capacity of 160/s (20 in flight / 125ms per ack)",
		"the queue grows by 40/s while the bridge is connected and overflows after 4m10s",
		"data is lost without any outage",
		"raise the in-flight window (max_inflight_messages and the bridge's Receive Maximum) to 25 or cut the ack latency below 100ms",
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
	if len(r.Warnings) != 0 || r.DrainS == nil || math.Abs(*r.DrainS-10000.0/150) > 1e-9 {
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
