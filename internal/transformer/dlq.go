package transformer

import (
	"strconv"
	"time"

	"github.com/flecht-dev/flecht/internal/stage"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/stagefile"
)

// Headers a dead letter carries besides the original record's own.
const (
	HeaderDLQTopic     = "flecht.dlq.topic"
	HeaderDLQPartition = "flecht.dlq.partition"
	HeaderDLQOffset    = "flecht.dlq.offset"
	HeaderDLQError     = "flecht.dlq.error"
	HeaderDLQTime      = "flecht.dlq.time"
)

// deadLetter is the record that carries r to <topic>.dlq: the original key
// and value bytes untouched, the original headers, and headers naming where
// it came from, why, and when. It goes to the same partition number, so the
// dead letters of one input partition stay in order. The original's
// lineage headers are left out: the dead letter's own lineage names the
// original, whose headers still name its source.
func deadLetter(r *kgo.Record, reason string, now time.Time) stage.Message {
	headers := make([]kgo.RecordHeader, 0, len(r.Headers)+5)
	for _, h := range r.Headers {
		if !isLineage(h.Key) {
			headers = append(headers, h)
		}
	}
	headers = append(headers,
		kgo.RecordHeader{Key: HeaderDLQTopic, Value: []byte(r.Topic)},
		kgo.RecordHeader{Key: HeaderDLQPartition, Value: []byte(strconv.Itoa(int(r.Partition)))},
		kgo.RecordHeader{Key: HeaderDLQOffset, Value: []byte(strconv.FormatInt(r.Offset, 10))},
		kgo.RecordHeader{Key: HeaderDLQError, Value: []byte(reason)},
		kgo.RecordHeader{Key: HeaderDLQTime, Value: []byte(now.UTC().Format(time.RFC3339Nano))},
	)
	key, value := r.Key, r.Value
	if key == nil {
		key = []byte{}
	}
	return stage.Message{
		Topic:     stagefile.DLQTopic(r.Topic),
		RawKey:    key,
		RawValue:  value,
		Tombstone: value == nil,
		Timestamp: r.Timestamp,
		Headers:   headers,
		Partition: r.Partition,
		Explicit:  true,
	}
}

// DeadLetter sends a decoded input record to its topic's dead-letter topic
// with a reason (a builtin's policy for records it cannot use, such as
// enrich with missing: dlq).
func DeadLetter(in *Incoming, reason string) stage.Message {
	return deadLetter(&kgo.Record{
		Topic: in.Topic, Partition: in.Partition, Offset: in.Offset,
		Key: []byte(in.Key), Value: in.Raw, Timestamp: in.Timestamp, Headers: in.Headers,
	}, reason, time.Now())
}
