package transformer_test

import (
	"context"
	"fmt"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/buildinfo"
	"github.com/flecht-dev/flecht/internal/lineage"
	"github.com/flecht-dev/flecht/internal/transformer"
)

// lineageOf is a record's lineage headers by name, each as often as it
// occurs.
func lineageOf(r *kgo.Record) map[string][]string {
	out := map[string][]string{}
	for _, h := range r.Headers {
		if strings.HasPrefix(h.Key, "flecht.lineage.") {
			out[h.Key] = append(out[h.Key], string(h.Value))
		}
	}
	return out
}

// committedMeta is the metadata of group's committed offset of topic/p.
func (f *fixture) committedMeta(group, topic string, p int32) string {
	f.t.Helper()
	offs, err := f.adm.FetchOffsets(context.Background(), group)
	if err != nil {
		f.t.Fatal(err)
	}
	o, _ := offs.Lookup(topic, p)
	return o.Metadata
}

// sourceOf maps each input record of topic to its place, by its value's
// "i" (keyed writes it): what an output made from it must name.
func (f *fixture) sourceOf(topic string) map[string]string {
	src := map[string]string{}
	for _, r := range f.read(topic) {
		src[iOf(r.Value)] = fmt.Sprintf("%s/%d@%d", r.Topic, r.Partition, r.Offset)
	}
	return src
}

// iOf is the "i" member of a value keyed wrote, or of count's output of
// it, as text.
func iOf(v []byte) string {
	s := string(v)
	at := strings.Index(s, `"i":`)
	if at < 0 {
		return ""
	}
	s = s[at+4:]
	return s[:strings.IndexAny(s, ",}")]
}

// Every output and dead letter of a count stage carries the three lineage
// headers, once each, in place of any the input carried: its own input
// record, the builtin and flecht's version, generation 1 on a group that
// never committed; the input's other headers stay, the values are count's.
// The committed offsets carry the generation.
func TestLineageOnOutputsAndDeadLetters(t *testing.T) {
	f := newFixture(t)
	f.topics(2, "raw", "refined")
	recs := keyed(40, 6, "a")
	for _, r := range recs {
		r.Headers = []kgo.RecordHeader{{Key: "trace", Value: []byte("t1")}, {Key: lineage.HeaderSource, Value: []byte("upstream/0@9")}}
	}
	bad := &kgo.Record{Key: []byte("key-1"), Value: []byte(`not json`), Headers: []kgo.RecordHeader{{Key: lineage.HeaderLogic, Value: []byte("module:sha256:00")}}}
	f.produce("raw", append(recs, bad)...)
	r := f.start(stageFile(t, countStage+"invalid_messages: dlq\n"), t.TempDir(), "c")
	waitFor(t, 30*time.Second, "40 outputs and a dead letter", func() bool {
		return len(f.read("refined")) == 40 && len(f.read("raw.dlq")) == 1
	})
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	logic := lineage.BuiltinLogic("count", buildinfo.Read(debug.ReadBuildInfo).Version)
	want := func(source string) string {
		return fmt.Sprint(map[string][]string{lineage.HeaderSource: {source}, lineage.HeaderLogic: {logic}, lineage.HeaderGeneration: {"1"}})
	}
	src := f.sourceOf("raw")
	for _, o := range f.read("refined") {
		if got := fmt.Sprint(lineageOf(o)); got != want(src[iOf(o.Value)]) {
			t.Fatalf("output %s: lineage %s, want %s", o.Value, got, want(src[iOf(o.Value)]))
		}
		if header(o, "trace") != "t1" {
			t.Fatalf("output %s lost its input's header: %v", o.Value, o.Headers)
		}
	}
	dl := f.read("raw.dlq")[0]
	var badAt string
	for _, in := range f.read("raw") {
		if string(in.Value) == "not json" {
			badAt = fmt.Sprintf("raw/%d@%d", in.Partition, in.Offset)
		}
	}
	if got := fmt.Sprint(lineageOf(dl)); got != want(badAt) || string(dl.Value) != "not json" || header(dl, transformer.HeaderDLQTopic) != "raw" {
		t.Fatalf("dead letter %q: lineage %s (want %s), headers %v", dl.Value, got, want(badAt), dl.Headers)
	}
	for p := range int32(2) {
		if m := f.committedMeta("count-app", "raw", p); m != lineage.OffsetMetadata(1) {
			t.Errorf("raw/%d committed with metadata %q, want %q", p, m, lineage.OffsetMetadata(1))
		}
	}
}

// A task takes its generation from its committed offsets: after a replay
// (simulated: the offsets reset to the start with generation 2, as flecht
// replay --execute commits them) a second run writes every output again
// with generation 2, and commits generation 2.
func TestLineageGenerationFromCommittedOffsets(t *testing.T) {
	f := newFixture(t)
	f.topics(2, "raw", "refined")
	f.produce("raw", keyed(30, 5, "a")...)
	st := stageFile(t, countStage)
	leave := func(o *transformer.Options) { o.LeaveGroup = true }
	r := f.startOpts(st, t.TempDir(), "c", nil, leave)
	waitFor(t, 30*time.Second, "30 outputs", func() bool { return len(f.read("refined")) == 30 })
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	reset := kadm.Offsets{}
	for p := range int32(2) {
		reset.Add(kadm.Offset{Topic: "raw", Partition: p, At: 0, LeaderEpoch: -1, Metadata: lineage.OffsetMetadata(2)})
	}
	waitFor(t, 30*time.Second, "the reset committed", func() bool {
		resp, err := f.adm.CommitOffsets(context.Background(), "count-app", reset)
		return err == nil && resp.Error() == nil
	})
	r = f.startOpts(st, t.TempDir(), "c2", nil, leave)
	waitFor(t, 30*time.Second, "60 outputs", func() bool { return len(f.read("refined")) == 60 })
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	src := f.sourceOf("raw")
	seen := map[string]int{} // source and generation → outputs
	for _, o := range f.read("refined") {
		l := lineageOf(o)
		if len(l[lineage.HeaderGeneration]) != 1 || len(l[lineage.HeaderSource]) != 1 || l[lineage.HeaderSource][0] != src[iOf(o.Value)] {
			t.Fatalf("output %s: lineage %v", o.Value, l)
		}
		seen[l[lineage.HeaderSource][0]+" gen "+l[lineage.HeaderGeneration][0]]++
	}
	for _, s := range src {
		for _, g := range []string{"1", "2"} {
			if n := seen[s+" gen "+g]; n != 1 {
				t.Errorf("%s has %d outputs of generation %s, want 1", s, n, g)
			}
		}
	}
	for p := range int32(2) {
		if m := f.committedMeta("count-app", "raw", p); m != lineage.OffsetMetadata(2) {
			t.Errorf("raw/%d committed with metadata %q after the replay, want %q", p, m, lineage.OffsetMetadata(2))
		}
	}
}

// lineage: false writes no lineage headers, drops those the input
// carried, and still commits the generation.
func TestLineageOff(t *testing.T) {
	f := newFixture(t)
	f.topics(1, "raw", "refined")
	recs := keyed(10, 3, "a")
	for _, r := range recs {
		r.Headers = []kgo.RecordHeader{{Key: lineage.HeaderGeneration, Value: []byte("4")}, {Key: "trace", Value: []byte("t1")}}
	}
	f.produce("raw", recs...)
	r := f.start(stageFile(t, countStage+"lineage: false\n"), t.TempDir(), "c")
	waitFor(t, 30*time.Second, "10 outputs", func() bool { return len(f.read("refined")) == 10 })
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	for _, o := range f.read("refined") {
		if l := lineageOf(o); len(l) != 0 || header(o, "trace") != "t1" {
			t.Fatalf("output %s: headers %v, want only trace", o.Value, o.Headers)
		}
	}
	if m := f.committedMeta("count-app", "raw", 0); m != lineage.OffsetMetadata(1) {
		t.Errorf("committed with metadata %q, want %q", m, lineage.OffsetMetadata(1))
	}
}
