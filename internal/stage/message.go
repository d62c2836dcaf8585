package stage

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/attr"
	"github.com/flecht-dev/flecht/internal/kafkax"
)

// Message is an output record. A zero Timestamp lets the broker stamp it.
// Tombstone sends a null value (Value is ignored). RawKey and RawValue, when
// set, are written byte for byte instead of Key and Value (dead letters keep
// the bytes they could not decode).
type Message struct {
	Topic     string
	Key       string
	Value     attr.Event
	Tombstone bool
	Timestamp time.Time
	Headers   []kgo.RecordHeader
	RawKey    []byte
	RawValue  []byte
	// NullKey writes a null key (Key and RawKey are ignored); its
	// partition is the empty key's.
	NullKey bool
	// Partition, when Explicit is set, places the record on that partition
	// instead of the key's murmur2 partition.
	Partition int32
	Explicit  bool
}

// Record places m on its topic: on its explicit partition, which must
// exist, or on Kafka's murmur2 partition of its key among the topic's
// partitions, so that flecht's outputs sit where a Java or franz-go
// producer would put them.
func (m Message) Record(ctx context.Context, counts *kafkax.PartitionCounts) (*kgo.Record, error) {
	if m.Topic == "" {
		return nil, errors.New("output message without a topic")
	}
	rec := &kgo.Record{Topic: m.Topic, Timestamp: m.Timestamp, Headers: m.Headers}
	rec.Key = m.RawKey
	if rec.Key == nil && !m.NullKey {
		rec.Key = []byte(m.Key)
	}
	switch {
	case m.Tombstone:
	case m.RawValue != nil:
		rec.Value = m.RawValue
	default:
		b, err := m.Value.Bytes()
		if err != nil {
			return nil, err
		}
		rec.Value = b
	}
	n, err := counts.Get(ctx, m.Topic)
	if err != nil {
		return nil, fmt.Errorf("output topic: %w", err)
	}
	if !m.Explicit {
		rec.Partition = kafkax.Partition(rec.Key, n)
		return rec, nil
	}
	if m.Partition < 0 || int(m.Partition) >= n {
		return nil, fmt.Errorf("message for %s partition %d: the topic has %d", m.Topic, m.Partition, n)
	}
	rec.Partition = m.Partition
	return rec, nil
}

// Configs looks up config records by wire key (docs/contract.md §6). Lookups are
// eventually consistent and outside any task transaction.
type Configs interface {
	Get(key string) (attr.Config, bool)
}
