//go:build e2e

package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/transformer"
)

// A 10 MB record through count to an output topic that takes 1 MiB
// (Kafka's default) follows invalid_messages on a real broker: dlq writes a
// dead letter naming it without its bytes and goes on, crash exits naming
// it and stays at its offset across a restart; an output topic that takes
// 20 MiB gets the record whole.
func TestRunnerOversizedRecords(t *testing.T) {
	big := []byte(`{"pad":"` + strings.Repeat("x", 10<<20) + `"}`)
	small := func(i int) *kgo.Record {
		return &kgo.Record{Key: []byte("k"), Value: []byte(`{"n":` + string(rune('0'+i)) + `}`)}
	}
	for _, c := range []struct{ name, policy, outMax string }{
		{"dlq", "dlq", ""},
		{"crash", "crash", ""},
		{"output-takes-20MiB", "crash", "20971520"},
	} {
		t.Run(c.name, func(t *testing.T) {
			app, in, out := topicName(t, "app"), topicName(t, "in"), topicName(t, "out")
			createTopic(t, in, 1, map[string]string{"max.message.bytes": "31457280"})
			var outCfg map[string]string
			if c.outMax != "" {
				outCfg = map[string]string{"max.message.bytes": c.outMax}
			}
			createTopic(t, out, 1, outCfg)
			prod := client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchMaxBytes(30<<20))
			recs := []*kgo.Record{small(1), {Key: []byte("k"), Value: big}, small(2)}
			for _, r := range recs {
				r.Topic = in
			}
			if err := prod.ProduceSync(testCtx(t, time.Minute), recs...).FirstErr(); err != nil {
				t.Fatal(err)
			}
			stageFile := countStage(t, app, in, out, c.policy, 500)
			adm := admin(t)
			stateDir := t.TempDir()
			p := startRun(t, stageFile, "oversize-0", stateDir)

			if c.name == "crash" {
				if code := p.wait(2 * time.Minute); code == 0 || !strings.Contains(p.logs(), "invalid message at "+in+"/0 offset 1") || !strings.Contains(p.logs(), " bytes") {
					t.Fatalf("exit %d, want a failure naming %s/0 offset 1 and the size; stderr:\n%s", code, in, tail(p.logs(), 20))
				}
				// The record before it may have shared its transaction,
				// which then did not commit either: what is in the output
				// is exactly what the committed offset says was read.
				at := max(committedAt(t, adm, app, in, 0), 0)
				if at > 1 {
					t.Fatalf("committed offset %d after the crash, want at most 1", at)
				}
				p = startRun(t, stageFile, "oversize-0", stateDir)
				if code := p.wait(2 * time.Minute); code == 0 || !strings.Contains(p.logs(), "invalid message at "+in+"/0 offset 1") {
					t.Fatalf("restart: exit %d, stderr:\n%s", code, tail(p.logs(), 20))
				}
				if outs := readAll(t, out); int64(len(outs)) != max(committedAt(t, adm, app, in, 0), 0) {
					t.Fatalf("%d outputs for committed offset %d", len(outs), committedAt(t, adm, app, in, 0))
				}
				return
			}

			waitCommitted(t, adm, app, in, 3, 2*time.Minute, p)
			p.stop()
			outs := readAll(t, out)
			if c.outMax != "" {
				if len(outs) != 3 || len(outs[1].Value) < 10<<20 {
					t.Fatalf("%d outputs, want 3 with the 10 MB one whole", len(outs))
				}
				return
			}
			if len(outs) != 2 || !strings.Contains(string(outs[1].Value), `"seq":2`) {
				t.Fatalf("%d outputs, want 2 (seq 1 and 2)", len(outs))
			}
			dl := readAll(t, in+".dlq")
			if len(dl) != 1 {
				t.Fatalf("%s holds %d records, want 1", in+".dlq", len(dl))
			}
			d := dl[0]
			if d.Value != nil || header(d, transformer.HeaderDLQOmitted) != "value" || header(d, transformer.HeaderDLQTopic) != in ||
				header(d, transformer.HeaderDLQPartition) != "0" || header(d, transformer.HeaderDLQOffset) != "1" {
				t.Fatalf("dead letter: %d value bytes, headers %v", len(d.Value), d.Headers)
			}
			t.Logf("dlq error=%q", header(d, transformer.HeaderDLQError))
		})
	}
}

func header(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}
