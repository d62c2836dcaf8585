//go:build e2e

package e2e

import (
	"encoding/json"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/lineage"
	"github.com/flecht-dev/flecht/internal/module/moduletest"
)

// verifyReport is the part of `flecht verify -o json` the tests read.
type verifyReport struct {
	Findings []struct {
		Kind    string `json:"kind"`
		Record  string `json:"record"`
		Message string `json:"message"`
	} `json:"findings"`
	Total             int    `json:"findings_total"`
	Records           int64  `json:"records"`
	ContentChecked    bool   `json:"content_checked"`
	ContentNotChecked string `json:"content_not_checked"`
}

func (r verifyReport) named() string {
	var out []string
	for _, f := range r.Findings {
		out = append(out, f.Kind+" "+f.Record)
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}

// runVerify runs `flecht verify -f stage -o json` in env.
func runVerify(t *testing.T, env []string, stage string) (verifyReport, int) {
	t.Helper()
	out, errOut, code := runFlechtEnv(t, env, "", "verify", "-f", stage, "-o", "json")
	var rep verifyReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("verify: exit %d, %v\n%s\n%s", code, err, out, errOut)
	}
	return rep, code
}

// On real Kafka, the outputs of a real runner (the count module): verify
// finds them clean, the content rerun included; then, with four faults
// injected into them, it names each and nothing else:
//
//   - a record appended by a plain, non-transactional producer (no_lineage);
//   - a record removed: Kafka deletes a partition's records only before an
//     offset (DeleteRecords; a partition cannot be re-created alone), so the
//     first two outputs of partition 0 go, and the second one's source is
//     a gap (missing);
//   - a changed value: the first of them written back, transactionally,
//     with its lineage headers and another seq (changed, naming the field);
//   - a duplicate generation: three real outputs written again with their
//     lineage headers, transactionally (duplicate, each).
func TestVerifyNamesInjectedFaults(t *testing.T) {
	const records, keys = 3000, 40
	ctx := testCtx(t, 2*time.Minute)
	app, in, out := topicName(t, "app"), topicName(t, "raw"), topicName(t, "out")
	createTopic(t, in, 2, nil)
	createTopic(t, out, 2, nil)
	rpProduce(t, in, records, keys)
	stage := moduleStageFile(t, app, in, out, moduletest.Example(t, "count"), "")
	p := startRun(t, stage, "faults-0", t.TempDir())
	waitCommitted(t, admin(t), app, in, records, 2*time.Minute, p)
	p.stop()
	env := append(cacheEnv(t), "FLECHT_BROKERS="+brokers, "NO_COLOR=1", "HOME="+t.TempDir())

	start := time.Now()
	rep, code := runVerify(t, env, stage)
	if code != 0 || rep.Total != 0 || !rep.ContentChecked || rep.Records != records {
		t.Fatalf("a real runner's outputs: exit %d, %d records, content checked %v (%s), findings:\n%s", code, rep.Records, rep.ContentChecked, rep.ContentNotChecked, rep.named())
	}
	t.Logf("verify of %d outputs, content checked: %s", rep.Records, time.Since(start).Round(time.Millisecond))

	var p0, p1 []*kgo.Record
	if _, err := kafkax.ReadFrom(ctx, client(t), []string{out}, kafkax.FromLogStart, nil, func(r *kgo.Record) error {
		if r.Partition == 0 {
			p0 = append(p0, r)
		} else {
			p1 = append(p1, r)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	place := func(r *kgo.Record) string {
		return lineage.Source{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}.String()
	}
	txn := client(t, kgo.TransactionalID(app+"-intruder"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	write := func(recs ...*kgo.Record) {
		t.Helper()
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := txn.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := txn.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatal(err)
		}
	}
	again := func(r *kgo.Record) *kgo.Record {
		return &kgo.Record{Topic: r.Topic, Partition: r.Partition, Key: r.Key, Value: r.Value, Headers: r.Headers}
	}

	plain := &kgo.Record{Topic: out, Partition: 1, Key: p1[0].Key, Value: p1[0].Value}
	if err := client(t, kgo.RecordPartitioner(kgo.ManualPartitioner())).ProduceSync(ctx, plain).FirstErr(); err != nil {
		t.Fatal(err)
	}
	var del kadm.Offsets
	del.Add(kadm.Offset{Topic: out, Partition: 0, At: p0[1].Offset + 1})
	if _, err := admin(t).DeleteRecords(ctx, del); err != nil {
		t.Fatal(err)
	}
	gone, _, _ := lineage.Read(p0[1].Headers)
	var v map[string]any
	if err := json.Unmarshal(p0[0].Value, &v); err != nil {
		t.Fatal(err)
	}
	v["seq"] = 999_999
	changed := again(p0[0])
	if changed.Value, _ = json.Marshal(v); string(changed.Value) == string(p0[0].Value) {
		t.Fatal("the changed value is not changed")
	}
	dups := []*kgo.Record{again(p1[5]), again(p1[6]), again(p1[7])}
	write(append([]*kgo.Record{changed}, dups...)...)

	rep, code = runVerify(t, env, stage)
	want := []string{"no_lineage " + place(plain), "missing " + gone.Source.String(), "changed " + place(changed)}
	for _, d := range dups {
		want = append(want, "duplicate "+place(d))
	}
	sort.Strings(want)
	if code != 4 || rep.named() != strings.Join(want, "\n") || !rep.ContentChecked {
		t.Fatalf("exit %d, content checked %v, findings:\n%s\nwant:\n%s", code, rep.ContentChecked, rep.named(), strings.Join(want, "\n"))
	}
	for _, f := range rep.Findings {
		if f.Kind == "changed" && !strings.Contains(f.Message, "field $.seq differs") {
			t.Errorf("the changed field is not named: %s", f.Message)
		}
	}
}
