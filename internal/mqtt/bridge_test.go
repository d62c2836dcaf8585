package mqtt_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/devenv"
	"github.com/flecht-dev/flecht/internal/devenv/devenvtest"
	"github.com/flecht-dev/flecht/internal/health"
	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/lineage"
	"github.com/flecht-dev/flecht/internal/logx/logxtest"
	"github.com/flecht-dev/flecht/internal/metrics"
	"github.com/flecht-dev/flecht/internal/mqtt"
	"github.com/flecht-dev/flecht/internal/stagefile"
)

type bridgeFixture struct {
	t   *testing.T
	env *devenv.Env
	adm *kadm.Client
	cl  *kgo.Client
	// extract is the stage file's extract: block.
	extract string
	// probes, when set, gets the bridges' heartbeats and readiness.
	probes *health.Registry
}

func newBridgeFixture(t *testing.T) *bridgeFixture {
	env := devenvtest.Start(t)
	cl := devenvtest.KafkaClient(t, env)
	f := &bridgeFixture{t: t, env: env, adm: kadm.NewClient(cl), cl: cl, extract: "{builtin: mqtt-relay}"}
	for name, n := range map[string]int32{"mqtt.config": 1, "sensors.raw": 3, "other.raw": 1} {
		if err := kafkax.CreateTopic(context.Background(), f.adm, name, n, nil); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func (f *bridgeFixture) config(key string, value any) {
	f.t.Helper()
	var v []byte
	if value != nil {
		v, _ = json.Marshal(value)
	}
	if err := f.cl.ProduceSync(context.Background(), &kgo.Record{Topic: "mqtt.config", Key: []byte(key), Value: v}).FirstErr(); err != nil {
		f.t.Fatal(err)
	}
}

// rawConfig writes a config record with exactly value as its bytes.
func (f *bridgeFixture) rawConfig(key string, value []byte) {
	f.t.Helper()
	if err := f.cl.ProduceSync(context.Background(), &kgo.Record{Topic: "mqtt.config", Key: []byte(key), Value: value}).FirstErr(); err != nil {
		f.t.Fatal(err)
	}
}

func (f *bridgeFixture) read(topic string) []*kgo.Record {
	recs, err := kafkax.ReadToEnd(context.Background(), f.cl, topic)
	if err != nil {
		f.t.Fatal(err)
	}
	return recs
}

// runningBridge is a bridge running in the test.
type runningBridge struct {
	b      *mqtt.Bridge
	obs    *metrics.Observer
	logs   *logBuffer
	cancel context.CancelFunc
	done   chan struct{} // closed when Run returned
	err    error         // Run's result, once done is closed
}

// stop cancels the bridge and returns Run's result.
func (rb *runningBridge) stop() error {
	rb.cancel()
	<-rb.done
	return rb.err
}

func (f *bridgeFixture) startBridge(clientID string) (*metrics.Observer, context.CancelFunc, chan struct{}) {
	rb := f.startBridgeWith(clientID, f.env.MQTTURL(), "", nil)
	return rb.obs, rb.cancel, rb.done
}

// startBridgeWith starts a bridge against mqttURL with extra stage-file
// lines; setup (if given) runs on the bridge before Run.
func (f *bridgeFixture) startBridgeWith(clientID, mqttURL, extraYAML string, setup func(*mqtt.Bridge)) *runningBridge {
	u, _ := mqtt.ParseURL(mqttURL)
	return f.startBridgeAt(clientID, mqtt.Endpoint{URL: u}, extraYAML, setup)
}

// startBridgeAt is startBridgeWith for any endpoint (TLS, say).
func (f *bridgeFixture) startBridgeAt(clientID string, endpoint mqtt.Endpoint, extraYAML string, setup func(*mqtt.Bridge)) *runningBridge {
	st, err := stagefile.Parse([]byte("application_id: bridge\nkind: mqtt\nconfig_topics: [mqtt.config]\nextract: " + f.extract + "\npoll_interval: 200ms\n" + extraYAML))
	if err != nil {
		f.t.Fatal(err)
	}
	obs := metrics.New(nil)
	logs := &logBuffer{}
	var out io.Writer = logs
	if os.Getenv("FLECHT_TEST_DEBUG") != "" {
		out = io.MultiWriter(logs, os.Stderr)
	}
	log := slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: slog.LevelDebug}))
	// franz-go's own lines (Info and up) go to the same log: a failed wait
	// then shows whether a produce or a transaction was retrying.
	kafkaLog := slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: slog.LevelInfo}))
	cluster := &kafkax.Cluster{Brokers: []string{f.env.KafkaAddr()}, Log: kafkaLog}
	b, err := mqtt.NewBridge(mqtt.Options{Stage: st, Cluster: cluster, ClientID: clientID, Endpoint: endpoint, Metrics: obs, Log: log, Health: f.probes})
	if err != nil {
		f.t.Fatal(err)
	}
	if setup != nil {
		setup(b)
	}
	ctx, cancel := context.WithCancel(context.Background())
	rb := &runningBridge{b: b, obs: obs, logs: logs, cancel: cancel, done: make(chan struct{})}
	go func() { rb.err = b.Run(ctx); close(rb.done) }()
	f.t.Cleanup(func() {
		if err := rb.stop(); err != nil {
			f.t.Errorf("bridge %s: %v", clientID, err)
		}
		if f.t.Failed() {
			f.t.Logf("bridge %s, the last lines of its log:\n%s", clientID, logs.tail(80))
		}
	})
	return rb
}

// logBuffer collects a bridge's log lines.
type logBuffer struct{ logxtest.Buffer }

// tail is the last n lines of the log, for a failing test's report.
func (l *logBuffer) tail(n int) string {
	lines := strings.Split(strings.TrimRight(l.String(), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// lines are the log lines containing every one of parts.
func (l *logBuffer) lines(parts ...string) []string {
	var out []string
	for line := range strings.SplitSeq(l.String(), "\n") {
		all := line != ""
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			out = append(out, line)
		}
	}
	return out
}

func publisher(t *testing.T, addr string) *paho.Client {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c := paho.NewClient(paho.ClientConfig{ClientID: "pub", Conn: conn})
	if _, err := c.Connect(context.Background(), &paho.Connect{ClientID: "pub", KeepAlive: 30, CleanStart: true}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Disconnect(&paho.Disconnect{}) })
	return c
}

func publish(t *testing.T, c *paho.Client, topic string, payload string) {
	t.Helper()
	if _, err := c.Publish(context.Background(), &paho.Publish{Topic: topic, QoS: 1, Payload: []byte(payload)}); err != nil {
		t.Fatal(err)
	}
}

// eventually polls cond until it holds or 30 s pass; detail, if given,
// says where things stood.
func eventually(t *testing.T, what string, cond func() bool, detail ...func() string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(detail) > 0 {
		t.Fatalf("timed out waiting for %s: %s", what, detail[0]())
	}
	t.Fatalf("timed out waiting for %s", what)
}

func TestBridgeRelaysAndDrops(t *testing.T) {
	f := newBridgeFixture(t)
	f.config("sensors", map[string]any{"topic": "sensors/+/events", "output_topic": "sensors.raw", "key": "{topic.1}"})
	f.config("other", map[string]any{"topic": "other/#", "output_topic": "other.raw", "key": "{payload.id}"})
	obs, _, _ := f.startBridge("bridge-0")
	eventually(t, "two active configs", func() bool { return metrics.Value(obs.ActiveConfigs) == 2 })

	pub := publisher(t, f.env.MQTTAddr())
	// Subscriptions are in place once a probe message gets through.
	eventually(t, "subscription", func() bool {
		publish(t, pub, "other/probe", `{"id":"probe"}`)
		return len(f.read("other.raw")) > 0
	})
	for i := range 300 {
		publish(t, pub, fmt.Sprintf("sensors/dev-%d/events", i%5), fmt.Sprintf(`{"n":%d}`, i))
	}
	eventually(t, "300 relayed records", func() bool { return len(f.read("sensors.raw")) == 300 })
	seen := map[float64]bool{}
	for _, r := range f.read("sensors.raw") {
		var v struct {
			Data          struct{ N float64 }
			MQTTTopic     string `json:"mqtt_topic"`
			ConfigKey     string `json:"config_key"`
			ReceivedAt    string `json:"received_at"`
			SchemaVersion int    `json:"schema_version"`
		}
		if err := json.Unmarshal(r.Value, &v); err != nil {
			t.Fatal(err)
		}
		if v.MQTTTopic != fmt.Sprintf("sensors/%s/events", r.Key) || v.ConfigKey != "sensors" || v.SchemaVersion != 1 || v.ReceivedAt == "" {
			t.Fatalf("record %s → %s", r.Key, r.Value)
		}
		if o, _ := lineage.OriginOf(r.Headers); o != lineage.MQTTOrigin(v.MQTTTopic) {
			t.Fatalf("record %s: origin %q, want %q", r.Key, o, lineage.MQTTOrigin(v.MQTTTopic))
		}
		if r.Partition != kafkax.Partition(r.Key, 3) {
			t.Fatalf("key %s on partition %d", r.Key, r.Partition)
		}
		seen[v.Data.N] = true
	}
	if len(seen) != 300 {
		t.Fatalf("%d distinct messages relayed, want 300", len(seen))
	}

	// Poison: not JSON, or no key in the payload; the next good one flows.
	publish(t, pub, "other/x", `not json`)
	publish(t, pub, "other/x", `{"no_id":1}`)
	publish(t, pub, "other/x", `{"id":"after-poison"}`)
	eventually(t, "record after poison", func() bool { return len(f.read("other.raw")) >= 2 })
	eventually(t, "2 poison drops", func() bool {
		return metrics.Value(obs.MQTTDropped.WithLabelValues("poison", "other/#")) == 2
	})

	// Tombstone one config: its filter is unsubscribed, the other flows on.
	f.config("sensors", nil)
	eventually(t, "one active config", func() bool { return metrics.Value(obs.ActiveConfigs) == 1 })
	publish(t, pub, "sensors/dev-1/events", `{"n":999}`)
	publish(t, pub, "other/y", `{"id":"still-flowing"}`)
	eventually(t, "other still flowing", func() bool { return len(f.read("other.raw")) >= 3 })
	if n := len(f.read("sensors.raw")); n != 300 {
		t.Errorf("a tombstoned config still relays: %d records", n)
	}
}

// On the config topic an empty value and {} delete a config as a null
// does: its filter is unsubscribed and the store's gauges follow.
func TestBridgeConfigDeletedByEmptyOrBraces(t *testing.T) {
	f := newBridgeFixture(t)
	f.config("sensors", map[string]any{"topic": "sensors/+/events", "output_topic": "sensors.raw", "key": "{topic.1}"})
	f.config("other", map[string]any{"topic": "other/#", "output_topic": "other.raw", "key": "{payload.id}"})
	rb := f.startBridgeWith("bridge-0", f.env.MQTTURL(), "", nil)
	eventually(t, "two active configs", func() bool { return metrics.Value(rb.obs.ActiveConfigs) == 2 })
	f.rawConfig("sensors", []byte("{}"))
	eventually(t, "{} deleting sensors", func() bool {
		return metrics.Value(rb.obs.ActiveConfigs) == 1 && len(rb.logs.lines("unsubscribed", "sensors/+/events")) == 1
	})
	want := float64(len("other") + len(`{"key":"{payload.id}","output_topic":"other.raw","topic":"other/#"}`))
	if got := metrics.Value(rb.obs.ConfigStoreBytes); got != want {
		t.Errorf("config_store_bytes %v, want %v", got, want)
	}
	f.rawConfig("other", []byte{})
	eventually(t, "an empty value deleting other", func() bool {
		return metrics.Value(rb.obs.ActiveConfigs) == 0 && metrics.Value(rb.obs.ConfigStoreBytes) == 0 &&
			len(rb.logs.lines("unsubscribed", "other/#")) == 1
	})
}

func TestBridgeRefusesOverlappingConfigs(t *testing.T) {
	f := newBridgeFixture(t)
	f.config("a", map[string]any{"topic": "sensors/#", "output_topic": "sensors.raw", "key": "{topic}"})
	f.config("b", map[string]any{"topic": "sensors/+/events", "output_topic": "sensors.raw", "key": "{topic}"})
	f.config("c", map[string]any{"topic": "other/#", "output_topic": "other.raw", "key": "{topic}"})
	rb := f.startBridgeWith("bridge-0", f.env.MQTTURL(), "", nil)
	eventually(t, "only the non-overlapping config active", func() bool { return metrics.Value(rb.obs.ActiveConfigs) == 1 })
	lines := rb.logs.lines("filters overlap")
	if len(lines) != 1 || strings.Count(lines[0], " config=") != 1 || !strings.Contains(lines[0], " config=a ") || !strings.Contains(lines[0], " other_config=b ") {
		t.Errorf("want one overlap line naming config=a once and other_config=b: %q", lines)
	}
}

// An upstream Flechtwerk MQTT config record holds only "topic": the stage
// file's extract: options give it an output topic and a key, and a record's
// own fields still win.
func TestBridgeRelaysUpstreamConfigRecords(t *testing.T) {
	f := newBridgeFixture(t)
	f.extract = `{builtin: mqtt-relay, output_topic: sensors.raw, key: "{topic.1}"}`
	f.config("sensors", map[string]any{"topic": "sensors/+/events"})
	f.config("other", map[string]any{"topic": "other/#", "output_topic": "other.raw", "key": "{payload.id}"})
	f.startBridgeWith("bridge-0", f.env.MQTTURL(), "", nil)
	pub := publisher(t, f.env.MQTTAddr())
	f.waitSubscribed(pub, "sensors/probe/events", "sensors.raw")
	publish(t, pub, "sensors/dev-1/events", `{"n":1}`)
	publish(t, pub, "other/x", `{"n":2,"id":"o-2"}`)
	keyOf := func(topic string, n int) string {
		for _, r := range f.read(topic) {
			var v struct{ Data struct{ N int } }
			if json.Unmarshal(r.Value, &v) == nil && v.Data.N == n {
				return string(r.Key)
			}
		}
		return ""
	}
	eventually(t, "both relayed", func() bool { return keyOf("sensors.raw", 1) != "" && keyOf("other.raw", 2) != "" })
	if k := keyOf("sensors.raw", 1); k != "dev-1" {
		t.Errorf("upstream record: key %q, want dev-1 from the stage's {topic.1}", k)
	}
	if k := keyOf("other.raw", 2); k != "o-2" {
		t.Errorf("own fields: key %q, want o-2 from the record's {payload.id}", k)
	}
}

// A record that names no key while the stage file gives none is refused on
// its own, saying where a key goes; the other configs run.
func TestBridgeRefusesAConfigWithoutAKey(t *testing.T) {
	f := newBridgeFixture(t)
	f.extract = `{builtin: mqtt-relay, output_topic: sensors.raw}`
	f.config("bare", map[string]any{"topic": "bare/+"})
	f.config("keyed", map[string]any{"topic": "sensors/+/events", "key": "{topic.1}"})
	rb := f.startBridgeWith("bridge-0", f.env.MQTTURL(), "", nil)
	pub := publisher(t, f.env.MQTTAddr())
	f.waitSubscribed(pub, "sensors/probe/events", "sensors.raw")
	if got := metrics.Value(rb.obs.ActiveConfigs); got != 1 {
		t.Errorf("active_configs %v, want 1", got)
	}
	if l := rb.logs.lines("mqtt config refused", "config=bare", "no key", "extract:"); len(l) != 1 {
		t.Errorf("want one refusal of bare naming the missing key, got %q", l)
	}
}
