//go:build e2e && e2ecluster

package e2e

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// progressBound is how soon after the cluster is whole again each stage
// must show progress (a record out, a cursor committed, a transaction).
const progressBound = 90 * time.Second

// The MQTT bridge (QoS 1, 20k messages through a real Mosquitto) while the
// cluster under it loses the leader of its raw partition, its transaction
// coordinator, a paused node, a rolling restart and all three nodes: the
// one bridge process never exits, every message Mosquitto acknowledged to
// the publisher is in the raw topic (duplicates counted, none lost), and
// after each fault the bridge relays again within progressBound of the
// cluster being whole.
func TestClusterMQTTBridgeFaults(t *testing.T) {
	const (
		total      = 20_000
		publishFor = 4 * time.Minute
	)
	k := clusterNodes(t)
	ctx := testCtx(t, 25*time.Minute)
	m := startMosquitto(t)
	app, cfg, raw := bridgeTopics(t, 3)
	putConfig(t, cfg, "sensors", relayConfig("sensors/+/events", raw, "{payload.id}"))
	stage := bridgeStage(t, app, cfg, m.Addr)
	p := startSource(t, stage, "bridge-0")
	waitSubscribedLog(t, p, app, "sensors/+/events")
	txnID := app + "-bridge-0"

	pub := newMQTTPub(t, m.Addr, "e2e-cluster-pub")
	var published atomic.Int64
	pubErr := make(chan error, 1)
	pubStart := time.Now()
	go func() {
		for n := range total {
			if ahead := time.Until(pubStart.Add(publishFor * time.Duration(n) / total)); ahead > 0 {
				time.Sleep(ahead)
			}
			if err := pub.publish(ctx, fmt.Sprintf("sensors/dev-%d/events", n%10), n, numbered(n)); err != nil {
				pubErr <- err
				return
			}
			published.Store(int64(n + 1))
		}
		pubErr <- nil
	}()
	waitUntil(t, 2*time.Minute, "the bridge relaying", func() bool {
		p.alive()
		v, _ := p.tryMetric("flechtwerk_messages_out_total")
		return v >= 500
	})

	topics := []string{cfg, raw}
	rawPart := int32(k.intn(0, 2))
	faults := []fault{
		killLeader(fmt.Sprintf("raw partition %d", rawPart), partitionLeader(raw, rawPart)),
		killLeader("the bridge's __transaction_state partition", coordinatorOf(txnID)),
		pauseNode("the bridge's transaction coordinator", coordinatorOf(txnID)),
		rollingRestart(topics),
		allDown(),
	}
	out := func() float64 {
		v, err := p.tryMetric("flechtwerk_messages_out_total")
		if err != nil {
			return -1
		}
		if published.Load() == total && v >= total {
			return v + float64(time.Now().UnixNano()) // nothing left to relay: progress is moot
		}
		return v
	}
	run := k.injectAll(faults, topics, progressBound, p.alive, out)
	if err := <-pubErr; err != nil {
		t.Fatal(err)
	}
	t.Logf("published %d in %s", total, time.Since(pubStart).Round(time.Second))
	recs, rep := waitAllRelayed(t, p, raw, total, 3*time.Minute)
	p.alive()
	retries := retryLogs(p)
	p.stop()
	t.Logf("bridge under %d faults: %s; the process never exited; %s%s", len(run.Faults), rep, retries, run)
	logFigures(t, "mqtt bridge", len(run.Faults), total, len(recs), rep.Duplicates, rep.Missing)
	if rep.Missing != 0 {
		t.Errorf("lost %d acknowledged messages, e.g. %v", rep.Missing, rep.MissingSample)
	}
}

// logFigures logs the line the cluster-tier rows of docs/reliability.md
// are made from.
func logFigures(t *testing.T, stage string, faults, items, records, duplicates, missing int) {
	t.Helper()
	t.Logf("FIGURES stage=%q faults=%d items=%d records=%d duplicates=%d missing=%d", stage, faults, items, records, duplicates, missing)
}
