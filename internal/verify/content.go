package verify

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/lineage"
)

// Content finding kinds.
const (
	// KindChanged: an output whose value is not what the logic makes of
	// its source (the same topic and key).
	KindChanged = "changed"
	// KindMissing: the logic makes an output of a source record that the
	// topic does not hold: a gap.
	KindMissing = "missing"
	// KindUnexpected: an output the logic does not make of its source.
	KindUnexpected = "unexpected"
)

// Content reruns a stage's logic over its inputs with fresh state (the
// offline engine: the runner's own logic code, writing nothing to Kafka),
// so the audit can compare bytes per source record.
type Content interface {
	// Unavailable says why the content cannot be checked for this stage
	// ("" when it can).
	Unavailable() string
	// Logic names the logic it reruns as lineage does.
	Logic() string
	// Rerun runs the logic over each input partition's records from
	// Span.From up to Span.To, with fresh state, and calls emit for every
	// record the logic makes of one (outputs and dead letters), never
	// concurrently.
	Rerun(ctx context.Context, spans map[kafkax.TopicPartition]Span, emit func(src lineage.Source, rec *kgo.Record)) error
}

// Span is a stretch [From, To) of one input partition.
type Span struct{ From, To int64 }

// made is one record, as written or as the rerun makes it.
type made struct {
	sum   [32]byte
	topic string
	key   []byte
	null  bool // a null key
	value []byte
	place string // where it was written; "" for the rerun's
	dup   bool   // written before in its generation: a duplicate finding
}

func newMade(r *kgo.Record) made {
	h := sha256.New()
	var n [8]byte
	field := func(b []byte, null bool) {
		l := uint64(len(b))
		if null {
			l = 1 << 63
		}
		for i := range n {
			n[i] = byte(l >> (56 - 8*i))
		}
		h.Write(n[:])
		h.Write(b)
	}
	field([]byte(r.Topic), false)
	field(r.Key, r.Key == nil)
	field(r.Value, r.Value == nil)
	m := made{topic: r.Topic, key: r.Key, null: r.Key == nil, value: r.Value}
	h.Sum(m.sum[:0])
	return m
}

func (m made) sameKey(o made) bool {
	return m.topic == o.topic && m.null == o.null && bytes.Equal(m.key, o.key)
}

// contentCheck holds the current generation's records per source while
// the outputs are read, then compares them with the rerun.
type contentCheck struct {
	engine Content
	actual map[lineage.Source][]made
}

// historyGone says why the rerun cannot start where the stage started:
// an input partition whose log start is past 0 lost records the logic
// saw (its state depends on them).
func historyGone(inputs []InputPartition) string {
	for _, ip := range inputs {
		if ip.LogStart > 0 {
			return fmt.Sprintf("the history of %s/%d starts at offset %d: the records before it are gone, so the logic cannot be rerun from the stage's start (completeness and uniqueness were checked)", ip.Topic, ip.Partition, ip.LogStart)
		}
	}
	return ""
}

// compare reruns the logic from the log start (0) to the committed
// offsets and compares, per source of the current generation, the
// records made with the records written. Generation 1 starts at the log
// start (the runner starts a new group there), which is 0 here. Where a
// later generation starts (the replay's target) is not recorded, so its
// first source stands for it: a gap before it is not seen, and a
// generation started by a replay to a later target is compared with the
// state the logic builds from the log start. An input partition whose
// generation has no output at all is compared from the log start.
func (c *contentCheck) compare(ctx context.Context, a *auditor) error {
	spans := map[kafkax.TopicPartition]Span{}
	for key, ip := range a.parts {
		if ip.Committed > 0 {
			spans[key] = Span{From: 0, To: ip.Committed}
		}
	}
	expected := map[lineage.Source][]made{}
	err := c.engine.Rerun(ctx, spans, func(src lineage.Source, rec *kgo.Record) {
		ip := a.parts[kafkax.TopicPartition{Topic: src.Topic, Partition: src.Partition}]
		if ip == nil || src.Offset >= ip.Committed || (ip.Generation > lineage.FirstGeneration && ip.FirstSource != nil && src.Offset < *ip.FirstSource) {
			return
		}
		expected[src] = append(expected[src], newMade(rec))
	})
	if err != nil {
		return fmt.Errorf("rerunning the logic: %w", err)
	}
	sources := map[lineage.Source]bool{}
	for s := range expected {
		sources[s] = true
	}
	for s := range c.actual {
		sources[s] = true
	}
	order := make([]lineage.Source, 0, len(sources))
	for s := range sources {
		order = append(order, s)
	}
	sort.Slice(order, func(i, j int) bool { return lessSource(order[i], order[j]) })
	for _, src := range order {
		c.compareSource(a, src, c.actual[src], expected[src])
	}
	return nil
}

// compareSource matches written and made records of one source as
// multisets; what is left is a finding, but for a written duplicate
// (its own finding already). A logic that makes one record twice on
// purpose matches both copies.
func (c *contentCheck) compareSource(a *auditor, src lineage.Source, written, want []made) {
	gen := a.parts[kafkax.TopicPartition{Topic: src.Topic, Partition: src.Partition}].Generation
	left := append([]made(nil), want...)
	var extra []made
	for _, w := range written {
		i := indexOf(left, func(m made) bool { return m.sum == w.sum })
		if i < 0 {
			extra = append(extra, w)
			continue
		}
		left = append(left[:i], left[i+1:]...)
	}
	for _, w := range extra {
		if w.dup {
			continue // named a duplicate already
		}
		at, _ := lineage.ParseSource(w.place)
		f := Finding{Source: src.String(), Generation: gen, place: at, Record: w.place}
		if i := indexOf(left, w.sameKey); i >= 0 {
			f.Kind = KindChanged
			f.Message = fmt.Sprintf("its value is not what the logic makes of %s: %s", src, valueDiff(w.value, left[i].value))
			left = append(left[:i], left[i+1:]...)
		} else {
			f.Kind = KindUnexpected
			f.Message = fmt.Sprintf("the logic makes no such record of %s (topic %s, key %s)", src, w.topic, quoteKey(w))
		}
		a.add(f)
	}
	for _, m := range left {
		a.add(Finding{Kind: KindMissing, Record: src.String(), Source: src.String(), Generation: gen, place: src,
			Message: fmt.Sprintf("the logic makes a record of it for %s, key %s, which %s does not hold in generation %d: a gap", m.topic, quoteKey(m), m.topic, gen)})
	}
}

func indexOf(ms []made, match func(made) bool) int {
	for i, m := range ms {
		if match(m) {
			return i
		}
	}
	return -1
}

func quoteKey(m made) string {
	if m.null {
		return "null"
	}
	return strconv.Quote(string(m.key))
}

func lessSource(a, b lineage.Source) bool {
	if a.Topic != b.Topic {
		return a.Topic < b.Topic
	}
	if a.Partition != b.Partition {
		return a.Partition < b.Partition
	}
	return a.Offset < b.Offset
}

// valueDiff names where two values differ: the first JSON path whose
// values differ when both are JSON, else the first byte.
func valueDiff(got, want []byte) string {
	if g, w, ok := decodeBoth(got, want); ok {
		if path, ok := firstDiff(g, w, "$"); ok {
			return "field " + path + " differs"
		}
		return "the same JSON, written differently"
	}
	n := 0
	for n < len(got) && n < len(want) && got[n] == want[n] {
		n++
	}
	return fmt.Sprintf("the bytes differ from byte %d on", n)
}

// decodeBoth decodes both values as JSON, numbers kept exact.
func decodeBoth(a, b []byte) (any, any, bool) {
	decode := func(v []byte) (any, bool) {
		d := json.NewDecoder(bytes.NewReader(v))
		d.UseNumber()
		var out any
		if d.Decode(&out) != nil || d.More() {
			return nil, false
		}
		return out, true
	}
	x, okA := decode(a)
	y, okB := decode(b)
	return x, y, okA && okB
}

// firstDiff is the first path, in key order, where a and b differ.
func firstDiff(a, b any, path string) (string, bool) {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok {
			return path, true
		}
		keys := map[string]bool{}
		for k := range x {
			keys[k] = true
		}
		for k := range y {
			keys[k] = true
		}
		names := make([]string, 0, len(keys))
		for k := range keys {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			av, inA := x[k]
			bv, inB := y[k]
			if inA != inB {
				return path + "." + k, true
			}
			if p, ok := firstDiff(av, bv, path+"."+k); ok {
				return p, true
			}
		}
		return "", false
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return path, true
		}
		for i := range x {
			if p, ok := firstDiff(x[i], y[i], path+"["+strconv.Itoa(i)+"]"); ok {
				return p, true
			}
		}
		return "", false
	default:
		if a != b {
			return path, true
		}
		return "", false
	}
}
