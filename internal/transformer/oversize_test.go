package transformer_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/devenv/devenvtest"
	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/metrics"
	"github.com/flecht-dev/flecht/internal/transformer"
)

// bigValue is a JSON object of about n bytes.
func bigValue(n int) []byte {
	return []byte(`{"pad":"` + strings.Repeat("x", n) + `"}`)
}

// sizedTopic creates a topic with its own max.message.bytes.
func (f *fixture) sizedTopic(name string, partitions int32, maxMessageBytes int) {
	f.t.Helper()
	if err := kafkax.CreateTopic(context.Background(), f.adm, name, partitions, map[string]string{"max.message.bytes": strconv.Itoa(maxMessageBytes)}); err != nil {
		f.t.Fatal(err)
	}
}

// produceLarge writes records of any size up to 8 MiB to partition 0.
func (f *fixture) produceLarge(topic string, recs ...*kgo.Record) {
	f.t.Helper()
	cl := devenvtest.KafkaClient(f.t, f.env, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchMaxBytes(8<<20))
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		f.t.Fatal(err)
	}
}

// A record whose output is larger than the output topic takes follows
// invalid_messages, decided in the transaction that commits its offset:
// crash names it and its size, skip skips it, dlq writes a dead letter
// that names it and leaves out the bytes that would not fit. None of them
// writes part of the record's outputs, and none keeps its state.
func TestOversizedOutputFollowsThePolicy(t *testing.T) {
	recs := []*kgo.Record{
		{Key: []byte("k1"), Value: []byte(`{"ok":1}`)},
		{Key: []byte("k1"), Value: bigValue(2 << 20)},
		{Key: []byte("k1"), Value: []byte(`{"ok":2}`)},
	}
	outcome := map[string]string{"crash": "raised", "skip": "skipped", "dlq": "dead_lettered"}
	for _, policy := range []string{"crash", "skip", "dlq"} {
		t.Run(policy, func(t *testing.T) {
			f := newFixture(t)
			f.sizedTopic("raw", 1, 8<<20)
			f.topic("refined", 1)
			f.produceLarge("raw", recs...)
			r := f.start(stageFile(t, countStage+"invalid_messages: "+policy+"\n"), t.TempDir(), "c")
			if policy == "crash" {
				select {
				case err := <-r.done:
					r.done <- err
					var inv *transformer.InvalidMessageError
					if !errorsAs(err, &inv) || inv.Topic != "raw" || inv.Partition != 0 || inv.Offset != 1 {
						t.Fatalf("want InvalidMessageError at raw/0 offset 1, got %v", err)
					}
					if !contains(err.Error(), "refined") || !contains(err.Error(), " bytes") {
						t.Errorf("the crash does not name the output topic and the size: %v", err)
					}
				case <-time.After(30 * time.Second):
					t.Fatal("crash policy did not stop the runner")
				}
				if n := len(f.read("refined")); n != 0 {
					t.Errorf("%d outputs committed despite the crash", n)
				}
				if got := metrics.Value(r.obs.MessagesInvalid.WithLabelValues("raised", "raw")); got != 1 {
					t.Errorf("messages_invalid_total{outcome=raised} = %v, want 1", got)
				}
				return
			}
			waitFor(t, 30*time.Second, "offset 3 committed", func() bool { return f.committed("count-app", "raw", 0) == 3 })
			out := f.read("refined")
			if len(out) != 2 || !contains(string(out[0].Value), `"seq":1`) || !contains(string(out[1].Value), `"seq":2`) {
				t.Fatalf("outputs %q, want the two small records with seq 1 and 2", values(out))
			}
			if got := metrics.Value(r.obs.MessagesInvalid.WithLabelValues(outcome[policy], "raw")); got != 1 {
				t.Errorf("messages_invalid_total{outcome=%s} = %v, want 1", outcome[policy], got)
			}
			if policy == "dlq" {
				dl := f.read("raw.dlq")
				if len(dl) != 1 {
					t.Fatalf("dlq holds %d records, want 1", len(dl))
				}
				d := dl[0]
				if d.Value != nil || string(d.Key) != "k1" || header(d, transformer.HeaderDLQOmitted) != "value" {
					t.Errorf("dead letter: key %q, %d value bytes, omitted %q; want key k1, no value, omitted value", d.Key, len(d.Value), header(d, transformer.HeaderDLQOmitted))
				}
				if header(d, transformer.HeaderDLQTopic) != "raw" || header(d, transformer.HeaderDLQPartition) != "0" || header(d, transformer.HeaderDLQOffset) != "1" {
					t.Errorf("dead letter does not name raw/0@1: %v", d.Headers)
				}
				if reason := header(d, transformer.HeaderDLQError); !contains(reason, "refined") || !contains(reason, "left out") {
					t.Errorf("dead-letter error %q names neither the output nor what was left out", reason)
				}
			}
			if err := r.stop(t); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A topic that takes larger records gets them: the stage's producer
// writes up to each topic's own max.message.bytes.
func TestLargeOutputFitsATopicThatTakesIt(t *testing.T) {
	f := newFixture(t)
	f.sizedTopic("raw", 1, 8<<20)
	f.sizedTopic("refined", 1, 4<<20)
	f.produceLarge("raw", &kgo.Record{Key: []byte("k1"), Value: bigValue(2 << 20)}, &kgo.Record{Key: []byte("k1"), Value: []byte(`{"ok":2}`)})
	r := f.start(stageFile(t, countStage+"invalid_messages: crash\n"), t.TempDir(), "c")
	waitFor(t, 30*time.Second, "offset 2 committed", func() bool { return f.committed("count-app", "raw", 0) == 2 })
	if out := f.read("refined"); len(out) != 2 || len(out[0].Value) < 2<<20 {
		t.Fatalf("refined holds %d records, want both with the large one whole", len(out))
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
}

// Every builtin's oversized output takes the same path: under dlq, the
// record becomes a dead letter without its value, and the stage goes on.
func TestEveryBuiltinDeadLettersAnOversizedOutput(t *testing.T) {
	f := newFixture(t)
	f.topic("cfg", 1)
	stages := map[string]string{
		"passthrough": "transform: {builtin: passthrough, output_topic: out-passthrough}",
		"count":       "transform: {builtin: count, output_topic: out-count}",
		"dedupe":      "transform: {builtin: dedupe, output_topic: out-dedupe, id: id}",
		"rekey":       "transform: {builtin: rekey, output_topic: out-rekey, key: id}",
		// missing: dlq makes enrich's own dead letter the output that is too large.
		"enrich": "config_topics: [cfg]\ntransform: {builtin: enrich, output_topic: out-enrich, lookup: id, fields: [site], into: info, missing: dlq}",
	}
	for name, tf := range stages {
		t.Run(name, func(t *testing.T) {
			in, out := "in-"+name, "out-"+name
			f.sizedTopic(in, 1, 8<<20)
			f.topic(out, 1)
			big := []byte(`{"id":"a","pad":"` + strings.Repeat("x", 2<<20) + `"}`)
			f.produceLarge(in, &kgo.Record{Key: []byte("k"), Value: big}, &kgo.Record{Key: []byte("k"), Value: []byte(`{"id":"b"}`)})
			app := "app-" + name
			st := stageFile(t, fmt.Sprintf("application_id: %s\nkind: transformer\ninput_topics: [%s]\ninvalid_messages: dlq\n%s\n", app, in, tf))
			r := f.start(st, t.TempDir(), "c-"+name)
			waitFor(t, 30*time.Second, "offset 2 committed", func() bool { return f.committed(app, in, 0) == 2 })
			dl := f.read(in + ".dlq")
			var invalid []*kgo.Record
			for _, d := range dl {
				if header(d, transformer.HeaderDLQOmitted) != "" {
					invalid = append(invalid, d)
				}
			}
			if len(invalid) != 1 || header(invalid[0], transformer.HeaderDLQOffset) != "0" || invalid[0].Value != nil {
				t.Fatalf("%s: %d dead letters without their bytes (of %d), want 1 naming offset 0", in, len(invalid), len(dl))
			}
			for _, o := range f.read(out) {
				if len(o.Value) > 1<<20 {
					t.Errorf("%s holds a record of %d bytes", out, len(o.Value))
				}
			}
			if err := r.stop(t); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func values(recs []*kgo.Record) []string {
	var out []string
	for _, r := range recs {
		v := string(r.Value)
		if len(v) > 80 {
			v = v[:80] + "…"
		}
		out = append(out, v)
	}
	return out
}
