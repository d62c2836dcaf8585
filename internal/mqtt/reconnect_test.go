package mqtt_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/flecht-dev/flecht/internal/devenv"
	"github.com/flecht-dev/flecht/internal/metrics"
	"github.com/flecht-dev/flecht/internal/mqtt"
)

// relayedNumbers reads the raw topic and counts each payload's "n".
func (f *bridgeFixture) relayedNumbers(topic string) (map[int]int, int) {
	f.t.Helper()
	seen := map[int]int{}
	recs := f.read(topic)
	for _, r := range recs {
		var v struct{ Data struct{ N int } }
		if err := json.Unmarshal(r.Value, &v); err != nil {
			f.t.Fatalf("record %s: %v", r.Value, err)
		}
		seen[v.Data.N]++
	}
	return seen, len(recs)
}

// waitSubscribed publishes probes (n = -1) until one is relayed: the
// bridge's subscription is then in place at the broker.
func (f *bridgeFixture) waitSubscribed(pub *paho.Client, topic, raw string) {
	f.t.Helper()
	eventually(f.t, "the subscription", func() bool {
		publish(f.t, pub, topic, `{"n":-1}`)
		seen, _ := f.relayedNumbers(raw)
		return seen[-1] > 0
	})
}

// whereMessagesStand says, for a failed wait, where a message published to
// topic could be: what raw holds, what the bridge counted and logged, and
// what mochi holds for clientID and would route topic to.
func (f *bridgeFixture) whereMessagesStand(rb *runningBridge, clientID, topic, raw string) string {
	seen, n := f.relayedNumbers(raw)
	var b strings.Builder
	fmt.Fprintf(&b, "%s holds %d records %v; bridge: %v in, %v dropped;", raw, n, seen,
		metrics.Value(rb.obs.MQTTIn), metrics.Value(rb.obs.MQTTDropped))
	srv := f.env.MQTTServer()
	if cl, ok := srv.Clients.Get(clientID); ok {
		fmt.Fprintf(&b, " mochi: %s closed=%v, %d in flight, subscriptions %v;", clientID, cl.Closed(),
			cl.State.Inflight.Len(), slices.Sorted(maps.Keys(cl.State.Subscriptions.GetAll())))
	} else {
		fmt.Fprintf(&b, " mochi: no session %s;", clientID)
	}
	subs := srv.Topics.Subscribers(topic)
	fmt.Fprintf(&b, " %s routes to shared %v, plain %v\nthe bridge's log:\n%s", topic, subs.Shared, subs.Subscriptions, rb.logs.String())
	return b.String()
}

// waitQueued waits until mochi holds at least n messages for an offline
// session: it PUBACKs a publisher before it fans a message out, and a
// message still being fanned out when the session is taken over is lost —
// a mochi trait, not the bridge's (Mosquitto is the proof in e2e/).
func (f *bridgeFixture) waitQueued(clientID string, n int) {
	f.t.Helper()
	eventually(f.t, "mochi to queue the messages", func() bool {
		cl, ok := f.env.MQTTServer().Clients.Get(clientID)
		return ok && cl.State.Inflight.Len() >= n
	})
}

// startSensors configures "sensors" (sensors/+/events into sensors.raw,
// keyed by the payload's n), starts bridge-0 on the fixture's MQTT broker
// and waits until its subscription is in place.
func (f *bridgeFixture) startSensors() (*runningBridge, *paho.Client) {
	f.t.Helper()
	f.config("sensors", map[string]any{"topic": "sensors/+/events", "output_topic": "sensors.raw", "key": "{payload.n}"})
	rb := f.startBridgeWith("bridge-0", f.env.MQTTURL(), "", nil)
	pub := publisher(f.t, f.env.MQTTAddr())
	f.waitSubscribed(pub, "sensors/probe/events", "sensors.raw")
	return rb, pub
}

// queuedProbes counts the probes (n = -1) mochi holds for an offline
// session: published by waitSubscribed after the one that got through.
func (f *bridgeFixture) queuedProbes(clientID string) int {
	f.t.Helper()
	cl, ok := f.env.MQTTServer().Clients.Get(clientID)
	if !ok {
		f.t.Fatalf("no session for %s at the broker", clientID)
	}
	n := 0
	for _, p := range cl.State.Inflight.GetAll(false) {
		if string(p.Payload) == `{"n":-1}` {
			n++
		}
	}
	return n
}

func namedPublisher(t *testing.T, addr, id string) *paho.Client {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c := paho.NewClient(paho.ClientConfig{ClientID: id, Conn: conn})
	if _, err := c.Connect(context.Background(), &paho.Connect{ClientID: id, KeepAlive: 30, CleanStart: true}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Disconnect(&paho.Disconnect{}) })
	return c
}

// A batch commits, then the connection drops before its ACKs are out: the
// broker resends those messages (DUP, same packet IDs) on the resumed
// session, and the bridge ACKs them without writing them a second time.
//
// The messages are queued while the bridge is away, so that nothing is
// published while mochi hands the session from the dropped connection to
// the new one: mochi 2.7 can lose a message published during that takeover
// (Mosquitto, single-threaded, cannot; the e2e tier kills and restarts
// against it while publishing).
func TestBridgeCommittedButUnackedIsNotWrittenTwice(t *testing.T) {
	t.Run("ack fails", func(t *testing.T) { testCommittedRedelivery(t, mqtt.OnCommit) })
	// paho accepted the ACKs but its timer had not written them yet.
	t.Run("ack accepted, not written", func(t *testing.T) { testCommittedRedelivery(t, mqtt.OnAcked) })
}

func testCommittedRedelivery(t *testing.T, hook func(*mqtt.Bridge, func())) {
	f := newBridgeFixture(t)
	first, pub := f.startSensors()
	if err := first.stop(); err != nil {
		t.Fatal(err)
	}

	const n = 300
	for i := range n {
		publish(t, pub, fmt.Sprintf("sensors/dev-%d/events", i%7), fmt.Sprintf(`{"n":%d}`, i))
	}
	f.waitQueued("bridge-0", n)
	var drops atomic.Int32
	rb := f.startBridgeWith("bridge-0", f.env.MQTTURL(), "", func(b *mqtt.Bridge) {
		hook(b, func() {
			if drops.Load() < 3 && mqtt.DropConnection(b) {
				drops.Add(1)
			}
		})
	})
	eventually(t, "every message relayed", func() bool {
		seen, _ := f.relayedNumbers("sensors.raw")
		for i := range n {
			if seen[i] == 0 {
				return false
			}
		}
		return true
	})
	// The dropped connections' committed messages come again (before
	// anything published later) and must be recognised. Publish only once
	// the last reconnect is through (mochi's takeover race, above).
	eventually(t, "the last reconnect", func() bool { return metrics.Value(rb.obs.MQTTConnects) == 4 })
	publish(t, pub, "sensors/dev-0/events", `{"n":-2}`)
	eventually(t, "the message after the reconnects", func() bool {
		seen, _ := f.relayedNumbers("sensors.raw")
		return seen[-2] == 1
	})
	seen, total := f.relayedNumbers("sensors.raw")
	for i := range n {
		if seen[i] != 1 {
			t.Errorf("message %d written %d times", i, seen[i])
		}
	}
	if mqtt.Redelivered(rb.b) == 0 {
		t.Error("no redelivery was recognised as committed")
	}
	if drops.Load() != 3 || metrics.Value(rb.obs.MQTTConnects) != 4 {
		t.Errorf("%d connections dropped, %v connects; want 3 and 4", drops.Load(), metrics.Value(rb.obs.MQTTConnects))
	}
	t.Logf("%d records for %d messages (+probes); %d redeliveries ACKed without a write", total, n, mqtt.Redelivered(rb.b))
}

// The MQTT broker goes away and comes back on the same port (mochi keeps no
// session across a restart): the bridge reconnects with backoff, sees the
// session is new, subscribes again, and messages flow on.
func TestBridgeReconnectsAfterMQTTBrokerRestart(t *testing.T) {
	f := newBridgeFixture(t) // its Kafka; the MQTT broker below restarts
	menv, err := devenv.Start(t.Context(), devenv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, portStr, _ := net.SplitHostPort(menv.MQTTAddr())
	port, _ := strconv.Atoi(portStr)
	var mu sync.Mutex
	current := menv
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		_ = current.Close()
	})

	f.config("sensors", map[string]any{"topic": "sensors/+/events", "output_topic": "sensors.raw", "key": "{payload.n}"})
	rb := f.startBridgeWith("bridge-0", menv.MQTTURL(), "", nil)
	pub := namedPublisher(t, menv.MQTTAddr(), "pub-1")
	f.waitSubscribed(pub, "sensors/probe/events", "sensors.raw")
	for i := range 100 {
		publish(t, pub, "sensors/a/events", fmt.Sprintf(`{"n":%d}`, i))
	}
	eventually(t, "the first 100", func() bool {
		seen, _ := f.relayedNumbers("sensors.raw")
		return len(seen) == 101
	})

	if err := menv.Close(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the disconnect noticed", func() bool { return metrics.Value(rb.obs.MQTTDisconnects) == 1 })
	second, err := devenv.Start(t.Context(), devenv.Options{MQTTPort: port})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	current = second
	mu.Unlock()
	eventually(t, "the reconnect", func() bool { return metrics.Value(rb.obs.MQTTConnects) == 2 })

	pub2 := namedPublisher(t, second.MQTTAddr(), "pub-2")
	// The broker lost the session: the bridge must subscribe again.
	eventually(t, "the subscription again", func() bool {
		publish(t, pub2, "sensors/probe/events", `{"n":-3}`)
		seen, _ := f.relayedNumbers("sensors.raw")
		return seen[-3] > 0
	})
	for i := 100; i < 200; i++ {
		publish(t, pub2, "sensors/a/events", fmt.Sprintf(`{"n":%d}`, i))
	}
	eventually(t, "all 200", func() bool {
		seen, _ := f.relayedNumbers("sensors.raw")
		for i := range 200 {
			if seen[i] != 1 {
				return false
			}
		}
		return true
	})
	select {
	case <-rb.done:
		t.Fatalf("the bridge stopped: %v", rb.err)
	default:
	}
}

// A backlog never starves the config topics: with small batches and
// thousands of messages waiting, a tombstone — or "suspended": true —
// takes effect within the backlog: the filter is unsubscribed at the
// broker, the rest is ACK-dropped as reason="unsubscribed", and every
// message is either relayed once or dropped, none both.
func TestBridgeAppliesConfigChangesUnderABacklog(t *testing.T) {
	t.Run("tombstone", func(t *testing.T) { testRemovalUnderABacklog(t, nil) })
	t.Run("suspended", func(t *testing.T) {
		testRemovalUnderABacklog(t, map[string]any{"topic": "sensors/+/events", "output_topic": "sensors.raw", "key": "{payload.n}", "suspended": true})
	})
}

// testRemovalUnderABacklog replaces the config by removal (nil: a
// tombstone) while a backlog flows.
func testRemovalUnderABacklog(t *testing.T, removal map[string]any) {
	f := newBridgeFixture(t)
	first, pub := f.startSensors()
	if err := first.stop(); err != nil {
		t.Fatal(err)
	}
	const n = 3000
	for i := range n {
		publish(t, pub, "sensors/a/events", fmt.Sprintf(`{"n":%d}`, i))
	}
	f.waitQueued("bridge-0", n)
	// waitSubscribed may have left probes queued too: the backlog is theirs
	// and the n messages.
	probes := f.queuedProbes("bridge-0")
	probesBefore, _ := f.relayedNumbers("sensors.raw")
	var bridge *mqtt.Bridge
	rb := f.startBridgeWith("bridge-0", f.env.MQTTURL(), "", func(b *mqtt.Bridge) { mqtt.SetMaxBatch(b, 5); bridge = b })
	eventually(t, "the backlog flowing", func() bool { return metrics.Value(rb.obs.TxnCommitted) >= 3 })
	if removal == nil {
		f.config("sensors", nil)
	} else {
		f.config("sensors", removal)
	}
	dropped := func() float64 {
		return metrics.Value(rb.obs.MQTTDropped.WithLabelValues("unsubscribed", "sensors/+/events"))
	}
	// Every queued message is accounted for: relayed before the tombstone
	// took effect, or ACK-dropped as the removed config's tail
	// ("unsubscribed", also while its UNSUBSCRIBE is still on the way).
	var relayed int
	eventually(t, "the backlog settled", func() bool {
		seen, _ := f.relayedNumbers("sensors.raw")
		relayed = len(seen) - 1 + seen[-1] - probesBefore[-1] // the n, then the queued probes
		return relayed+int(dropped()) == n+probes
	}, func() string {
		info := f.env.MQTTServer().Info
		return fmt.Sprintf("%d relayed + %v dropped as unsubscribed of %d (%d of them probes); %v drops in all; %v transactions; inbox %d; mochi dropped %d",
			relayed, dropped(), n+probes, probes, metrics.Value(rb.obs.MQTTDropped), metrics.Value(rb.obs.TxnCommitted), mqtt.InboxLen(bridge),
			atomic.LoadInt64(&info.MessagesDropped))
	})
	seen, total := f.relayedNumbers("sensors.raw")
	if dropped() == 0 || total-seen[-1] != len(seen)-1 {
		t.Errorf("%d relayed (%d records), %v dropped as unsubscribed: want some of the backlog dropped and nothing twice", len(seen)-1, total-seen[-1], dropped())
	}
	eventually(t, "the filter unsubscribed at the broker", func() bool {
		cl, ok := f.env.MQTTServer().Clients.Get("bridge-0")
		if !ok {
			return false
		}
		_, sub := cl.State.Subscriptions.Get("$share/bridge/sensors/+/events")
		return !sub
	})
	if got := metrics.Value(rb.obs.ActiveConfigs); got != 0 {
		t.Errorf("active_configs %v, want 0", got)
	}
	t.Logf("backlog of %d: %d relayed before the removal applied, %v ACK-dropped as unsubscribed", n, len(seen)-1, dropped())
}

// After the first reconciliation, a message for a filter no config ever
// declared — a subscription this process knows nothing of — is ACK-dropped
// as reason="stale", and later messages still flow.
func TestBridgeCountsStaleArrivals(t *testing.T) {
	f := newBridgeFixture(t)
	rb, pub := f.startSensors()

	// A subscription the bridge never made, behind its back.
	srv := f.env.MQTTServer()
	cl, ok := srv.Clients.Get("bridge-0")
	if !ok {
		t.Fatal("no session for bridge-0 at the broker")
	}
	stray := packets.Subscription{Filter: "$share/bridge/stray/#", Qos: 1}
	srv.Topics.Subscribe("bridge-0", stray)
	cl.State.Subscriptions.Add(stray.Filter, stray)

	publish(t, pub, "stray/x", `{"n":-5}`)
	publish(t, pub, "stray/y", `{"n":-6}`)
	stale := func() float64 { return metrics.Value(rb.obs.MQTTDropped.WithLabelValues("stale", "(unmatched)")) }
	eventually(t, "two stale drops", func() bool { return stale() == 2 })
	publish(t, pub, "sensors/a/events", `{"n":7}`)
	eventually(t, "a later message", func() bool {
		seen, _ := f.relayedNumbers("sensors.raw")
		return seen[7] == 1
	})
	if seen, _ := f.relayedNumbers("sensors.raw"); seen[-5]+seen[-6] != 0 || stale() != 2 {
		t.Errorf("stale messages written (%d) or miscounted (%v drops, want 2)", seen[-5]+seen[-6], stale())
	}
}

// A config removed while the bridge was down: the resumed session still
// holds its subscription, which the new process never made. The first
// reconciliation unsubscribes it (the config topic's history names the
// filter), its queued messages are ACK-dropped as unsubscribed, and the
// broker stops delivering it.
func TestBridgeUnsubscribesWhatAnEarlierIncarnationLeft(t *testing.T) {
	f := newBridgeFixture(t)
	f.config("a", map[string]any{"topic": "a/+", "output_topic": "sensors.raw", "key": "{topic}"})
	f.config("c", map[string]any{"topic": "c/+", "output_topic": "other.raw", "key": "{payload.n}"})
	first := f.startBridgeWith("bridge-0", f.env.MQTTURL(), "", nil)
	pub := publisher(t, f.env.MQTTAddr())
	f.waitSubscribed(pub, "c/probe", "other.raw")
	// a and c are subscribed in one SUBSCRIBE, so one probe is enough; a
	// probe published again and again could still be queued at the stop
	// and then count among the dropped.
	publish(t, pub, "a/probe", `{"n":-1}`)
	eventually(t, "a subscribed", func() bool {
		seen, _ := f.relayedNumbers("sensors.raw")
		return seen[-1] > 0
	})
	if err := first.stop(); err != nil {
		t.Fatal(err)
	}
	f.config("a", nil)
	for i := range 20 {
		publish(t, pub, "a/x", fmt.Sprintf(`{"n":%d}`, i)) // queued for the session
	}
	f.waitQueued("bridge-0", 20)
	before, _ := f.relayedNumbers("sensors.raw")

	rb := f.startBridgeWith("bridge-0", f.env.MQTTURL(), "", nil)
	unsub := func() float64 { return metrics.Value(rb.obs.MQTTDropped.WithLabelValues("unsubscribed", "a/+")) }
	eventually(t, "the queued messages of a dropped", func() bool { return unsub() == 20 })
	for i := range 20 {
		publish(t, pub, "a/x", fmt.Sprintf(`{"n":%d}`, 100+i))
	}
	publish(t, pub, "c/x", `{"n":-2}`)
	eventually(t, "c flowing", func() bool {
		seen, _ := f.relayedNumbers("other.raw")
		return seen[-2] == 1
	}, func() string { return f.whereMessagesStand(rb, "bridge-0", "c/x", "other.raw") })
	after, _ := f.relayedNumbers("sensors.raw")
	// Exactly the 20 queued ones: the 20 published after the unsubscribe
	// must not be delivered at all.
	if unsub() != 20 || metrics.Value(rb.obs.MQTTDropped) != 20 || len(after) != len(before) {
		t.Errorf("after the unsubscribe: %v dropped as unsubscribed, %v drops in all, %d → %d relayed for a; want 20, 20, unchanged",
			unsub(), metrics.Value(rb.obs.MQTTDropped), len(before), len(after))
	}
}

// The broker delivers right after CONNACK, before the connection loop has
// made the new connection the current one, and a bridge cycle runs in
// between: those messages must wait, not be dropped — dropped, they would
// stay un-ACKed on the live connection, and paho, ACKing in receive order
// only, would send no later ACK on it: the broker's window fills and
// delivery stops for good.
func TestBridgeKeepsMessagesArrivingBeforeTheConnectionIsCurrent(t *testing.T) {
	f := newBridgeFixture(t)
	first, pub := f.startSensors()
	if err := first.stop(); err != nil {
		t.Fatal(err)
	}
	const n = 50
	for i := range n {
		publish(t, pub, "sensors/a/events", fmt.Sprintf(`{"n":%d}`, i)) // queued for the session
	}
	f.waitQueued("bridge-0", n)
	var raced atomic.Bool
	var rb *runningBridge
	rb = f.startBridgeWith("bridge-0", f.env.MQTTURL(), "", func(b *mqtt.Bridge) {
		mqtt.OnConnected(b, func() {
			if raced.Load() {
				return
			}
			// Hold the connection back until the queued messages arrived
			// and a cycle has looked at them.
			deadline := time.Now().Add(5 * time.Second)
			for mqtt.InboxLen(b) == 0 && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			cycles := metrics.Value(rb.obs.PollCycle)
			for metrics.Value(rb.obs.PollCycle) < cycles+2 && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			raced.Store(mqtt.InboxLen(b) > 0)
		})
	})
	eventually(t, "all queued messages relayed", func() bool {
		seen, _ := f.relayedNumbers("sensors.raw")
		for i := range n {
			if seen[i] != 1 {
				return false
			}
		}
		return true
	})
	if !raced.Load() {
		t.Error("no cycle ran while the new connection's messages waited: the race was not exercised")
	}
	// And the connection still ACKs: a later message flows too.
	publish(t, pub, "sensors/a/events", `{"n":-2}`)
	eventually(t, "a later message", func() bool {
		seen, _ := f.relayedNumbers("sensors.raw")
		return seen[-2] == 1
	})
}

// A broker that resumes the session but has lost its subscriptions — what
// Mosquitto 2.0.11 does with $share subscriptions restored from
// persistence — still delivers after a reconnect: the bridge subscribes
// its filters again on every new connection.
func TestBridgeResubscribesOnEveryConnection(t *testing.T) {
	f := newBridgeFixture(t)
	rb, pub := f.startSensors()

	// The broker forgets the subscription but keeps the session.
	const shared = "$share/bridge/sensors/+/events"
	srv := f.env.MQTTServer()
	cl, ok := srv.Clients.Get("bridge-0")
	if !ok || !srv.Topics.Unsubscribe(shared, "bridge-0") {
		t.Fatal("no subscription to remove at the broker")
	}
	cl.State.Subscriptions.Delete(shared)
	mqtt.DropCurrent(rb.b)
	eventually(t, "the reconnect", func() bool { return metrics.Value(rb.obs.MQTTConnects) == 2 })
	eventually(t, "delivery after the reconnect", func() bool {
		publish(t, pub, "sensors/a/events", `{"n":-2}`)
		seen, _ := f.relayedNumbers("sensors.raw")
		return seen[-2] > 0
	})
}
