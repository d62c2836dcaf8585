package verify_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/lineage"
	"github.com/flecht-dev/flecht/internal/verify"
)

// rerun stands in for the offline engine: the fixture's logic (outputs),
// changed where a test changes it.
type rerun struct {
	gen    int64
	change func(p int32, o int, out []*kgo.Record) []*kgo.Record
	spans  map[kafkax.TopicPartition]verify.Span
}

func (r *rerun) Unavailable() string { return "" }

func (r *rerun) Logic() string { return logic }

func (r *rerun) Rerun(_ context.Context, spans map[kafkax.TopicPartition]verify.Span, emit func(lineage.Source, *kgo.Record)) error {
	r.spans = spans
	for tp, s := range spans {
		for o := s.From; o < s.To; o++ {
			out := outputs(r.gen, tp.Partition, int(o))
			if r.change != nil {
				out = r.change(tp.Partition, int(o), out)
			}
			for _, rec := range out {
				emit(lineage.Source{Topic: tp.Topic, Partition: tp.Partition, Offset: o}, rec)
			}
		}
	}
	return nil
}

func (f *fixture) verifyContent(c verify.Content) *verify.Report {
	f.t.Helper()
	rep, err := verify.Run(f.ctx, f.cl, verify.Request{ApplicationID: app, Inputs: []string{"raw"}, Content: c,
		Outputs: []verify.OutputTopic{{Topic: "refined", Role: verify.RoleOutput}, {Topic: "raw.dlq", Role: verify.RoleDeadLetter}}})
	if err != nil {
		f.t.Fatal(err)
	}
	return rep
}

// With an engine, the content check compares bytes per source: a changed
// value names its record and field, a missing output its source (a gap),
// an output the logic does not make its record; nothing else.
func TestContentCheck(t *testing.T) {
	f := newFixture(t)
	written := f.run(1)

	r := &rerun{gen: 1}
	rep := f.verifyContent(r)
	want(t, rep)
	if !rep.ContentChecked || rep.ContentNotChecked != "" {
		t.Fatalf("content checked %v: %q", rep.ContentChecked, rep.ContentNotChecked)
	}
	if s := r.spans[kafkax.TopicPartition{Topic: "raw", Partition: 1}]; s != (verify.Span{From: 0, To: perPart}) {
		t.Fatalf("rerun span %+v", s)
	}

	r.change = func(p int32, o int, out []*kgo.Record) []*kgo.Record {
		switch {
		case p == 1 && o == 4:
			out[0].Value = []byte(`{"n":40,"gen":1}`)
		case p == 0 && o == 3: // the logic makes an output its topic lacks
			out = append(out, &kgo.Record{Topic: "refined", Key: []byte("k3"), Value: []byte(`{"n":3}`)})
		case p == 0 && o == 6: // the topic holds an output the logic does not make
			out = nil
		}
		return out
	}
	rep = f.verifyContent(r)
	want(t, rep, "changed "+written["raw/1@4"][0], "missing raw/0@3", "unexpected "+written["raw/0@6"][0])
	for _, x := range rep.Findings {
		if x.Kind == verify.KindChanged && !strings.Contains(x.Message, "field $.n differs") {
			t.Errorf("the changed field is not named: %s", x.Message)
		}
	}
}

type unavailable struct{ *rerun }

func (unavailable) Unavailable() string { return "no engine for this logic" }

func TestContentNotCheckedSaysWhy(t *testing.T) {
	f := newFixture(t)
	f.run(1)
	if rep := f.verifyContent(unavailable{&rerun{}}); rep.ContentChecked || rep.ContentNotChecked != "no engine for this logic" {
		t.Fatalf("content checked %v: %q", rep.ContentChecked, rep.ContentNotChecked)
	}

	// Input records gone: the logic cannot be rerun from the start.
	var del kadm.Offsets
	del.Add(kadm.Offset{Topic: "raw", Partition: 1, At: 2})
	if _, err := kadm.NewClient(f.cl).DeleteRecords(f.ctx, del); err != nil {
		t.Fatal(err)
	}
	rep := f.verifyContent(&rerun{gen: 1})
	if rep.ContentChecked || !strings.Contains(rep.ContentNotChecked, fmt.Sprintf("raw/1 starts at offset %d", 2)) {
		t.Fatalf("an incomplete history: content checked %v: %q", rep.ContentChecked, rep.ContentNotChecked)
	}
	want(t, rep)
}
