//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/lineage"
)

// verifyReport is the part of `flecht verify -o json` the test reads.
type verifyReport struct {
	Findings []struct {
		Kind   string `json:"kind"`
		Record string `json:"record"`
	} `json:"findings"`
	Total          int  `json:"findings_total"`
	ContentChecked bool `json:"content_checked"`
}

func (r verifyReport) named() string {
	var out []string
	for _, f := range r.Findings {
		out = append(out, f.Kind+" "+f.Record)
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}

// On real Kafka, with records written as a stage writes them (lineage
// headers, transactions, offsets with their generation): verify finds a
// clean stage clean, then names each injected fault and nothing else; and
// trace follows an output to the raw record's origin.
func TestVerifyNamesInjectedFaults(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)
	raw, refined, app := topicName(t, "raw"), topicName(t, "refined"), topicName(t, "app")
	createTopic(t, raw, 2, nil)
	createTopic(t, refined, 2, nil)
	txn := client(t, kgo.TransactionalID(app+"-0"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
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
	const n = 20
	var raws []*kgo.Record
	for i := range n {
		raws = append(raws, &kgo.Record{Topic: raw, Partition: int32(i % 2), Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(fmt.Sprintf(`{"n":%d}`, i)),
			Headers: []kgo.RecordHeader{{Key: lineage.HeaderOrigin, Value: []byte(lineage.MQTTOrigin("sensors/k" + fmt.Sprint(i)))}}})
	}
	write(raws...)
	output := func(r *kgo.Record) *kgo.Record {
		st := lineage.Stamp{Source: lineage.Source{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}, Logic: lineage.BuiltinLogic("passthrough", "test"), Generation: 1}
		return &kgo.Record{Topic: refined, Partition: r.Partition, Key: r.Key, Value: r.Value, Headers: st.Headers()}
	}
	var outs []*kgo.Record
	for _, r := range raws {
		outs = append(outs, output(r))
	}
	write(outs...)
	// The offsets commit the first n-2 sources: the last one of each
	// partition is not committed yet, and its output must not exist.
	next := map[int32]int64{}
	for _, r := range raws[:n-2] {
		next[r.Partition] = r.Offset + 1
	}
	var offs kadm.Offsets
	for p, at := range next {
		offs.Add(kadm.Offset{Topic: raw, Partition: p, At: at, LeaderEpoch: -1, Metadata: lineage.OffsetMetadata(1)})
	}
	if _, err := admin(t).CommitOffsets(ctx, app, offs); err != nil {
		t.Fatal(err)
	}
	stage := filepath.Join(t.TempDir(), "stage.yaml")
	if err := os.WriteFile(stage, []byte(fmt.Sprintf("application_id: %s\nkind: transformer\ninput_topics: [%s]\ntransform:\n  builtin: passthrough\n  output_topic: %s\n", app, raw, refined)), 0o600); err != nil {
		t.Fatal(err)
	}
	verify := func() (verifyReport, int) {
		t.Helper()
		out, errOut, code := runFlecht(t, "", "verify", "-f", stage, "-o", "json")
		var rep verifyReport
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("verify: exit %d, %v\n%s\n%s", code, err, out, errOut)
		}
		return rep, code
	}
	place := func(r *kgo.Record) string {
		return lineage.Source{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}.String()
	}

	// The outputs of the two uncommitted sources are the first finding.
	rep, code := verify()
	want := []string{"past_committed " + place(outs[n-2]), "past_committed " + place(outs[n-1])}
	sort.Strings(want)
	if code != 4 || rep.named() != strings.Join(want, "\n") || rep.ContentChecked {
		t.Fatalf("exit %d, findings:\n%s\nwant:\n%s", code, rep.named(), strings.Join(want, "\n"))
	}
	offs = kadm.Offsets{}
	for p := range int32(2) {
		offs.Add(kadm.Offset{Topic: raw, Partition: p, At: raws[n-2+int(p)].Offset + 1, LeaderEpoch: -1, Metadata: lineage.OffsetMetadata(1)})
	}
	if _, err := admin(t).CommitOffsets(ctx, app, offs); err != nil {
		t.Fatal(err)
	}
	if rep, code := verify(); code != 0 || rep.Total != 0 {
		t.Fatalf("a clean stage: exit %d, findings:\n%s", code, rep.named())
	}

	// Faults: a plain producer's record, and a duplicate.
	plain := &kgo.Record{Topic: refined, Partition: 1, Key: []byte("k1"), Value: []byte(`{"n":1}`)}
	if err := client(t, kgo.RecordPartitioner(kgo.ManualPartitioner())).ProduceSync(ctx, plain).FirstErr(); err != nil {
		t.Fatal(err)
	}
	dup := output(raws[4])
	write(dup)
	rep, code = verify()
	want = []string{"duplicate " + place(dup), "no_lineage " + place(plain)}
	if code != 4 || rep.named() != strings.Join(want, "\n") {
		t.Fatalf("exit %d, findings:\n%s\nwant:\n%s", code, rep.named(), strings.Join(want, "\n"))
	}

	// trace from the duplicate reaches the raw record's MQTT origin.
	out, errOut, code := runFlecht(t, "", "trace", place(dup), "-o", "json")
	var chains []struct {
		Hops []struct {
			Record string `json:"record"`
		} `json:"hops"`
		End       string `json:"end"`
		EndDetail string `json:"end_detail"`
	}
	if err := json.Unmarshal([]byte(out), &chains); err != nil || code != 0 || len(chains) != 1 {
		t.Fatalf("trace: exit %d, %v\n%s\n%s", code, err, out, errOut)
	}
	if c := chains[0]; len(c.Hops) != 2 || c.Hops[1].Record != place(raws[4]) || c.End != "origin" || c.EndDetail != "mqtt:sensors/k4" {
		t.Fatalf("trace: %+v", c)
	}
}
