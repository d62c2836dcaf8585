package kafkax

import (
	"context"
	"strconv"
	"sync"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Record size limits. A producer refuses a record whose batch would be
// larger than its limit (MESSAGE_TOO_LARGE, before anything is sent), and
// a broker refuses a batch larger than the topic's max.message.bytes.
const (
	// DefaultMaxBatchBytes is franz-go's producer limit, the
	// max.message.bytes Kafka had before 2.0: what a producer allows on a
	// topic whose own limit it does not know.
	DefaultMaxBatchBytes = 1_000_012
	// MaxBatchBytesCeiling caps a limit taken from a topic: a produce
	// request must fit franz-go's (and Kafka's socket.request.max.bytes)
	// 100 MiB with the request's own framing.
	MaxBatchBytesCeiling = 96 << 20
	// minBatchBytes is the smallest limit franz-go accepts.
	minBatchBytes = 512
)

// batchOverhead is a record batch without its records, as a producer counts
// it (the v2 batch header and the array length before it), plus the
// length prefix that flexible produce requests add.
const batchOverhead = 4 + 61 + 5

// BatchBytes is the size of a record batch that holds only rec, as a
// producer counts it against its limit (before compression). It errs a few
// bytes high, never low: a record whose BatchBytes is within a producer's
// limit is never refused for its size by that producer.
func BatchBytes(rec *kgo.Record) int {
	l := 1 + // attributes
		1 + // timestamp delta: 0 for a batch's first record
		1 + // offset delta: 0
		kbin.VarintLen(int32(len(rec.Key))) + len(rec.Key) +
		kbin.VarintLen(int32(len(rec.Value))) + len(rec.Value) +
		kbin.VarintLen(int32(len(rec.Headers)))
	for _, h := range rec.Headers {
		l += kbin.VarintLen(int32(len(h.Key))) + len(h.Key) + kbin.VarintLen(int32(len(h.Value))) + len(h.Value)
	}
	return batchOverhead + kbin.VarintLen(int32(l)) + l
}

// RecordLimits holds the record batch limit of each topic a producer
// writes: the topic's max.message.bytes, within the producer's bounds. Its
// Of is the producer's kgo.ProducerBatchMaxBytesFn, so what a stage checks
// against is exactly what its producer enforces. Limits are read once,
// when a stage starts; a topic whose limit changes later keeps its old one
// until the process restarts.
type RecordLimits struct {
	mu sync.RWMutex
	m  map[string]int32
}

// NewRecordLimits returns limits that know no topic yet.
func NewRecordLimits() *RecordLimits { return &RecordLimits{m: map[string]int32{}} }

// Of is topic's limit: DefaultMaxBatchBytes for a topic not looked up
// (and for every topic of nil limits).
func (l *RecordLimits) Of(topic string) int32 {
	if l == nil {
		return DefaultMaxBatchBytes
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	if n, ok := l.m[topic]; ok {
		return n
	}
	return DefaultMaxBatchBytes
}

// Set records topic's max.message.bytes as a producer can use it: within
// [512 B, MaxBatchBytesCeiling].
func (l *RecordLimits) Set(topic string, maxMessageBytes int64) {
	n := min(max(maxMessageBytes, minBatchBytes), MaxBatchBytesCeiling)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.m[topic] = int32(n)
}

// Load reads the max.message.bytes of each topic (the broker's
// message.max.bytes when the topic sets none, as Kafka describes it). A
// topic whose limit cannot be read (no DescribeConfigs on it, which a
// stage that only writes the topic is not granted) keeps the default, the
// limit a producer had without Load; unread says why for each such topic.
func (l *RecordLimits) Load(ctx context.Context, adm *kadm.Client, topics ...string) (unread map[string]error) {
	for _, t := range topics {
		cfg, err := TopicConfigs(ctx, adm, t)
		if err == nil {
			var n int64
			if n, err = strconv.ParseInt(cfg["max.message.bytes"], 10, 64); err == nil {
				l.Set(t, n)
				continue
			}
		}
		if unread == nil {
			unread = map[string]error{}
		}
		unread[t] = err
	}
	return unread
}
