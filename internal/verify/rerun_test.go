package verify_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/devenv/devenvtest"
	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/lineage"
	"github.com/flecht-dev/flecht/internal/stagefile"
	"github.com/flecht-dev/flecht/internal/transformer"
	"github.com/flecht-dev/flecht/internal/transformer/builtin"
	"github.com/flecht-dev/flecht/internal/verify"
)

const countStage = "application_id: cnt\nkind: transformer\ninput_topics: [c.raw]\nstate_key: \"{key}\"\ncommit_interval: 50ms\ntransform: {builtin: count, output_topic: c.out}\n"

// A real runner's outputs, audited with the offline engine's rerun: clean
// and content checked; then a changed value, an output removed, an output
// the logic does not make and one written twice are each named with its
// record, once.
func TestContentCheckOnARealRunner(t *testing.T) {
	env := devenvtest.Start(t)
	cluster := &kafkax.Cluster{Brokers: []string{env.KafkaAddr()}}
	cl := devenvtest.KafkaClient(t, env)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := kadm.NewClient(cl)
	for _, topic := range []string{"c.raw", "c.out"} {
		if err := kafkax.CreateTopic(ctx, adm, topic, 2, nil); err != nil {
			t.Fatal(err)
		}
	}
	const inputs = 40
	var recs []*kgo.Record
	for i := range inputs {
		recs = append(recs, &kgo.Record{Topic: "c.raw", Key: fmt.Appendf(nil, "k%d", i%5), Value: fmt.Appendf(nil, `{"i":%d}`, i)})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "cnt.yaml")
	if err := os.WriteFile(path, []byte(countStage), 0o600); err != nil {
		t.Fatal(err)
	}
	runToEnd(ctx, t, cluster, adm, path, inputs)

	audit := func() *verify.Report {
		t.Helper()
		req, err := verify.ForStage(path, "", verify.Engine{Cluster: cluster})
		if err != nil {
			t.Fatal(err)
		}
		rep, err := verify.Run(ctx, cl, req)
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	rep := audit()
	want(t, rep)
	if !rep.ContentChecked || rep.Records != inputs || len(rep.Notes) != 0 {
		t.Fatalf("a real runner's outputs: content checked %v (%q), %d records, notes %q", rep.ContentChecked, rep.ContentNotChecked, rep.Records, rep.Notes)
	}

	out, err := kafkax.ReadToEnd(ctx, cl, "c.out")
	if err != nil {
		t.Fatal(err)
	}
	// The first two records of partition 0 are removed (Kafka deletes a
	// partition's records before an offset); the first is written back
	// with another value, the second stays gone.
	var p0 []*kgo.Record
	var other *kgo.Record
	for _, r := range out {
		if r.Partition == 0 {
			p0 = append(p0, r)
		} else if other == nil {
			other = r
		}
	}
	var del kadm.Offsets
	del.Add(kadm.Offset{Topic: "c.out", Partition: 0, At: p0[1].Offset + 1})
	if _, err := adm.DeleteRecords(ctx, del); err != nil {
		t.Fatal(err)
	}
	removed, _, _ := lineage.Read(p0[1].Headers)
	// The changed value and an output of no key the logic makes, with the
	// lineage of real outputs, committed in a transaction.
	txn := devenvtest.KafkaClient(t, env, kgo.TransactionalID("intruder"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	changed := &kgo.Record{Topic: "c.out", Partition: 0, Key: p0[0].Key, Value: []byte(`{"count":999}`), Headers: p0[0].Headers}
	extra := &kgo.Record{Topic: "c.out", Partition: 1, Key: []byte("nobody"), Value: other.Value, Headers: other.Headers}
	again := &kgo.Record{Topic: "c.out", Partition: 1, Key: other.Key, Value: other.Value, Headers: other.Headers}
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := txn.ProduceSync(ctx, changed, extra, again).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := txn.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	rep = audit()
	place := func(r *kgo.Record) string {
		return lineage.Source{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}.String()
	}
	want(t, rep, "changed "+place(changed), "unexpected "+place(extra), "missing "+removed.Source.String(), "duplicate "+place(again))
	for _, f := range rep.Findings {
		if f.Kind == verify.KindChanged && !strings.Contains(f.Message, "field $.count differs") {
			t.Errorf("the changed field is not named: %s", f.Message)
		}
	}
}

// runToEnd runs the stage in a real runner until it committed every input.
func runToEnd(ctx context.Context, t *testing.T, cluster *kafkax.Cluster, adm *kadm.Client, path string, inputs int64) {
	t.Helper()
	st, err := stagefile.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	r := transformer.NewRunner(transformer.Options{Stage: st, Cluster: cluster, ClientID: "runner", StateDir: t.TempDir(), SessionTimeout: 6 * time.Second})
	tf, err := builtin.NewTransformer(st.Transform, builtin.Env{Configs: r.Configs()})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(runCtx, tf) }()
	for {
		var n int64
		if offs, err := adm.FetchOffsets(ctx, st.ApplicationID); err == nil {
			offs.Each(func(o kadm.OffsetResponse) { n += o.At })
		}
		if n >= inputs {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the runner committed %d of %d inputs", n, inputs)
		}
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestLineageOffIsRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "off.yaml")
	if err := os.WriteFile(path, []byte(countStage+"lineage: false\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := verify.ForStage(path, "", verify.Engine{})
	if exitcode.Code(err) != exitcode.Usage || !strings.Contains(err.Error(), "lineage: false") {
		t.Fatalf("a stage without lineage: %v (exit %d)", err, exitcode.Code(err))
	}
}

// A module stage's own module file that does not read leaves the content
// unchecked, saying why; a --module that does not read is a usage error,
// and so is a --module for a builtin stage.
func TestForStageModuleFiles(t *testing.T) {
	dir := t.TempDir()
	mod := filepath.Join(dir, "mod.yaml")
	if err := os.WriteFile(mod, []byte("application_id: m\nkind: transformer\ninput_topics: [in]\ntransform:\n  module: gone.wasm\n  output_topics: [out]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	req, err := verify.ForStage(mod, "", verify.Engine{})
	if err != nil {
		t.Fatal(err)
	}
	if why := req.Content.Unavailable(); !strings.Contains(why, "gone.wasm") || !strings.Contains(why, "--module") {
		t.Fatalf("an unreadable stage module: %q", why)
	}
	if _, err := verify.ForStage(mod, filepath.Join(dir, "missing.wasm"), verify.Engine{}); exitcode.Code(err) != exitcode.Usage {
		t.Fatalf("an unreadable --module: %v", err)
	}
	cnt := filepath.Join(dir, "cnt.yaml")
	if err := os.WriteFile(cnt, []byte(countStage), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := verify.ForStage(cnt, filepath.Join(dir, "any.wasm"), verify.Engine{}); exitcode.Code(err) != exitcode.Usage || !strings.Contains(err.Error(), "builtin") {
		t.Fatalf("--module for a builtin stage: %v", err)
	}
}
