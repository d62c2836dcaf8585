//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"
	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkMQTTBridge measures the MQTT bridge (`flecht run`, kind: mqtt,
// ACK after commit) on a real Mosquitto and Kafka beside its two limits,
// measured on the same machine in the same run:
//
//   - the MQTT broker's plain fan-out: the same publishers and messages to
//     one shared-subscription subscriber that ACKs at once;
//   - the transactional produce limit: the broker's own ProducerPerformance
//     tool, 100 ms transactions, zstd, the bridge's average record size.
//
// It reports messages/s from the first publish until the last message is
// committed, the ratio to the smaller limit, and the p50/p99 latency from
// publish until a read_committed consumer sees the record, at a fixed
// 1,000 messages/s: medians of alternating rounds, with the machine and
// its load. Mosquitto runs with its defaults for the window (the e2e
// mosquitto.conf: max_inflight_messages 20, which an MQTT 5 client's own
// receive maximum replaces; the bridge sends none unless the stage file
// sets receive_maximum).
//
//	make bench-e2e
//	FLECHT_BENCH_MQTT_MESSAGES=n   messages of the throughput runs (100000)
//	FLECHT_BENCH_ROUNDS=n          alternating rounds (2)
func BenchmarkMQTTBridge(b *testing.B) {
	messages := envInt(b, "FLECHT_BENCH_MQTT_MESSAGES", 100_000)
	rounds := envInt(b, "FLECHT_BENCH_ROUNDS", 2)
	b.Logf("machine: %s", machine())
	load0 := loadAvg()
	type round struct {
		bridge, fanout, limit, size float64
		p50, p99                    time.Duration
	}
	var runs []round
	for range b.N {
		for r := range rounds {
			var x round
			x.bridge, x.size = benchBridgeThroughput(b, messages)
			x.fanout = benchFanout(b, messages)
			x.limit = benchTxnLimit(b, messages, int(x.size))
			x.p50, x.p99 = benchBridgeLatency(b, 1000, 20*time.Second)
			runs = append(runs, x)
			b.Logf("round %d: bridge %.0f msgs/s, fan-out %.0f msgs/s, transactional limit %.0f records/s, ratio %.2f; p50 %s, p99 %s at 1,000 msgs/s",
				r+1, x.bridge, x.fanout, x.limit, x.bridge/min(x.fanout, x.limit), x.p50.Round(100*time.Microsecond), x.p99.Round(100*time.Microsecond))
		}
	}
	med := func(f func(round) float64) float64 { return medianOf(runs, f) }
	bridge, fanout, limit := med(func(x round) float64 { return x.bridge }), med(func(x round) float64 { return x.fanout }), med(func(x round) float64 { return x.limit })
	ratio := med(func(x round) float64 { return x.bridge / min(x.fanout, x.limit) })
	p50 := med(func(x round) float64 { return float64(x.p50.Microseconds()) / 1000 })
	p99 := med(func(x round) float64 { return float64(x.p99.Microseconds()) / 1000 })
	b.ReportMetric(bridge, "msgs/s")
	b.ReportMetric(fanout, "fanout-msgs/s")
	b.ReportMetric(limit, "txn-limit-records/s")
	b.ReportMetric(ratio, "ratio")
	b.ReportMetric(p50, "p50-ms@1k/s")
	b.ReportMetric(p99, "p99-ms@1k/s")
	b.Logf("SUMMARY bridge (ACK after commit), %d messages, medians of %d alternating rounds: %.0f msgs/s publish→commit; Mosquitto fan-out to an ACK-at-once subscriber %.0f msgs/s; "+
		"Kafka transactional produce limit (ProducerPerformance, %.0f B records, 100 ms transactions, zstd) %.0f records/s; bridge/smaller limit %.2f (goal >= 0.95); "+
		"publish→visible (read_committed) at 1,000 msgs/s: p50 %.1f ms, p99 %.1f ms (goal < 25); load average before %s, after %s",
		messages, len(runs), bridge, fanout, med(func(x round) float64 { return x.size }), limit, ratio, p50, p99, load0, loadAvg())
}

// benchPublishers is how many connections publish in parallel, each
// sending QoS 1 messages one after the other (the same on both sides).
const benchPublishers = 4

// benchPublish publishes messages [0, n) over benchPublishers connections,
// payload {"n":i,"id":"m<i>","t":<publish unix ns>}.
func benchPublish(ctx context.Context, addr, prefix string, n int) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, benchPublishers)
	for c := range benchPublishers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pc, err := benchConnect(ctx, addr, fmt.Sprintf("%s-pub-%d", prefix, c), nil)
			if err != nil {
				errs <- err
				return
			}
			defer pc.Disconnect(&paho.Disconnect{})
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				payload := fmt.Appendf(nil, `{"n":%d,"id":"m%d","t":%d}`, i, i, time.Now().UnixNano())
				if _, err := pc.Publish(ctx, &paho.Publish{Topic: fmt.Sprintf("bench/%d", i%16), QoS: 1, Payload: payload}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

func benchConnect(ctx context.Context, addr, id string, onMsg func(paho.PublishReceived) (bool, error)) (*paho.Client, error) {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	cfg := paho.ClientConfig{ClientID: id, Conn: conn}
	if onMsg != nil {
		cfg.OnPublishReceived = []func(paho.PublishReceived) (bool, error){onMsg}
	}
	c := paho.NewClient(cfg)
	expiry := uint32(600)
	if _, err := c.Connect(ctx, &paho.Connect{ClientID: id, KeepAlive: 30, CleanStart: true, Properties: &paho.ConnectProperties{SessionExpiryInterval: &expiry}}); err != nil {
		return nil, fmt.Errorf("connect %s: %w", id, err)
	}
	return c, nil
}

// benchBridge starts Mosquitto and a bridge relaying bench/+ into a fresh
// raw topic; it returns the bridge and the raw topic.
func benchBridge(t *testing.T) (*proc, string) {
	m := startMosquitto(t)
	app, cfg, raw := bridgeTopics(t, 3)
	putConfig(t, cfg, "bench", relayConfig("bench/+", raw, "{payload.id}"))
	var extra []string
	if dir := os.Getenv("FLECHT_BENCH_CPUPROFILE"); dir != "" {
		path := filepath.Join(dir, app+".pprof")
		extra = append(extra, "--cpuprofile", path)
		t.Logf("CPU profile of the bridge: %s", path)
	}
	p := startSource(t, bridgeStage(t, app, cfg, m.Addr), "bench-bridge-0", extra...)
	waitSubscribedLog(t, p, app, "bench/+")
	return p, raw
}

// benchT runs f with a *testing.T of its own, so that the e2e helpers
// (built for tests) serve the benchmark; its failure fails b.
func benchT(b *testing.B, name string, f func(t *testing.T)) {
	b.Helper()
	ok := testing.RunTests(func(string, string) (bool, error) { return true, nil },
		[]testing.InternalTest{{Name: name, F: f}})
	if !ok {
		b.Fatalf("%s failed", name)
	}
}

// benchBridgeThroughput publishes n messages through the bridge and times
// from the first publish until the last is committed. It returns msgs/s
// and the bridge's mean output record size in bytes.
func benchBridgeThroughput(b *testing.B, n int) (rate, recordSize float64) {
	benchT(b, "BridgeThroughput", func(t *testing.T) {
		ctx := testCtx(t, 10*time.Minute)
		p, raw := benchBridge(t)
		mq := benchMosquittoAddr(t, p)
		start := time.Now()
		pubErr := make(chan error, 1)
		go func() { pubErr <- benchPublish(ctx, mq, "bridge", n) }()
		waitUntil(t, 10*time.Minute, fmt.Sprintf("%d messages committed", n), func() bool {
			p.alive()
			return p.metric("flechtwerk_messages_out_total") >= float64(n)
		})
		elapsed := time.Since(start)
		if err := <-pubErr; err != nil {
			t.Fatalf("publishing: %v", err)
		}
		body := p.scrape()
		recordSize = metricValue(body, "flechtwerk_message_out_bytes_sum") / metricValue(body, "flechtwerk_message_out_bytes_count")
		mean, _ := ackSeconds(body)
		txns := metricValue(body, "flechtwerk_transactions_committed_total")
		p.stop()
		// Not timed: every message committed exactly once.
		if rep := compareRelayed(readRelayed(t, raw), 0, n); rep.Missing+rep.Duplicates > 0 {
			t.Fatalf("bridge: %s", rep)
		}
		rate = float64(n) / elapsed.Seconds()
		t.Logf("bridge: %d messages in %s (%.0f msgs/s), %.0f transactions (%.0f messages each), mean receive→ack %.1f ms, mean record %.0f B",
			n, elapsed.Round(time.Millisecond), rate, txns, float64(n)/max(txns, 1), mean*1000, recordSize)
	})
	return rate, recordSize
}

// benchMosquittoAddr is the MQTT broker the bridge connected to.
func benchMosquittoAddr(t *testing.T, p *proc) string {
	m := regexp.MustCompile(`msg="MQTT connected" .*broker=([0-9.:]+)`).FindStringSubmatch(p.logs())
	if m == nil {
		t.Fatal("the bridge logged no MQTT broker")
	}
	return m[1]
}

// benchFanout publishes n messages the same way to a shared subscription
// whose subscriber ACKs at once (paho's automatic ACK), and times until it
// has all of them.
func benchFanout(b *testing.B, n int) float64 {
	b.Helper()
	var rate float64
	benchT(b, "Fanout", func(t *testing.T) {
		ctx := testCtx(t, 10*time.Minute)
		m := startMosquitto(t)
		var got atomic.Int64
		seen := make([]atomic.Bool, n)
		all := make(chan struct{})
		sub, err := benchConnect(ctx, m.Addr, "bench-fanout-sub", func(pr paho.PublishReceived) (bool, error) {
			var v struct{ N int }
			if json.Unmarshal(pr.Packet.Payload, &v) == nil && v.N >= 0 && v.N < n && !seen[v.N].Swap(true) {
				if got.Add(1) == int64(n) {
					close(all)
				}
			}
			return true, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Disconnect(&paho.Disconnect{})
		if _, err := sub.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: "$share/bench/bench/+", QoS: 1}}}); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		pubErr := make(chan error, 1)
		go func() { pubErr <- benchPublish(ctx, m.Addr, "fanout", n) }()
		select {
		case <-all:
		case err := <-pubErr:
			if err != nil {
				t.Fatalf("publishing: %v", err)
			}
			select {
			case <-all:
			case <-ctx.Done():
				t.Fatalf("fan-out: %d of %d received", got.Load(), n)
			}
		case <-ctx.Done():
			t.Fatalf("fan-out: %d of %d received", got.Load(), n)
		}
		rate = float64(n) / time.Since(start).Seconds()
		t.Logf("fan-out: %d messages, %.0f msgs/s", n, rate)
	})
	return rate
}

// benchTxnLimit is the broker's transactional produce limit
// (producerPerfLimit) into 3 partitions, as the bridge's raw topics.
func benchTxnLimit(b *testing.B, records, size int) float64 {
	return producerPerfLimit(b, records, 3, max(size, 1))
}

// benchBridgeLatency publishes at a fixed rate for d through the bridge
// and measures, per message, publish → seen by a read_committed consumer
// of the raw topic (an upper bound of publish → commit).
func benchBridgeLatency(b *testing.B, rate int, d time.Duration) (p50, p99 time.Duration) {
	benchT(b, "BridgeLatency", func(t *testing.T) {
		ctx := testCtx(t, d+5*time.Minute)
		p, raw := benchBridge(t)
		mq := benchMosquittoAddr(t, p)
		cons := client(t, kgo.ConsumeTopics(raw), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
		n := rate * int(d/time.Second)
		lat := make([]time.Duration, 0, n)
		consumed := make(chan struct{})
		go func() {
			defer close(consumed)
			for len(lat) < n && ctx.Err() == nil {
				fs := cons.PollFetches(ctx)
				now := time.Now()
				fs.EachRecord(func(r *kgo.Record) {
					var v struct {
						Data struct{ T int64 }
					}
					if json.Unmarshal(r.Value, &v) == nil && v.Data.T > 0 {
						lat = append(lat, now.Sub(time.Unix(0, v.Data.T)))
					}
				})
			}
		}()
		pc, err := benchConnect(ctx, mq, "bench-latency-pub", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer pc.Disconnect(&paho.Disconnect{})
		start := time.Now()
		for i := range n {
			due := start.Add(time.Duration(i) * time.Second / time.Duration(rate))
			if wait := time.Until(due); wait > 0 {
				time.Sleep(wait)
			}
			payload := fmt.Appendf(nil, `{"n":%d,"id":"m%d","t":%d}`, i, i, time.Now().UnixNano())
			if _, err := pc.Publish(ctx, &paho.Publish{Topic: fmt.Sprintf("bench/%d", i%16), QoS: 1, Payload: payload}); err != nil {
				t.Fatal(err)
			}
		}
		<-consumed
		if len(lat) < n {
			t.Fatalf("%d of %d messages seen", len(lat), n)
		}
		slices.Sort(lat)
		p50, p99 = lat[len(lat)/2], lat[len(lat)*99/100]
		mean, _ := ackSeconds(p.scrape())
		p.stop()
		t.Logf("latency at %d msgs/s for %s: p50 %s, p99 %s, max %s; mean receive→ack %.1f ms", rate, d, p50, p99, lat[len(lat)-1], mean*1000)
	})
	return p50, p99
}
