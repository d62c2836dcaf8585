package preview_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/devenv/devenvtest"
	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/module/moduletest"
	"github.com/flecht-dev/flecht/internal/offline"
	"github.com/flecht-dev/flecht/internal/preview"
	"github.com/flecht-dev/flecht/internal/stagefile"
)

func TestMain(m *testing.M) { moduletest.Main(m) }

const partitions = 3

// input is the test's records in the order produced, each with the place
// Kafka gives it.
type input struct {
	key, value string
	tombstone  bool
	source     string
}

func inputs() []input {
	var in []input
	offsets := map[int32]int64{}
	for i := range 140 {
		key := fmt.Sprintf("k-%d", i%7)
		r := input{key: key, value: fmt.Sprintf(`{"i":%d}`, i)}
		switch {
		case i%19 == 4 && key != "k-3":
			r.value = `{"not json`
		case i%13 == 12:
			r.value, r.tombstone = "", true
		case i%10 == 0:
			r.value = fmt.Sprintf(`{"drop":true,"i":%d}`, i)
		}
		p := kafkax.Partition([]byte(key), partitions)
		r.source = fmt.Sprintf("raw/%d@%d", p, offsets[p])
		offsets[p]++
		in = append(in, r)
	}
	return in
}

type fixture struct {
	t       *testing.T
	cluster *kafkax.Cluster
	dir     string
}

// newFixture starts Kafka with the input produced, and writes the stage
// file of the count example module.
func newFixture(t *testing.T) *fixture {
	env := devenvtest.Start(t)
	cl := devenvtest.KafkaClient(t, env, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(cl)
	ctx := context.Background()
	for _, topic := range []string{"raw", "out"} {
		if err := kafkax.CreateTopic(ctx, adm, topic, partitions, nil); err != nil {
			t.Fatal(err)
		}
	}
	var recs []*kgo.Record
	for _, r := range inputs() {
		rec := &kgo.Record{Topic: "raw", Key: []byte(r.key), Partition: kafkax.Partition([]byte(r.key), partitions)}
		if !r.tombstone {
			rec.Value = []byte(r.value)
		}
		recs = append(recs, rec)
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, cluster: &kafkax.Cluster{Brokers: []string{env.KafkaAddr()}}, dir: t.TempDir()}
}

// stage writes a stage file of the input whose transform is given.
func (f *fixture) stage(name, transform string) *stagefile.Stage {
	f.t.Helper()
	path := filepath.Join(f.dir, name+".yaml")
	yaml := "application_id: app\nkind: transformer\ninput_topics: [raw]\ninvalid_messages: dlq\n" + transform
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		f.t.Fatal(err)
	}
	st, err := stagefile.Load(path)
	if err != nil {
		f.t.Fatal(err)
	}
	return st
}

func moduleTransform(wasm string) string {
	return "transform:\n  module: " + wasm + "\n  output_topics: [out]\n"
}

func (f *fixture) preview(cur, cand *stagefile.Stage) *preview.Report {
	f.t.Helper()
	r, err := preview.Run(context.Background(), f.cluster, preview.Request{Current: cur, Candidate: cand,
		Examples: 1000, CacheDir: moduletest.CacheDir(f.t)})
	if err != nil {
		f.t.Fatal(err)
	}
	return r
}

func identical(t *testing.T, r *preview.Report) {
	t.Helper()
	if !r.Identical || len(r.Changed)+len(r.OnlyCurrent)+len(r.OnlyCandidate) > 0 || r.State.Keys != 0 {
		t.Fatalf("not identical: %d changed, %d only current, %d only candidate, %d state keys",
			len(r.Changed), len(r.OnlyCurrent), len(r.OnlyCandidate), r.State.Keys)
	}
	var n int64
	for _, tc := range r.Topics {
		n += tc.Identical
	}
	if n == 0 || r.Inputs != 140 {
		t.Fatalf("compared %d outputs of %d inputs: the logics ran over nothing", n, r.Inputs)
	}
}

// The same module on both sides changes nothing; so does the builtin it
// is the module of.
func TestPreviewOfTheSameLogicIsIdentical(t *testing.T) {
	f := newFixture(t)
	count := moduletest.Example(t, "count")
	cur := f.stage("current", moduleTransform(count))
	cand, err := preview.WithModule(cur, count)
	if err != nil {
		t.Fatal(err)
	}
	identical(t, f.preview(cur, cand))

	// The builtin count and its module write the same outputs; their dead
	// letters differ in the error they name, and in nothing else.
	r := f.preview(f.stage("builtin", "transform: {builtin: count, output_topic: out}\n"), cur)
	for _, tc := range r.Topics {
		if tc.Topic == "out" && (tc.Identical == 0 || tc.Changed+tc.OnlyCurrent+tc.OnlyCandidate > 0) {
			t.Errorf("builtin and module: %+v", tc)
		}
	}
	if len(r.Fields) != 1 || r.Fields[0].Path != `headers["flecht.dlq.error"]` || r.State.Keys != 0 {
		t.Errorf("builtin and module differ in %+v and %d state keys, want only the dead letters' error", r.Fields, r.State.Keys)
	}
}

// The module rebuilt from its sources is the same module.
func TestPreviewOfARebuiltModuleIsIdentical(t *testing.T) {
	f := newFixture(t)
	cur := f.stage("current", moduleTransform(moduletest.Example(t, "count")))
	// By its import path: a second build, to a file of its own.
	rebuilt := moduletest.Build(t, filepath.Join(moduletest.Root(), "examples", "modules"), "github.com/flecht-dev/flecht/examples/modules/count")
	if rebuilt == cur.Transform.Module.Path {
		t.Fatal("the module was not built again")
	}
	cand, err := preview.WithModule(cur, rebuilt)
	if err != nil {
		t.Fatal(err)
	}
	identical(t, f.preview(cur, cand))
}

// A changed module: exactly the outputs its change touches, as computed
// here from the input, are changed or gone, at the field it adds.
func TestPreviewOfAChangedModule(t *testing.T) {
	f := newFixture(t)
	cur := f.stage("current", moduleTransform(moduletest.Example(t, "count")))
	changedWasm := moduletest.Build(t, filepath.Join("testdata", "modules"), "./countflag")
	cand, err := preview.WithModule(cur, changedWasm)
	if err != nil {
		t.Fatal(err)
	}
	r := f.preview(cur, cand)

	var wantChanged, wantGone []string
	var same, dead int64
	for _, in := range inputs() {
		switch {
		case in.tombstone:
		case strings.HasPrefix(in.value, `{"not`):
			dead++
		case strings.Contains(in.value, `"drop":true`):
			wantGone = append(wantGone, in.source)
		case in.key == "k-3":
			wantChanged = append(wantChanged, in.source)
		default:
			same++
		}
	}
	var gotChanged, gotGone []string
	for _, e := range r.Changed {
		gotChanged = append(gotChanged, e.Source)
		if len(e.Fields) != 1 || e.Fields[0].Path != "value.flag" || e.Fields[0].Current != nil || string(e.Fields[0].Candidate) != "true" {
			t.Errorf("%s: changed fields %+v, want value.flag added as true", e.Source, e.Fields)
		}
	}
	for _, e := range r.OnlyCurrent {
		gotGone = append(gotGone, e.Source)
	}
	for _, l := range [][]string{wantChanged, wantGone, gotChanged, gotGone} {
		slices.Sort(l)
	}
	if !slices.Equal(gotChanged, wantChanged) {
		t.Errorf("changed outputs:\n got %q\nwant %q", gotChanged, wantChanged)
	}
	if !slices.Equal(gotGone, wantGone) {
		t.Errorf("outputs only the current logic makes:\n got %q\nwant %q", gotGone, wantGone)
	}
	if r.Identical || len(r.OnlyCandidate) != 0 || r.State.Keys != 0 || r.DeadLetters.Appear+r.DeadLetters.Disappear != 0 {
		t.Errorf("identical %v, %d only in the candidate, %d state keys differ, dead letters %+v: want only the changed and dropped outputs",
			r.Identical, len(r.OnlyCandidate), r.State.Keys, r.DeadLetters)
	}
	want := []preview.TopicCounts{
		{Topic: "out", Identical: same, Changed: int64(len(wantChanged)), OnlyCurrent: int64(len(wantGone))},
		{Topic: "raw.dlq", Identical: dead},
	}
	if !slices.Equal(r.Topics, want) {
		t.Errorf("topics %+v, want %+v", r.Topics, want)
	}
	if len(r.Fields) != 1 || r.Fields[0] != (preview.FieldCount{Path: "value.flag", Count: int64(len(wantChanged))}) {
		t.Errorf("changed fields %+v, want value.flag × %d", r.Fields, len(wantChanged))
	}
}

// A bounded preview reads only its range.
func TestPreviewRange(t *testing.T) {
	f := newFixture(t)
	cur := f.stage("current", "transform: {builtin: count, output_topic: out}\n")
	r, err := preview.Run(context.Background(), f.cluster, preview.Request{Current: cur, Candidate: cur,
		Range: offline.Range{MaxRecords: 4}, Examples: preview.DefaultExamples})
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	for _, in := range inputs() {
		used[strings.Split(in.source, "@")[0]] = true
	}
	if want := int64(4 * len(used)); r.Inputs != want || !r.Identical {
		t.Errorf("read %d inputs (want %d), identical %v", r.Inputs, want, r.Identical)
	}
}
