package demo

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/devenv"
	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/logx/logxtest"
)

// syncBuffer is safe to read while the demo writes.
type syncBuffer = logxtest.Buffer

// jsonLines parses every complete line of out as a Sample.
func jsonLines(t *testing.T, out string) []Sample {
	t.Helper()
	var samples []Sample
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var s Sample
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			t.Fatalf("line %q is not a JSON sample: %v", sc.Text(), err)
		}
		samples = append(samples, s)
	}
	return samples
}

type demoRun struct {
	env    *devenv.Env
	cancel context.CancelFunc
	done   chan struct{} // closed when Run returned err
	err    error
}

// startDemo starts both brokers on free ports and the demo on them, fast:
// many readings a second, a duplicate every 7th and poison every 23rd.
func startDemo(t *testing.T, mode Mode, out *syncBuffer) *demoRun {
	t.Helper()
	env, err := devenv.Start(context.Background(), devenv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Close() })
	d := New(Options{
		Out: out, Mode: mode, Interval: 200 * time.Millisecond,
		Devices: 4, Rate: 40, DuplicateEvery: 7, PoisonEvery: 23, StateDir: t.TempDir(),
	})
	ctx, cancel := context.WithCancel(context.Background())
	r := &demoRun{env: env, cancel: cancel, done: make(chan struct{})}
	go func() { defer close(r.done); r.err = d.Run(ctx, env) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		case <-time.After(30 * time.Second):
		}
	})
	return r
}

// stop cancels the demo and waits for Run to return.
func (r *demoRun) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	select {
	case <-r.done:
		if r.err != nil {
			t.Fatalf("Run returned %v after cancel, want nil", r.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the demo did not stop within 30s of its context ending")
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(45 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// The whole pipeline runs end to end: readings are relayed and refined,
// the re-sent ones are dropped by dedupe, poison is counted, and cancelling
// the context stops every stage cleanly, leaving nothing behind.
func TestDemoPipelineEndToEnd(t *testing.T) {
	baseline := runtime.NumGoroutine()
	out := &syncBuffer{}
	r := startDemo(t, JSON, out)

	var last Sample
	waitFor(t, "refined records, deduplication and a poison drop", func() bool {
		samples := jsonLines(t, completeLines(out.String()))
		if len(samples) == 0 {
			return false
		}
		last = samples[len(samples)-1]
		return last.Refined >= 60 && last.Deduplicated >= 2 && last.Dropped["poison"] >= 1 &&
			last.Transactions.Dedupe > 0 && last.Lag != nil && *last.Lag < 50
	})
	if last.Kafka != r.env.KafkaAddr() || last.MQTTURL != r.env.MQTTURL() {
		t.Errorf("sample names %s / %s, want %s / %s", last.Kafka, last.MQTTURL, r.env.KafkaAddr(), r.env.MQTTURL())
	}
	if last.Transactions.Bridge == 0 || last.Transactions.Dedupe == 0 {
		t.Errorf("no transactions counted: %+v", last.Transactions)
	}
	r.stop(t)

	samples := jsonLines(t, out.String())
	final := samples[len(samples)-1]
	if !final.Stopped {
		t.Fatalf("the last line is not the final sample: %+v", final)
	}
	// Everything the broker accepted was relayed or dropped as poison,
	// except what was still on its way when the bridge stopped.
	if got := final.Relayed + final.Dropped["poison"]; got > final.Published || final.Published-got > 50 {
		t.Errorf("published %d, relayed %d + poison %d", final.Published, final.Relayed, final.Dropped["poison"])
	}
	if final.Dropped["poison"] > final.PoisonPublished {
		t.Errorf("%d poison drops, but only %d poison payloads sent", final.Dropped["poison"], final.PoisonPublished)
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(r.env.KafkaAddr()))
	if err != nil {
		t.Fatal(err)
	}
	raw := readingIDs(t, cl, RawTopic)
	refined := readingIDs(t, cl, RefinedTopic)
	cl.Close()
	if int64(len(refined.all)) != final.Refined || int64(len(raw.all)) != final.Relayed {
		t.Errorf("topics hold %d raw / %d refined records, the view counted %d / %d", len(raw.all), len(refined.all), final.Relayed, final.Refined)
	}
	if len(raw.all) == len(raw.distinct) {
		t.Errorf("no duplicate reading_id in %s: dedupe had no work", RawTopic)
	}
	if len(refined.all) != len(refined.distinct) {
		t.Errorf("%s holds %d records but %d distinct reading ids", RefinedTopic, len(refined.all), len(refined.distinct))
	}
	for id := range refined.distinct {
		if !raw.distinct[id] {
			t.Errorf("refined reading %s is not in %s", id, RawTopic)
		}
	}
	// The bridge may commit a last batch the transformer no longer reads.
	if lost := len(raw.distinct) - len(refined.distinct); lost < 0 || lost > 200 {
		t.Errorf("%d raw readings not refined", lost)
	}
	if got := int64(len(raw.all) - len(refined.all)); final.Deduplicated < got-200 || final.Deduplicated > got {
		t.Errorf("deduplicated %d, topics differ by %d", final.Deduplicated, got)
	}

	addrs := []string{r.env.KafkaAddr(), r.env.MQTTAddr()}
	if err := r.env.Close(); err != nil {
		t.Fatal(err)
	}
	for _, addr := range addrs {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Errorf("%s still taken after the demo stopped: %v", addr, err)
			continue
		}
		l.Close()
	}
	noGoroutinesLeft(t, baseline)
}

type ids struct {
	all      []string
	distinct map[string]bool
}

// readingIDs reads a topic and checks every record is a relayed reading,
// keyed by its device and on the partition Kafka's partitioner gives it.
func readingIDs(t *testing.T, cl *kgo.Client, topic string) ids {
	t.Helper()
	recs, err := kafkax.ReadToEnd(context.Background(), cl, topic)
	if err != nil {
		t.Fatal(err)
	}
	out := ids{distinct: map[string]bool{}}
	for _, rec := range recs {
		var v struct {
			Data      Reading `json:"data"`
			MQTTTopic string  `json:"mqtt_topic"`
			ConfigKey string  `json:"config_key"`
		}
		if err := json.Unmarshal(rec.Value, &v); err != nil {
			t.Fatalf("%s: %v: %s", topic, err, rec.Value)
		}
		if v.Data.ReadingID == "" || string(rec.Key) != v.Data.Device || v.MQTTTopic != "sensors/"+v.Data.Device+"/events" || v.ConfigKey != ConfigKey {
			t.Fatalf("%s: unexpected record %s → %s", topic, rec.Key, rec.Value)
		}
		if rec.Partition != kafkax.Partition(rec.Key, partitions) {
			t.Fatalf("%s: key %s on partition %d", topic, rec.Key, rec.Partition)
		}
		out.all = append(out.all, v.Data.ReadingID)
		out.distinct[v.Data.ReadingID] = true
	}
	return out
}

// noGoroutinesLeft waits for the goroutine count to come back to where it
// was before the test started anything.
func noGoroutinesLeft(t *testing.T, baseline int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > baseline {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			n := runtime.Stack(buf, true)
			t.Fatalf("%d goroutines left, %d before:\n%s", runtime.NumGoroutine(), baseline, buf[:n])
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// completeLines drops a trailing partial line.
func completeLines(s string) string {
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[:i+1]
	}
	return ""
}

// On a terminal the demo draws on the alternate screen, redraws in place
// and leaves the final counts on the normal screen.
func TestDemoLiveView(t *testing.T) {
	out := &syncBuffer{}
	r := startDemo(t, Live, out)
	waitFor(t, "a frame with refined readings", func() bool {
		s := out.String()
		i := strings.LastIndex(s, cursorHome)
		return i >= 0 && refinedTotal(s[i:]) > 0
	})
	r.stop(t)
	s := out.String()
	if !strings.HasPrefix(s, enterAltScreen) {
		t.Errorf("the view does not start on the alternate screen: %q", s[:min(len(s), 40)])
	}
	for _, want := range []string{"flecht dev --demo", "published", "relayed", "refined", "deduplicated", "dropped", "lag", "transactions",
		Filter, RawTopic, RefinedTopic, ExportLine(r.env.KafkaAddr(), r.env.MQTTURL()), "Ctrl-C"} {
		if !strings.Contains(s, want) {
			t.Errorf("the live view lacks %q", want)
		}
	}
	i := strings.LastIndex(s, leaveAltScreen)
	if i < 0 {
		t.Fatal("the view never leaves the alternate screen")
	}
	summary := s[i+len(leaveAltScreen):]
	if !strings.Contains(summary, "flecht dev --demo stopped") || !strings.Contains(summary, "TOTAL") || strings.Contains(summary, "\x1b[H") {
		t.Errorf("final summary:\n%s", summary)
	}
	if refinedTotal(summary) == 0 {
		t.Errorf("the final summary shows no refined readings:\n%s", summary)
	}
}

// refinedTotal reads the TOTAL column of the "refined" row of a frame
// (rendered without colour), or -1.
func refinedTotal(frame string) int64 {
	for _, line := range strings.Split(frame, "\n") {
		line = strings.NewReplacer(eraseLine, "", eraseBelow, "", "\r", "").Replace(line)
		f := strings.Fields(strings.Trim(line, "│ "))
		if len(f) >= 4 && f[0] == "refined" && f[1] == RefinedTopic {
			n, err := strconv.ParseInt(strings.ReplaceAll(f[len(f)-1], ",", ""), 10, 64)
			if err != nil {
				return -1
			}
			return n
		}
	}
	return -1
}
