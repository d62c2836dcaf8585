package mqtt_test

import (
	"strings"
	"sync/atomic"
	"testing"

	"github.com/flecht-dev/flecht/internal/devenv"
	"github.com/flecht-dev/flecht/internal/metrics"
)

// startMQTTBroker starts another MQTT broker (and an unused Kafka) with
// opts, closed at the end of the test.
func startMQTTBroker(t *testing.T, opts devenv.Options) *devenv.Env {
	t.Helper()
	env, err := devenv.Start(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Close() })
	return env
}

// An MQTT broker that refuses one filter in its SUBACK (an ACL): only that
// config is refused — logged once, counted, retried on later
// reconciliations — while the bridge runs on and the other configs flow;
// once the ACL allows it, the filter is subscribed.
func TestBridgeRefusedSubscriptionRefusesOnlyItsConfig(t *testing.T) {
	f := newBridgeFixture(t)
	var deny atomic.Bool
	deny.Store(true)
	menv := startMQTTBroker(t, devenv.Options{MQTTACL: func(_, topic string, write bool) bool {
		return write || !deny.Load() || !strings.HasSuffix(topic, "/secret/+")
	}})
	f.config("open", map[string]any{"topic": "sensors/+/events", "output_topic": "sensors.raw", "key": "{payload.n}"})
	f.config("secret", map[string]any{"topic": "secret/+", "output_topic": "other.raw", "key": "{topic.1}"})
	rb := f.startBridgeWith("bridge-0", menv.MQTTURL(), "", nil)
	pub := publisher(t, menv.MQTTAddr())
	f.waitSubscribed(pub, "sensors/probe/events", "sensors.raw")

	refused := func() float64 { return metrics.Value(rb.obs.MQTTSubscriptionsRefused.WithLabelValues("secret/+")) }
	eventually(t, "the refusal retried", func() bool { return refused() >= 3 })
	select {
	case <-rb.done:
		t.Fatalf("the bridge stopped: %v", rb.err)
	default:
	}
	if l := rb.logs.lines("refused the subscription", "config=secret", "reason_code=0x87"); len(l) != 1 {
		t.Errorf("want the refusal logged once, naming the config and the reason: %q", l)
	}
	if l := rb.logs.lines("SUBSCRIBE failed"); len(l) != 0 {
		t.Errorf("a refusal of one filter failed the whole SUBSCRIBE: %q", l)
	}
	if l := rb.logs.lines("subscribed", "config=open"); len(l) != 1 {
		t.Errorf("want open subscribed once, not again with every retry of secret: %q", l)
	}
	publish(t, pub, "sensors/a/events", `{"n":1}`)
	eventually(t, "open flowing", func() bool {
		seen, _ := f.relayedNumbers("sensors.raw")
		return seen[1] == 1
	})

	deny.Store(false)
	eventually(t, "secret subscribed once allowed", func() bool {
		publish(t, pub, "secret/x", `{"n":2}`)
		return len(f.read("other.raw")) > 0
	})
}
