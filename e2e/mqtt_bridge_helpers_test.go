//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/tlsclient"
)

// Helpers for the source-stage proofs (the MQTT bridge and http-poll):
// `flecht run` as real processes, numbered MQTT publishers that survive a
// broker restart, and readers of the raw topics. Names carry a "src" prefix
// so they never collide with the other e2e files of this package.

// startSource runs `flecht run -f stage` with metrics on a free loopback
// port and the short group session timeout; extra flags follow.
func startSource(t *testing.T, stage, clientID string, extra ...string) *proc {
	t.Helper()
	args := append([]string{"run", "-f", stage, "--client-id", clientID, "-b", brokers,
		"--metrics-listen", "127.0.0.1:0", "--session-timeout", testSessionTimeout}, extra...)
	return startProc(t, clientID, false, nil, args...)
}

// writeStage writes a stage file and returns its path.
func writeStage(t *testing.T, yaml string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "stage.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// bridgeStage is an mqtt stage file; extraMQTT adds lines under mqtt:.
func bridgeStage(t *testing.T, app, configTopic, mqttAddr string, extraMQTT ...string) string {
	t.Helper()
	return mqttStage(t, app, configTopic, "mqtt://"+mqttAddr, extraMQTT...)
}

// mqttStage is an mqtt-relay stage file for the broker at url.
func mqttStage(t *testing.T, app, configTopic, url string, extraMQTT ...string) string {
	t.Helper()
	mq := fmt.Sprintf("  url: \"%s\"\n  session_expiry: 1h\n", url)
	for _, l := range extraMQTT {
		mq += "  " + l + "\n"
	}
	return writeStage(t, fmt.Sprintf("application_id: %s\nkind: mqtt\nconfig_topics: [%s]\nextract: {builtin: mqtt-relay}\npoll_interval: 1s\nmqtt:\n%s", app, configTopic, mq))
}

// putConfig writes a config record (nil value: a tombstone).
func putConfig(t *testing.T, topic, key string, value any) {
	t.Helper()
	var v []byte
	if value != nil {
		b, err := json.Marshal(value)
		if err != nil {
			t.Fatal(err)
		}
		v = b
	}
	cl := client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	n := 1
	if d, err := kafkax.DescribeTopics(testCtx(t, 30*time.Second), admin(t), topic); err == nil {
		n = len(d[topic].Partitions)
	}
	rec := &kgo.Record{Topic: topic, Key: []byte(key), Value: v, Partition: kafkax.Partition([]byte(key), n)}
	if err := cl.ProduceSync(testCtx(t, 30*time.Second), rec).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// relayConfig is an mqtt-relay config record.
func relayConfig(filter, output, key string) map[string]any {
	return map[string]any{"topic": filter, "output_topic": output, "key": key, "qos": 1, "payload": "json"}
}

// hasMsg reports whether a log line is msg=<msg>, bare or quoted.
func hasMsg(line, msg string) bool {
	return strings.Contains(line, " msg="+msg+" ") || strings.Contains(line, ` msg="`+msg+`" `)
}

// logged reports whether a log line has msg=<msg> and every given k=v.
func logged(logs, msg string, kv ...string) bool {
	for line := range strings.SplitSeq(logs, "\n") {
		if !hasMsg(line, msg) {
			continue
		}
		all := true
		for _, x := range kv {
			if !strings.Contains(line, " "+x+" ") && !strings.HasSuffix(line, " "+x) {
				all = false
			}
		}
		if all {
			return true
		}
	}
	return false
}

// waitSubscribedLog waits until the bridge has logged its subscription to
// filter (the broker acknowledged the SUBSCRIBE).
func waitSubscribedLog(t *testing.T, p *proc, app, filter string) {
	t.Helper()
	waitUntil(t, 60*time.Second, p.name+" to subscribe "+filter, func() bool {
		p.alive()
		return logged(p.logs(), "subscribed", "filter=$share/"+app+"/"+filter)
	})
}

// relayedRec is one record of a raw topic written by the bridge.
type relayedRec struct {
	N          int
	Key        string
	Topic      string
	ReceivedAt time.Time
	Partition  int32
	Offset     int64
}

// readRelayed reads a raw topic read_committed and decodes each value's
// data.n, mqtt_topic and received_at.
func readRelayed(t *testing.T, topic string) []relayedRec {
	t.Helper()
	recs, err := kafkax.ReadToEnd(testCtx(t, 3*time.Minute), client(t), topic)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]relayedRec, 0, len(recs))
	for _, r := range recs {
		var v struct {
			Data       struct{ N *int }
			MQTTTopic  string `json:"mqtt_topic"`
			ReceivedAt string `json:"received_at"`
		}
		if err := json.Unmarshal(r.Value, &v); err != nil || v.Data.N == nil {
			t.Fatalf("record %s/%d@%d does not decode: %v: %s", r.Topic, r.Partition, r.Offset, err, r.Value)
		}
		at, err := time.Parse(time.RFC3339Nano, v.ReceivedAt)
		if err != nil {
			t.Fatalf("received_at %q: %v", v.ReceivedAt, err)
		}
		out = append(out, relayedRec{N: *v.Data.N, Key: string(r.Key), Topic: v.MQTTTopic, ReceivedAt: at, Partition: r.Partition, Offset: r.Offset})
	}
	return out
}

// countRelayed counts each number in a raw topic.
func countRelayed(recs []relayedRec) map[int]int {
	seen := make(map[int]int, len(recs))
	for _, r := range recs {
		seen[r.N]++
	}
	return seen
}

// relayReport compares a raw topic with the numbers published [from, to).
type relayReport struct {
	Published, Records, Missing, Duplicates int
	MissingSample                           []int
	Duplicated                              []int
	missingAll                              []int
}

func (r relayReport) String() string {
	return fmt.Sprintf("published %d, records %d, missing %d, duplicates %d", r.Published, r.Records, r.Missing, r.Duplicates)
}

// without discounts the missing numbers in skip (known not delivered).
func (r relayReport) without(skip map[int]bool) relayReport {
	out := r
	out.Missing, out.MissingSample = 0, nil
	for _, n := range r.missingAll {
		if skip[n] {
			continue
		}
		out.Missing++
		if len(out.MissingSample) < 20 {
			out.MissingSample = append(out.MissingSample, n)
		}
	}
	return out
}

func compareRelayed(recs []relayedRec, from, to int) relayReport {
	seen := countRelayed(recs)
	rep := relayReport{Published: to - from, Records: len(recs)}
	for n := from; n < to; n++ {
		switch c := seen[n]; {
		case c == 0:
			rep.Missing++
			rep.missingAll = append(rep.missingAll, n)
			if len(rep.MissingSample) < 20 {
				rep.MissingSample = append(rep.MissingSample, n)
			}
		case c > 1:
			rep.Duplicates += c - 1
			rep.Duplicated = append(rep.Duplicated, n)
		}
	}
	sort.Ints(rep.Duplicated)
	return rep
}

// mqttPub is a QoS 1 publisher that reconnects and retries a publish that
// failed (a broker restart); retried numbers may arrive twice, so it keeps
// them to tell its own duplicates from the bridge's.
type mqttPub struct {
	t       *testing.T
	addr    string
	id      string
	tls     *tls.Config // nil: plain MQTT
	mu      sync.Mutex
	c       *paho.Client
	retried map[int]bool
	// unrouted are numbers the broker answered "no matching subscribers"
	// (PUBACK 0x10): accepted, but dropped for want of a subscription.
	unrouted map[int]bool
}

func newMQTTPub(t *testing.T, addr, id string) *mqttPub {
	p := &mqttPub{t: t, addr: addr, id: id, retried: map[int]bool{}, unrouted: map[int]bool{}}
	t.Cleanup(func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.c != nil {
			_ = p.c.Disconnect(&paho.Disconnect{})
		}
	})
	return p
}

func (p *mqttPub) connect(ctx context.Context) error {
	var conn net.Conn
	var err error
	if p.tls != nil {
		conn, err = (&tls.Dialer{NetDialer: &net.Dialer{Timeout: 2 * time.Second}, Config: p.tls}).DialContext(ctx, "tcp", p.addr)
		if err == nil {
			conn = tlsclient.NewConn(conn.(*tls.Conn)) // paho needs a packet's writes kept together
		}
	} else {
		conn, err = (&net.Dialer{Timeout: 2 * time.Second}).DialContext(ctx, "tcp", p.addr)
	}
	if err != nil {
		return err
	}
	c := paho.NewClient(paho.ClientConfig{ClientID: p.id, Conn: conn})
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	ca, err := c.Connect(cctx, &paho.Connect{ClientID: p.id, KeepAlive: 30, CleanStart: true})
	if err != nil {
		_ = conn.Close()
		return err
	}
	if ca.ReasonCode >= 0x80 {
		_ = conn.Close()
		return fmt.Errorf("connect refused: %d", ca.ReasonCode)
	}
	p.c = c
	return nil
}

// publish sends one numbered QoS 1 message, retrying across reconnects
// until the broker acknowledged it or ctx ends.
func (p *mqttPub) publish(ctx context.Context, topic string, n int, payload []byte) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for attempt := 0; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		if p.c == nil {
			if err := p.connect(ctx); err != nil {
				time.Sleep(50 * time.Millisecond) // the broker is restarting
				continue
			}
		}
		// paho keeps a QoS 1 publish of a dropped connection for a resend
		// that never comes (each connection is a new client), so give up
		// on it as soon as the connection is gone.
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		go func(c *paho.Client) {
			select {
			case <-c.Done():
				cancel()
			case <-pctx.Done():
			}
		}(p.c)
		resp, err := p.c.Publish(pctx, &paho.Publish{Topic: topic, QoS: 1, Payload: payload})
		cancel()
		if err == nil && (resp == nil || resp.ReasonCode < 0x80) {
			if attempt > 0 {
				p.retried[n] = true
			}
			if resp != nil && resp.ReasonCode == 0x10 {
				p.unrouted[n] = true
			}
			return nil
		}
		_ = p.c.Disconnect(&paho.Disconnect{})
		p.c = nil
	}
}

func (p *mqttPub) unroutedNumbers() map[int]bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.unrouted)
}

func (p *mqttPub) retriedNumbers() map[int]bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[int]bool, len(p.retried))
	for n := range p.retried {
		out[n] = true
	}
	return out
}

// publishPaced publishes the messages 0 … total-1 (numbered) from a
// goroutine, message n to sensors/dev-<n%10>/events no sooner than
// publishFor·n/total after the start: paced, so that what a test does
// meanwhile (a kill, a restart) falls while publishing goes on. published
// counts the messages published; done gets nil, or the first error, when
// the goroutine ends.
func publishPaced(ctx context.Context, pub *mqttPub, total int, publishFor time.Duration) (published *atomic.Int64, done <-chan error) {
	published = new(atomic.Int64)
	errc := make(chan error, 1)
	start := time.Now()
	go func() {
		for n := range total {
			if ahead := time.Until(start.Add(publishFor * time.Duration(n) / time.Duration(total))); ahead > 0 {
				time.Sleep(ahead)
			}
			if err := pub.publish(ctx, fmt.Sprintf("sensors/dev-%d/events", n%10), n, numbered(n)); err != nil {
				errc <- err
				return
			}
			published.Store(int64(n + 1))
		}
		errc <- nil
	}()
	return published, errc
}

// numbered is the payload of message n: the id the raw topic is checked by.
func numbered(n int) []byte { return fmt.Appendf(nil, `{"n":%d,"id":"m%d"}`, n, n) }

// ackSeconds reads the bridge's receive→ACK histogram: mean and count.
func ackSeconds(body string) (mean float64, count float64) {
	sum := metricValue(body, "flechtwerk_mqtt_ack_seconds_sum")
	count = metricValue(body, "flechtwerk_mqtt_ack_seconds_count")
	if count > 0 {
		mean = sum / count
	}
	return mean, count
}

// waitAllRelayed waits until every number in [0, total) is in the raw
// topic; on timeout it reports what is missing and the bridge's counters.
func waitAllRelayed(t *testing.T, p *proc, raw string, total int, d time.Duration) ([]relayedRec, relayReport) {
	t.Helper()
	return waitRelayedExcept(t, p, raw, total, nil, d)
}

// waitRelayedExcept is waitAllRelayed for every number not in except.
func waitRelayedExcept(t *testing.T, p *proc, raw string, total int, except func() map[int]bool, d time.Duration) ([]relayedRec, relayReport) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		p.alive()
		recs := readRelayed(t, raw)
		rep := compareRelayed(recs, 0, total)
		if except != nil {
			rep = rep.without(except())
		}
		if rep.Missing == 0 {
			return recs, rep
		}
		if time.Now().After(deadline) {
			body := p.scrape()
			var lines []string
			for line := range strings.SplitSeq(body, "\n") {
				if strings.HasPrefix(line, "flechtwerk_mqtt") || strings.HasPrefix(line, "flechtwerk_messages_out_total") || strings.HasPrefix(line, "flechtwerk_transactions") {
					lines = append(lines, line)
				}
			}
			p.dumpGoroutines()
			t.Fatalf("after %s: %s, missing e.g. %v\nbridge metrics:\n%s", d, rep, rep.MissingSample, strings.Join(lines, "\n"))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// duplicatesPerEvent attributes every extra copy of a message to the one
// event (a kill, a broker restart) between it and the copy before it, by
// receive time, and counts them per event. A pair of copies with no event
// between them, or several, fails the test: a duplicate without a crash or
// a reconnect, or an ACK lost across restarts.
func duplicatesPerEvent(t *testing.T, recs []relayedRec, duplicated []int, events []time.Time, what string) []int {
	t.Helper()
	copies := map[int][]relayedRec{}
	for _, r := range recs {
		copies[r.N] = append(copies[r.N], r)
	}
	per := make([]int, len(events))
	for _, n := range duplicated {
		c := copies[n]
		sort.Slice(c, func(i, j int) bool { return c[i].ReceivedAt.Before(c[j].ReceivedAt) })
		for j := 1; j < len(c); j++ {
			var spanned []int
			for i, at := range events {
				if c[j-1].ReceivedAt.Before(at) && !c[j].ReceivedAt.Before(at) {
					spanned = append(spanned, i)
				}
			}
			if len(spanned) != 1 {
				t.Errorf("message %d: copies received at %s and %s lie %d %s apart, want 1",
					n, c[j-1].ReceivedAt.Format(time.RFC3339Nano), c[j].ReceivedAt.Format(time.RFC3339Nano), len(spanned), what)
				continue
			}
			per[spanned[0]]++
		}
	}
	return per
}
