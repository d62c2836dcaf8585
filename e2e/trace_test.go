//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/lineage"
)

// trace from a refined record reaches the MQTT message that started it:
// Mosquitto → the flecht MQTT bridge → a passthrough transformer, all
// real processes; `flecht trace refined/P@O` names the raw record and the
// MQTT topic the message was published on, for each of three messages.
func TestTraceReachesTheMQTTMessage(t *testing.T) {
	ctx := testCtx(t, 2*time.Minute)
	m := startMosquitto(t)
	app, cfg, raw := bridgeTopics(t, 1)
	refined := topicName(t, "refined")
	createTopic(t, refined, 1, nil)
	putConfig(t, cfg, "sensors", relayConfig("sensors/+/events", raw, "{payload.id}"))
	bridge := startSource(t, bridgeStage(t, app, cfg, m.Addr), "trace-bridge")
	waitSubscribedLog(t, bridge, app, "sensors/+/events")
	pass := writeStage(t, fmt.Sprintf("application_id: %s-pass\nkind: transformer\ninput_topics: [%s]\ntransform: {builtin: passthrough, output_topic: %s}\n", app, raw, refined))
	startRun(t, pass, "trace-pass", t.TempDir())

	pub := newMQTTPub(t, m.Addr, "e2e-trace-pub")
	const messages = 3
	for n := 1; n <= messages; n++ {
		if err := pub.publish(ctx, fmt.Sprintf("sensors/s%d/events", n), n, numbered(n)); err != nil {
			t.Fatal(err)
		}
	}
	var traced int
	waitUntil(t, time.Minute, "the refined records", func() bool {
		recs, err := kafkax.ReadToEnd(ctx, client(t), refined)
		return err == nil && len(recs) == messages
	})
	recs, err := kafkax.ReadToEnd(ctx, client(t), refined)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		var v struct{ Data struct{ N int } }
		if err := json.Unmarshal(r.Value, &v); err != nil {
			t.Fatal(err)
		}
		at := lineage.Source{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}.String()
		out, errOut, code := runFlecht(t, "", "trace", at, "-o", "json")
		var chains []struct {
			Hops []struct {
				Record string `json:"record"`
			} `json:"hops"`
			End       string `json:"end"`
			EndDetail string `json:"end_detail"`
		}
		if err := json.Unmarshal([]byte(out), &chains); err != nil || code != 0 || len(chains) != 1 {
			t.Fatalf("trace %s: exit %d, %v\n%s\n%s", at, code, err, out, errOut)
		}
		c := chains[0]
		want := lineage.MQTTOrigin(fmt.Sprintf("sensors/s%d/events", v.Data.N))
		if len(c.Hops) != 2 || c.Hops[0].Record != at || !strings.HasPrefix(c.Hops[1].Record, raw+"/0@") || c.End != "origin" || c.EndDetail != want {
			t.Fatalf("trace %s (message %d): %+v, want it to reach %s/0 and %s", at, v.Data.N, c, raw, want)
		}
		traced++
	}
	t.Logf("%d refined records traced to their MQTT messages", traced)
}
