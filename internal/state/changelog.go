package state

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/attr"
	"github.com/flecht-dev/flecht/internal/kafkax"
)

// ChangelogRecord is the record that persists one state change of the task
// for partition p: key = state key, value = the state object's JSON, nil for
// a delete (a tombstone). It goes to partition p explicitly, never by key
// hash: a task's state lives in its own changelog partition (SPEC §3).
func ChangelogRecord(topic string, p int32, key string, value []byte) *kgo.Record {
	return &kgo.Record{Topic: topic, Partition: p, Key: []byte(key), Value: value}
}

// Restore reads changelog partition p read_committed up to its end offset as
// it is now and loads it into the store: the latest value per key wins and a
// tombstone (or an empty state) deletes. It returns the records replayed.
// Call it only after the task's producer has fenced the previous owner, so
// that no transaction of that owner can still commit below the end.
func Restore(ctx context.Context, cl *kgo.Client, topic string, p int32, s *Store) (int, error) {
	return RestoreProgress(ctx, cl, topic, p, s, nil)
}

// RestoreProgress is Restore calling progress (when not nil) every few
// hundred records: a long restore is progress, not a stall, to a liveness
// probe.
func RestoreProgress(ctx context.Context, cl *kgo.Client, topic string, p int32, s *Store, progress func()) (int, error) {
	const progressEvery = 256
	l := s.loader()
	defer l.close()
	n := 0
	_, err := kafkax.ReadPartitionsToEnd(ctx, cl, []string{topic}, map[string][]int32{topic: {p}}, func(r *kgo.Record) error {
		n++
		if progress != nil && n%progressEvery == 0 {
			progress()
		}
		if isDelete(r.Value) {
			return l.put(r.Key, nil)
		}
		return l.put(r.Key, r.Value)
	})
	if err != nil {
		return n, fmt.Errorf("restoring %s/%d: %w", topic, p, err)
	}
	return n, l.flush()
}

// isDelete reports whether a changelog value removes its key: a tombstone,
// or an empty state object as the Python library may have written it.
func isDelete(v []byte) bool { return attr.IsStoreTombstone(v) }
