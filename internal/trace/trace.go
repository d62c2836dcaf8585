// Package trace follows a record up its lineage (internal/lineage): from
// a record a stage wrote to the record it was made from, through every
// upstream flecht stage, to the raw record and who wrote it (the MQTT
// bridge or an extractor, by its origin header).
package trace

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/lineage"
	"github.com/flecht-dev/flecht/internal/topicio"
)

// MaxHops bounds a chain: no pipeline is that deep, and a chain that
// comes back to a record it passed stops earlier anyway.
const MaxHops = 64

// Why a chain ends, stable for scripts.
const (
	EndOrigin    = "origin"     // a raw record whose writer is named
	EndNoLineage = "no_lineage" // a record without lineage or origin: written outside flecht, or before lineage
	EndGone      = "gone"       // the source record is not in its topic any more
	EndBad       = "bad_lineage"
	EndLoop      = "loop"
	EndMaxHops   = "max_hops"
	// EndNotAuthorized: the principal may not read the source record's
	// topic, so what lies upstream is unknown (the detail names the ACL).
	EndNotAuthorized = "not_authorized"
)

// Hop is one record of a chain.
type Hop struct {
	Record string `json:"record"`
	topicio.OutLine
	// ProducerID and ProducerEpoch name the producer session whose
	// transaction wrote it; Transactional says whether it was in one.
	ProducerID    int64  `json:"producer_id"`
	ProducerEpoch int16  `json:"producer_epoch"`
	Transactional bool   `json:"transactional"`
	Source        string `json:"source,omitempty"`
	Logic         string `json:"logic,omitempty"`
	Generation    int64  `json:"generation,omitempty"`
	Origin        string `json:"origin,omitempty"`
}

// Chain is a record and every record upstream of it.
type Chain struct {
	Hops []Hop `json:"hops"`
	// End says why the chain stops; EndDetail names the record or the
	// problem.
	End       string `json:"end"`
	EndDetail string `json:"end_detail,omitempty"`
}

// NotFoundError: the record asked for is not there (exit 3, as an
// application nothing in the cluster belongs to).
type NotFoundError struct {
	Place lineage.Source
	Why   string
}

func (e *NotFoundError) Error() string {
	return fmt.Sprintf("no record at %s: %s", e.Place, e.Why)
}

// reader reads single records, describing each topic once.
type reader struct {
	cl     *kgo.Client
	adm    *kadm.Client
	topics map[string]kadm.TopicDetail
}

func newReader(cl *kgo.Client) *reader {
	return &reader{cl: cl, adm: kadm.NewClient(cl), topics: map[string]kadm.TopicDetail{}}
}

// read reads the committed record at place, or says why there is none.
func (r *reader) read(ctx context.Context, at lineage.Source) (*kgo.Record, error) {
	d, ok := r.topics[at.Topic]
	if !ok {
		details, err := kafkax.DescribeTopics(ctx, r.adm, at.Topic)
		var missing *kafkax.MissingTopicsError
		if errors.As(err, &missing) {
			return nil, &NotFoundError{Place: at, Why: "topic " + at.Topic + " does not exist"}
		}
		if kafkax.Unauthorized(err) {
			// Kafka names the Describe this request needed; reading the
			// record needs Read, which implies it.
			return nil, fmt.Errorf("reading %s: not authorized (needs Read on topic %s): %w", at, at.Topic, kerr.TopicAuthorizationFailed)
		}
		if err != nil {
			return nil, err
		}
		d = details[at.Topic]
		r.topics[at.Topic] = d
	}
	if _, ok := d.Partitions[at.Partition]; !ok {
		return nil, &NotFoundError{Place: at, Why: fmt.Sprintf("topic %s has %d partitions", at.Topic, len(d.Partitions))}
	}
	starts, err := r.adm.ListStartOffsets(ctx, at.Topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("listing the start offsets of %s: %w", at.Topic, err)
	}
	ends, err := r.adm.ListCommittedOffsets(ctx, at.Topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("listing the last stable offsets of %s: %w", at.Topic, err)
	}
	s, _ := starts.Lookup(at.Topic, at.Partition)
	e, _ := ends.Lookup(at.Topic, at.Partition)
	switch {
	case at.Offset < s.Offset:
		return nil, &NotFoundError{Place: at, Why: fmt.Sprintf("the partition starts at offset %d now (retention, compaction or a deletion removed it)", s.Offset)}
	case at.Offset >= e.Offset:
		return nil, &NotFoundError{Place: at, Why: fmt.Sprintf("the partition's committed records end before offset %d", e.Offset)}
	}
	var rec *kgo.Record
	tp := kafkax.TopicPartition{Topic: at.Topic, Partition: at.Partition}
	if _, err := kafkax.ReadRange(ctx, r.cl, tp, d.ID, at.Offset, at.Offset+1, func(got *kgo.Record) error {
		if got.Offset == at.Offset {
			rec = got
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("reading %s: %w", at, err)
	}
	if rec == nil {
		return nil, &NotFoundError{Place: at, Why: "the offset holds no committed record (a transaction marker, an aborted record, or compacted away)"}
	}
	return rec, nil
}

// Follow reads the record at each start and follows its lineage up. A
// start record that is not there is a NotFoundError, marked refused
// (exit 3); an upstream record that is not there ends its chain.
func Follow(ctx context.Context, cl *kgo.Client, starts ...lineage.Source) ([]*Chain, error) {
	r := newReader(cl)
	var out []*Chain
	for _, s := range starts {
		ch, err := follow(ctx, r, s)
		if err != nil {
			return nil, err
		}
		out = append(out, ch)
	}
	return out, nil
}

func follow(ctx context.Context, r *reader, start lineage.Source) (*Chain, error) {
	ch := &Chain{Hops: []Hop{}}
	seen := map[lineage.Source]bool{}
	at := start
	for {
		if len(ch.Hops) == MaxHops {
			ch.End, ch.EndDetail = EndMaxHops, fmt.Sprintf("stopped after %d records", MaxHops)
			return ch, nil
		}
		if seen[at] {
			ch.End, ch.EndDetail = EndLoop, at.String()+" comes back"
			return ch, nil
		}
		seen[at] = true
		rec, err := r.read(ctx, at)
		var nf *NotFoundError
		if errors.As(err, &nf) && len(ch.Hops) > 0 {
			ch.End, ch.EndDetail = EndGone, nf.Error()
			return ch, nil
		}
		if kafkax.Unauthorized(err) && len(ch.Hops) > 0 {
			ch.End, ch.EndDetail = EndNotAuthorized, err.Error()
			return ch, nil
		}
		if err != nil {
			if nf != nil {
				return nil, exitcode.RefusedError(err)
			}
			return nil, err
		}
		hop := Hop{Record: at.String(), OutLine: topicio.Line(rec, nil, nil),
			ProducerID: rec.ProducerID, ProducerEpoch: rec.ProducerEpoch, Transactional: rec.Attrs.IsTransactional()}
		hop.Origin, _ = lineage.OriginOf(rec.Headers)
		st, found, err := lineage.Read(rec.Headers)
		if found && err == nil {
			hop.Source, hop.Logic, hop.Generation = st.Source.String(), st.Logic, st.Generation
		}
		ch.Hops = append(ch.Hops, hop)
		switch {
		case err != nil:
			ch.End, ch.EndDetail = EndBad, err.Error()
			return ch, nil
		case !found && hop.Origin != "":
			ch.End, ch.EndDetail = EndOrigin, hop.Origin
			return ch, nil
		case !found:
			ch.End, ch.EndDetail = EndNoLineage, at.String()+" carries neither lineage nor origin: written outside flecht, or before lineage"
			return ch, nil
		}
		at = st.Source
	}
}

// FindKey lists the committed records with key among about the last
// lastN offsets of every partition of topic, in partition and offset
// order. None is a NotFoundError for the topic, marked refused (exit 3).
func FindKey(ctx context.Context, cl *kgo.Client, topic, key string, lastN int64) ([]lineage.Source, error) {
	var out []lineage.Source
	if _, err := kafkax.ReadFrom(ctx, cl, []string{topic}, kafkax.LastN(lastN), nil, func(r *kgo.Record) error {
		if r.Key != nil && string(r.Key) == key {
			out = append(out, lineage.Source{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset})
		}
		return nil
	}); err != nil {
		var missing *kafkax.MissingTopicsError
		if errors.As(err, &missing) {
			return nil, exitcode.RefusedError(err)
		}
		return nil, err
	}
	if len(out) == 0 {
		return nil, exitcode.RefusedError(fmt.Errorf("no record with key %q in the last %d offsets of each partition of %s: give a larger --last", key, lastN, topic))
	}
	slices.SortFunc(out, func(a, b lineage.Source) int {
		return cmp.Or(cmp.Compare(a.Partition, b.Partition), cmp.Compare(a.Offset, b.Offset))
	})
	return out, nil
}
