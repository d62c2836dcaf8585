package reencrypt

import (
	"cmp"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/attr"
	"github.com/flecht-dev/flecht/internal/kafkax"
)

// TP names one partition of one topic.
type TP = kafkax.TopicPartition

// Rec is one record as the sweep keeps it.
type Rec struct {
	Topic     string
	Partition int32
	Offset    int64
	Key       []byte // nil for a record without a key
	Value     []byte // nil for a tombstone
	Headers   []kgo.RecordHeader
	Timestamp time.Time // kept by a rewrite, so only the secret changes
}

// TP is the record's partition.
func (r *Rec) TP() TP { return TP{Topic: r.Topic, Partition: r.Partition} }

// FromKgo copies what the sweep needs out of a fetched record.
func FromKgo(r *kgo.Record) *Rec {
	return &Rec{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Key: r.Key, Value: r.Value, Headers: r.Headers, Timestamp: r.Timestamp}
}

// View is the compacted view of topics: per partition, the latest record of
// every key; a tombstone removes its key, and so do an empty value and {}
// (attr.IsStoreTombstone), as they do for every reader of a config topic or
// changelog. Compaction is per partition, so a
// key found on two partitions (a record placed off its key's hash
// partition) is two entries, as it is two live records to every reader.
// Records without a key cannot be compacted away: each one stays.
type View struct {
	parts map[TP]*partView
}

type partView struct {
	byKey   map[string]*Rec
	nullKey []*Rec
}

// NewView returns an empty view.
func NewView() *View { return &View{parts: map[TP]*partView{}} }

func (v *View) part(tp TP) *partView {
	p := v.parts[tp]
	if p == nil {
		p = &partView{byKey: map[string]*Rec{}}
		v.parts[tp] = p
	}
	return p
}

// Apply adds one record, in offset order per partition.
func (v *View) Apply(r *Rec) {
	p := v.part(r.TP())
	switch {
	case r.Key == nil:
		if r.Value != nil {
			p.nullKey = append(p.nullKey, r)
		}
	case attr.IsStoreTombstone(r.Value):
		delete(p.byKey, string(r.Key))
	default:
		p.byKey[string(r.Key)] = r
	}
}

// Latest returns the live record of key on tp, or nil.
func (v *View) Latest(tp TP, key []byte) *Rec {
	if p := v.parts[tp]; p != nil {
		return p.byKey[string(key)]
	}
	return nil
}

// Partition returns the live records of tp in offset order.
func (v *View) Partition(tp TP) []*Rec {
	p := v.parts[tp]
	if p == nil {
		return nil
	}
	out := make([]*Rec, 0, len(p.byKey)+len(p.nullKey))
	for _, r := range p.byKey {
		out = append(out, r)
	}
	out = append(out, p.nullKey...)
	slices.SortFunc(out, func(a, b *Rec) int { return cmp.Compare(a.Offset, b.Offset) })
	return out
}

// Partitions lists the partitions the view has seen, in topic, partition
// order.
func (v *View) Partitions() []TP {
	out := make([]TP, 0, len(v.parts))
	for tp := range v.parts {
		out = append(out, tp)
	}
	sortTPs(out)
	return out
}

// Records returns every live record, by topic, partition and offset.
func (v *View) Records() []*Rec {
	var out []*Rec
	for _, tp := range v.Partitions() {
		out = append(out, v.Partition(tp)...)
	}
	return out
}

// Len is the number of live records.
func (v *View) Len() int {
	n := 0
	for _, p := range v.parts {
		n += len(p.byKey) + len(p.nullKey)
	}
	return n
}

func sortTPs(tps []TP) {
	slices.SortFunc(tps, func(a, b TP) int {
		if c := cmp.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return cmp.Compare(a.Partition, b.Partition)
	})
}
