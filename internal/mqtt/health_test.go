package mqtt_test

import (
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flecht-dev/flecht/internal/devenv/devenvtest"
	"github.com/flecht-dev/flecht/internal/health"
	"github.com/flecht-dev/flecht/internal/mqtt"
)

func check(rep health.Report, name string) health.Check {
	for _, c := range rep.Checks {
		if c.Name == name {
			return c
		}
	}
	return health.Check{Name: name, Detail: "(no such check)"}
}

// The bridge is ready while its connection is subscribed to every active
// filter. A connection supervisor stuck before the connection becomes
// current fails liveness (mqtt_connection) and keeps readiness at 503; once
// it goes on, the bridge subscribes and is ready. A relay loop stuck after
// a commit fails liveness (relay_loop) until it goes on.
func TestBridgeProbes(t *testing.T) {
	f := newBridgeFixture(t)
	f.probes = health.New(health.StallLimit(3 * time.Second))
	f.config("sensors", map[string]any{"topic": "sensors/+/events", "output_topic": "sensors.raw", "key": "{topic.1}"})
	connHeld, connRelease := make(chan struct{}), make(chan struct{})
	commitHeld, commitRelease := make(chan struct{}), make(chan struct{})
	var connOnce, commitOnce sync.Once
	f.startBridgeWith("bridge-0", f.env.MQTTURL(), "", func(b *mqtt.Bridge) {
		if r := f.probes.Readiness(); r.OK || !strings.HasPrefix(check(r, "mqtt").Detail, "starting") {
			t.Errorf("before Run: %+v", r)
		}
		mqtt.OnConnected(b, func() {
			connOnce.Do(func() {
				close(connHeld)
				<-connRelease
			})
		})
		mqtt.OnCommit(b, func() {
			commitOnce.Do(func() {
				close(commitHeld)
				<-commitRelease
			})
		})
	})
	<-connHeld
	eventually(t, "the connection supervisor to stall", func() bool { return !check(f.probes.Liveness(), "mqtt_connection").OK })
	live := f.probes.Liveness()
	if live.OK || !check(live, "relay_loop").OK {
		t.Fatalf("only the supervisor is stuck: %+v", live)
	}
	if r := f.probes.Readiness(); r.OK {
		t.Fatalf("ready without a connection: %+v", r)
	}
	close(connRelease)
	eventually(t, "ready", func() bool { return f.probes.Readiness().OK }, func() string { return fmt.Sprintf("%+v", f.probes.Readiness()) })
	if d := check(f.probes.Readiness(), "mqtt").Detail; d != "connected to MQTT broker "+f.env.MQTTAddr()+" as bridge-0; subscribed to 1 active filter(s)" {
		t.Fatalf("ready detail %q", d)
	}
	eventually(t, "alive again", func() bool { return f.probes.Liveness().OK })

	pub := publisher(t, f.env.MQTTAddr())
	publish(t, pub, "sensors/a/events", `{"n":1}`)
	select {
	case <-commitHeld:
	case <-time.After(30 * time.Second):
		t.Fatal("no commit")
	}
	eventually(t, "the relay loop to stall", func() bool { return !check(f.probes.Liveness(), "relay_loop").OK })
	close(commitRelease)
	eventually(t, "the relay loop to recover", func() bool { return f.probes.Liveness().OK })
	if len(f.read("sensors.raw")) != 1 {
		t.Fatal("the held batch was not relayed")
	}
}

// With the MQTT broker unreachable the bridge is alive (it retries) but not
// ready, and readiness says why.
func TestBridgeNotReadyWhileTheBrokerIsDown(t *testing.T) {
	f := newBridgeFixture(t)
	f.probes = health.New()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	f.startBridgeWith("bridge-0", "mqtt://"+addr, "", nil)
	eventually(t, "a failed connect in readiness", func() bool {
		d := check(f.probes.Readiness(), "mqtt").Detail
		return strings.Contains(d, "connecting to MQTT broker "+addr) && strings.Contains(d, "retrying in")
	}, func() string { return fmt.Sprintf("%+v", f.probes.Readiness()) })
	if r := f.probes.Readiness(); r.OK {
		t.Fatalf("ready without a broker: %+v", r)
	}
	if l := f.probes.Liveness(); !l.OK {
		t.Fatalf("retrying is alive: %+v", l)
	}
}

// During a Kafka outage an idle bridge (nothing to commit) is not ready
// within ten seconds and says why, in the probe and in the log at once;
// when Kafka answers again it says "Kafka is back" and is ready again.
func TestBridgeNotReadyDuringKafkaOutage(t *testing.T) {
	f := newBridgeFixture(t)
	f.probes = health.New()
	f.config("sensors", map[string]any{"topic": "sensors/+/events", "output_topic": "sensors.raw", "key": "{topic.1}"})
	rb := f.startBridgeWith("bridge-0", f.env.MQTTURL(), "", nil)
	eventually(t, "ready", func() bool { return f.probes.Readiness().OK })

	end := devenvtest.Outage(t, f.env)
	began := time.Now()
	eventually(t, "not ready", func() bool { return !f.probes.Readiness().OK })
	if took := time.Since(began); took > 11*time.Second {
		t.Fatalf("not ready %s after the outage began", took)
	}
	if c := check(f.probes.Readiness(), "kafka"); c.OK || !strings.Contains(c.Detail, "the bridge's connection to Kafka is gone: no answer from Kafka") {
		t.Fatalf("readiness does not say why: %+v", f.probes.Readiness())
	}
	if n := strings.Count(rb.logs.String(), "no answer from Kafka for"); n != 1 {
		t.Fatalf("want the loss said once, at once; got %d:\n%s", n, rb.logs.tail(40))
	}
	end()
	eventually(t, "ready again", func() bool { return f.probes.Readiness().OK })
	if n := strings.Count(rb.logs.String(), "Kafka is back: Kafka answers again"); n != 1 {
		t.Fatalf("want one recovery line, got %d:\n%s", n, rb.logs.tail(40))
	}
}
