package offline_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/devenv"
	"github.com/flecht-dev/flecht/internal/devenv/devenvtest"
	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/lineage"
	"github.com/flecht-dev/flecht/internal/module"
	"github.com/flecht-dev/flecht/internal/module/moduletest"
	"github.com/flecht-dev/flecht/internal/offline"
	"github.com/flecht-dev/flecht/internal/stagefile"
	"github.com/flecht-dev/flecht/internal/transformer"
	"github.com/flecht-dev/flecht/internal/transformer/builtin"
)

func TestMain(m *testing.M) { moduletest.Main(m) }

type fixture struct {
	t       *testing.T
	env     *devenv.Env
	cluster *kafkax.Cluster
	adm     *kadm.Client
}

func newFixture(t *testing.T) *fixture {
	env := devenvtest.Start(t)
	return &fixture{t: t, env: env, cluster: &kafkax.Cluster{Brokers: []string{env.KafkaAddr()}},
		adm: kadm.NewClient(devenvtest.KafkaClient(t, env))}
}

func (f *fixture) topics(partitions int32, names ...string) {
	f.t.Helper()
	for _, n := range names {
		if err := kafkax.CreateTopic(context.Background(), f.adm, n, partitions, nil); err != nil {
			f.t.Fatal(err)
		}
	}
}

// produce writes recs where the Java client would put their keys.
func (f *fixture) produce(topic string, recs ...*kgo.Record) {
	f.t.Helper()
	n, err := kafkax.CommonPartitionCount(context.Background(), f.adm, topic)
	if err != nil {
		f.t.Fatal(err)
	}
	for _, r := range recs {
		r.Topic, r.Partition = topic, kafkax.Partition(r.Key, n)
	}
	cl := devenvtest.KafkaClient(f.t, f.env, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) read(topic string) []*kgo.Record {
	f.t.Helper()
	recs, err := kafkax.ReadToEnd(context.Background(), devenvtest.KafkaClient(f.t, f.env), topic)
	if err != nil {
		f.t.Fatal(err)
	}
	return recs
}

func stageFile(t *testing.T, yaml string) *stagefile.Stage {
	t.Helper()
	s, err := stagefile.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// runStage runs st in the runner until every input record is committed,
// then stops it.
func (f *fixture) runStage(st *stagefile.Stage, tf transformer.Transformer, inputs int) {
	f.t.Helper()
	r := transformer.NewRunner(transformer.Options{Stage: st, Cluster: f.cluster, ClientID: "runner", StateDir: f.t.TempDir(), SessionTimeout: 6 * time.Second})
	if tf == nil {
		var err error
		if tf, err = builtin.NewTransformer(st.Transform, builtin.Env{Configs: r.Configs()}); err != nil {
			f.t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx, tf) }()
	deadline := time.Now().Add(60 * time.Second)
	for f.committed(st) < int64(inputs) {
		if time.Now().After(deadline) {
			cancel()
			f.t.Fatalf("the runner committed %d of %d input records", f.committed(st), inputs)
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		f.t.Fatal(err)
	}
}

// committed sums the stage group's committed offsets (each input starts
// at 0 and holds no transaction markers here).
func (f *fixture) committed(st *stagefile.Stage) int64 {
	offs, err := f.adm.FetchOffsets(context.Background(), st.ApplicationID)
	if err != nil {
		return 0
	}
	var n int64
	offs.Each(func(o kadm.OffsetResponse) { n += o.At })
	return n
}

// runEngine runs st's logic offline and returns its outputs.
func (f *fixture) runEngine(st *stagefile.Stage, r offline.Range) ([]offline.Output, *offline.Result) {
	f.t.Helper()
	ctx := context.Background()
	env, err := offline.Prepare(ctx, f.cluster, st, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	defer env.Close()
	env.CacheDir = moduletest.CacheDir(f.t)
	g, err := env.Logic(ctx, st)
	if err != nil {
		f.t.Fatal(err)
	}
	defer g.Close()
	var outs []offline.Output
	res, err := env.Run(ctx, []*transformer.Logic{g.Logic}, offline.RunOptions{Range: r}, func(o offline.Output) { outs = append(outs, o) })
	if err != nil {
		f.t.Fatal(err)
	}
	return outs, res
}

// written is a record as a reader compares it: where it went, its key and
// value, and its headers but the dead letter's time.
func written(r *kgo.Record) string {
	var hs []string
	for _, h := range r.Headers {
		if h.Key != transformer.HeaderDLQTime && !strings.HasPrefix(h.Key, "flecht.lineage.") {
			hs = append(hs, h.Key+"="+string(h.Value))
		}
	}
	return fmt.Sprintf("%s/%d key=%q value=%q headers=%q", r.Topic, r.Partition, r.Key, r.Value, hs)
}

// byPartition is what each output partition holds, in order.
func byPartition(recs []*kgo.Record) map[string][]string {
	out := map[string][]string{}
	for _, r := range recs {
		tp := r.Topic + "/" + strconv.Itoa(int(r.Partition))
		out[tp] = append(out[tp], written(r))
	}
	return out
}

// engineOrder puts outputs in the order each partition's task writes
// them: by source partition, source offset and place.
func engineOrder(outs []offline.Output) []*kgo.Record {
	slices.SortStableFunc(outs, func(a, b offline.Output) int {
		if a.Source.Partition != b.Source.Partition {
			return int(a.Source.Partition - b.Source.Partition)
		}
		if a.Source.Topic != b.Source.Topic {
			return strings.Compare(a.Source.Topic, b.Source.Topic)
		}
		if a.Source.Offset != b.Source.Offset {
			return int(a.Source.Offset - b.Source.Offset)
		}
		return a.Index - b.Index
	})
	recs := make([]*kgo.Record, len(outs))
	for i, o := range outs {
		recs[i] = o.Record
	}
	return recs
}

// mixed is input with keys on every partition, some tombstones and some
// records that do not decode.
func mixed(n int) []*kgo.Record {
	recs := make([]*kgo.Record, n)
	for i := range recs {
		v := fmt.Appendf(nil, `{"i":%d,"b":1,"a":"x"}`, i)
		switch {
		case i%17 == 5:
			v = []byte(`{"not json`)
		case i%13 == 12:
			v = nil
		}
		recs[i] = &kgo.Record{Key: fmt.Appendf(nil, "k-%d", i%11), Value: v}
	}
	return recs
}

// The engine makes what the runner writes for the same input, record for
// record: outputs on the same partitions in the same order, dead letters
// of the records that do not decode, and the state the changelog ends
// with. Compared output partition by output partition, since the runner's
// records do not name their source.
func TestEngineMakesWhatTheRunnerWrites(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stage  func(t *testing.T) string
		module bool
	}{
		{"builtin", func(*testing.T) string { return "transform: {builtin: count, output_topic: out}" }, false},
		{"module", func(t *testing.T) string {
			return "transform:\n  module: " + moduletest.Example(t, "count") + "\n  output_topics: [out]"
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.topics(3, "raw", "out")
			in := mixed(200)
			f.produce("raw", in...)
			st := stageFile(t, "application_id: app\nkind: transformer\ninput_topics: [raw]\ninvalid_messages: dlq\nmax_poll_records: 37\n"+tc.stage(t))
			var tf transformer.Transformer
			if tc.module {
				m := st.Transform.Module
				mod, err := module.Load(context.Background(), module.Spec{Path: m.Path, OutputTopics: m.OutputTopics, ApplicationID: st.ApplicationID},
					module.Options{CacheDir: moduletest.CacheDir(t)})
				if err != nil {
					t.Fatal(err)
				}
				defer mod.Close(context.Background())
				tf = module.NewTransformer(mod)
			}
			f.runStage(st, tf, len(in))

			outs, res := f.runEngine(st, offline.Range{})
			if res.Inputs != int64(len(in)) {
				t.Errorf("the engine read %d inputs, want %d", res.Inputs, len(in))
			}
			dead := 0
			for _, o := range outs {
				if o.DeadLetter {
					dead++
				}
			}
			if want := 200 / 17; dead < want {
				t.Errorf("%d dead letters, want at least %d", dead, want)
			}
			want := byPartition(append(f.read("out"), f.read("raw.dlq")...))
			got := byPartition(engineOrder(outs))
			if len(want) == 0 {
				t.Fatal("the runner wrote nothing")
			}
			for tp, w := range want {
				if g := got[tp]; strings.Join(g, "\n") != strings.Join(w, "\n") {
					t.Errorf("%s:\nrunner %d records\n%s\nengine %d records\n%s", tp, len(w), strings.Join(w, "\n"), len(g), strings.Join(g, "\n"))
				}
			}
			for tp := range got {
				if _, ok := want[tp]; !ok {
					t.Errorf("the engine wrote to %s, the runner did not", tp)
				}
			}
			changelog := map[string]string{}
			for _, r := range f.read("app-changelog") {
				changelog[string(r.Key)] = string(r.Value)
			}
			state := map[string]string{}
			for k, v := range res.States[0] {
				state[k] = string(v)
			}
			if fmt.Sprint(state) != fmt.Sprint(changelog) {
				t.Errorf("final state:\nrunner %v\nengine %v", changelog, state)
			}
		})
	}
}

// An aborted transaction's records are not read (read_committed), and a
// transaction's markers do not keep the read from ending.
func TestEngineReadsCommittedRecordsOnly(t *testing.T) {
	f := newFixture(t)
	f.topics(2, "raw", "out")
	f.produce("raw", &kgo.Record{Key: []byte("a"), Value: []byte(`{"n":1}`)})
	tx := devenvtest.KafkaClient(t, f.env, kgo.TransactionalID("aborter"), kgo.DefaultProduceTopic("raw"))
	ctx := context.Background()
	if err := tx.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a", "b", "c"} {
		if err := tx.ProduceSync(ctx, &kgo.Record{Key: []byte(k), Value: []byte(`{"aborted":true}`)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
	f.produce("raw", &kgo.Record{Key: []byte("b"), Value: []byte(`{"n":2}`)})

	st := stageFile(t, "application_id: app\nkind: transformer\ninput_topics: [raw]\ntransform: {builtin: passthrough, output_topic: out}\n")
	outs, res := f.runEngine(st, offline.Range{})
	if res.Inputs != 2 || len(outs) != 2 {
		t.Fatalf("read %d inputs and made %d outputs, want 2 and 2 (the aborted ones left out)", res.Inputs, len(outs))
	}
	for _, o := range outs {
		if strings.Contains(string(o.Record.Value), "aborted") {
			t.Errorf("an aborted record was read: %s", written(o.Record))
		}
	}
}

// A builtin that looks up the config topics sees the config records as
// they stand when the engine starts.
func TestEngineReadsTheConfigTopicsFirst(t *testing.T) {
	f := newFixture(t)
	f.topics(2, "raw", "out", "sites")
	f.produce("sites", &kgo.Record{Key: []byte("s1"), Value: []byte(`{"city":"Bern"}`)})
	f.produce("raw", &kgo.Record{Key: []byte("d1"), Value: []byte(`{"site":"s1"}`)},
		&kgo.Record{Key: []byte("d2"), Value: []byte(`{"site":"s2"}`)})
	st := stageFile(t, `
application_id: app
kind: transformer
input_topics: [raw]
config_topics: [sites]
transform: {builtin: enrich, output_topic: out, lookup: site, missing: dlq}
`)
	outs, _ := f.runEngine(st, offline.Range{})
	if len(outs) != 2 {
		t.Fatalf("%d outputs, want 2", len(outs))
	}
	for _, o := range outs {
		switch string(o.Record.Key) {
		case "d1":
			if o.DeadLetter || !strings.Contains(string(o.Record.Value), `"city":"Bern"`) {
				t.Errorf("d1 was not enriched from the config topic: %s", written(o.Record))
			}
		case "d2":
			if !o.DeadLetter || o.Record.Topic != "raw.dlq" {
				t.Errorf("d2 (no config s2) was not dead-lettered: %s", written(o.Record))
			}
		default:
			t.Errorf("unexpected output %s", written(o.Record))
		}
	}
}

// MaxRecords bounds each partition; Since starts at a time.
func TestEngineRange(t *testing.T) {
	f := newFixture(t)
	f.topics(2, "raw", "out")
	old := time.Now().Add(-time.Hour)
	var recs []*kgo.Record
	for i := range 40 {
		ts := old
		if i >= 30 {
			ts = time.Now()
		}
		recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i%4), Value: []byte(`{}`), Timestamp: ts})
	}
	f.produce("raw", recs...)
	st := stageFile(t, "application_id: app\nkind: transformer\ninput_topics: [raw]\ntransform: {builtin: passthrough, output_topic: out}\n")
	if _, res := f.runEngine(st, offline.Range{MaxRecords: 3}); res.Inputs != 6 {
		t.Errorf("MaxRecords 3 over 2 partitions read %d records, want 6", res.Inputs)
	}
	if _, res := f.runEngine(st, offline.Range{Since: time.Now().Add(-time.Minute)}); res.Inputs != 10 {
		t.Errorf("Since a minute ago read %d records, want the 10 recent ones", res.Inputs)
	}
	outs, res := f.runEngine(st, offline.Range{Spans: map[kafkax.TopicPartition]kafkax.Bounds{{Topic: "raw", Partition: 1}: {Start: 2, End: 5}}})
	if res.Inputs != 3 || len(outs) != 3 {
		t.Fatalf("a span [2, 5) of raw/1 read %d records and made %d outputs, want 3", res.Inputs, len(outs))
	}
	for i, o := range outs {
		if want := (lineage.Source{Topic: "raw", Partition: 1, Offset: int64(2 + i)}); o.Source != want {
			t.Errorf("output %d came from %s, want %s", i, o.Source, want)
		}
	}
}
