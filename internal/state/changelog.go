package state

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/attr"
	"github.com/flecht-dev/flecht/internal/kafkax"
)

// ChangelogRecord is the record that persists one state change of the task
// for partition p: key = state key, value = the state object's JSON, nil for
// a delete (a tombstone). It goes to partition p explicitly, never by key
// hash: a task's state lives in its own changelog partition (docs/contract.md §3).
func ChangelogRecord(topic string, p int32, key string, value []byte) *kgo.Record {
	return &kgo.Record{Topic: topic, Partition: p, Key: []byte(key), Value: value}
}

// Changelog is one changelog partition as a task finds it when it starts.
type Changelog struct {
	Topic     string
	Partition int32
	TopicID   [16]byte
	// Start is the log start offset, End the last stable offset.
	Start, End int64
	// DeleteRetention is the topic's delete.retention.ms: how long a
	// compacted log keeps a tombstone once the cleaner has reached it.
	DeleteRetention time.Duration
	// At is when the bounds were asked for: anything past End was written
	// after it.
	At time.Time
}

// defaultDeleteRetention is Kafka's delete.retention.ms default, for a
// broker that does not say.
const defaultDeleteRetention = 24 * time.Hour

// DescribeChangelog reads partition p of the changelog topic as it is now.
// Call it after the task's producer has fenced the previous owner, so that
// no open transaction holds the end back.
func DescribeChangelog(ctx context.Context, adm *kadm.Client, topic string, p int32) (Changelog, error) {
	cls, err := DescribeChangelogs(ctx, adm, topic, []int32{p})
	if err != nil {
		return Changelog{Topic: topic, Partition: p, DeleteRetention: defaultDeleteRetention}, err
	}
	return cls[p], nil
}

// DescribeChangelogs reads partitions ps of the changelog topic as they are
// now, with one request of each kind for them all (standbys follow several
// partitions every poll). A partition the topic lacks is an error.
func DescribeChangelogs(ctx context.Context, adm *kadm.Client, topic string, ps []int32) (map[int32]Changelog, error) {
	details, err := kafkax.DescribeTopics(ctx, adm, topic)
	if err != nil {
		return nil, err
	}
	at := time.Now()
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("listing the start offsets of %s: %w", topic, err)
	}
	ends, err := adm.ListCommittedOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("listing the end offsets of %s: %w", topic, err)
	}
	retention := defaultDeleteRetention
	configs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("describing the configs of %s: %w", topic, err)
	}
	if rc, err := configs.On(topic, nil); err == nil && rc.Err == nil {
		for _, c := range rc.Configs {
			if c.Key == "delete.retention.ms" && c.Value != nil {
				if ms, err := strconv.ParseInt(*c.Value, 10, 64); err == nil && ms >= 0 {
					retention = time.Duration(ms) * time.Millisecond
				}
			}
		}
	}
	out := make(map[int32]Changelog, len(ps))
	for _, p := range ps {
		s, okS := starts.Lookup(topic, p)
		e, okE := ends.Lookup(topic, p)
		if !okS || !okE {
			return nil, fmt.Errorf("changelog %s has no partition %d", topic, p)
		}
		out[p] = Changelog{Topic: topic, Partition: p, TopicID: details[topic].ID, Start: s.Offset, End: e.Offset,
			DeleteRetention: retention, At: at}
	}
	return out, nil
}

// Plan is how a task's store is brought up to date: by reading the
// changelog from From to its end.
type Plan struct {
	From int64
	// Tail is true when the kept store is used and only the changelog
	// after its checkpoint is read; otherwise the store was emptied and
	// Why says why the kept one could not be trusted.
	Tail bool
	Why  string
	// since is the position's Since while the restore is under way.
	since time.Time
}

// Then is the plan that goes on where a restore by p ended (res, of cl):
// the next tail of a standby that follows the changelog.
func (p Plan) Then(res Result, cl Changelog) Plan {
	return Plan{From: res.End, Tail: true, since: cl.At}
}

// Kind names the plan in logs and metrics: "tail" or "full".
func (p Plan) Kind() string {
	if p.Tail {
		return "tail"
	}
	return "full"
}

// Prepare opens the store in dir for changelog partition cl of application
// app and decides how to bring it up to date. The kept store is used, and
// only the changelog after its checkpoint read, when the checkpoint names
// the same application, partition and changelog topic ID and lies within
// the log as it is now, recent enough that no tombstone after it can have
// been compacted away; otherwise (or when the store does not open) the
// directory is emptied and the whole changelog is read.
func Prepare(dir, app string, cl Changelog, now time.Time, log *slog.Logger) (*Store, Plan, error) {
	want := Identity{ApplicationID: app, Partition: cl.Partition, TopicID: cl.TopicID}
	why := "no local store"
	if _, err := os.Stat(dir); err == nil {
		s, err := openKept(dir, log)
		if err != nil {
			why = "the local store does not open: " + err.Error()
		} else {
			cp, ok, err := s.Checkpoint()
			switch {
			case err != nil:
				why = err.Error()
			case !ok:
				why = "the local store has no checkpoint"
			default:
				why = Distrust(cp, want, cl, now)
			}
			if why == "" {
				return s, Plan{From: cp.Offset, Tail: true, since: cp.Since}, nil
			}
			if err := s.Close(); err != nil {
				return nil, Plan{}, err
			}
		}
	}
	if err := Wipe(dir); err != nil {
		return nil, Plan{}, err
	}
	s, err := Open(dir, log)
	if err != nil {
		return nil, Plan{}, err
	}
	if err := s.SetIdentity(want); err != nil {
		_ = s.Close()
		return nil, Plan{}, err
	}
	return s, Plan{From: cl.Start, Why: why, since: now}, nil
}

// openKept opens a store an earlier run left. Pebble reports some damage
// by panicking (its Fatalf); here that is one more reason to restore in
// full, not a crash that would repeat at every start.
func openKept(dir string, log *slog.Logger) (s *Store, err error) {
	defer func() {
		if r := recover(); r != nil {
			s, err = nil, fmt.Errorf("%v", r)
		}
	}()
	return Open(dir, log)
}

// Distrust says why a store with checkpoint cp cannot stand in for the
// changelog partition cl at time now, or "" when it can. A tombstone
// written after the checkpoint is kept at least delete.retention.ms; a
// tenth of it is left as a margin for clocks that disagree.
func Distrust(cp Checkpoint, want Identity, cl Changelog, now time.Time) string {
	switch {
	case cp.ApplicationID != want.ApplicationID:
		return fmt.Sprintf("the local store belongs to application %q", cp.ApplicationID)
	case cp.Partition != want.Partition:
		return fmt.Sprintf("the local store belongs to partition %d", cp.Partition)
	case cp.TopicID != want.TopicID:
		return fmt.Sprintf("changelog %s was deleted and created again since the checkpoint (topic ID %s, was %s)",
			cl.Topic, topicID(want.TopicID), topicID(cp.TopicID))
	case cp.Offset > cl.End:
		return fmt.Sprintf("the checkpoint (offset %d) is past the changelog's end (%d): the log was truncated or created again", cp.Offset, cl.End)
	case cp.Offset < cl.Start:
		return fmt.Sprintf("the checkpoint (offset %d) is before the changelog's log start (%d): records after it were deleted", cp.Offset, cl.Start)
	}
	age := now.Sub(cp.Since)
	if limit := cl.DeleteRetention - cl.DeleteRetention/10; age >= limit {
		return fmt.Sprintf("the checkpoint is %s old, more than 90%% of the changelog's delete.retention.ms (%s): tombstones written since may have been compacted away",
			age.Round(time.Second), cl.DeleteRetention)
	}
	return ""
}

func topicID(id [16]byte) string { return kadm.TopicID(id).String() }

// Progress is where a restore stands.
type Progress struct {
	Records int   // records read so far
	Left    int64 // changelog offsets still to read (markers included)
	// Rate is offsets read per second so far; 0 until there is one.
	Rate float64
}

// ETA is the expected time left at the rate so far; 0 when unknown.
func (p Progress) ETA() time.Duration {
	if p.Rate <= 0 {
		return 0
	}
	return time.Duration(float64(p.Left) / p.Rate * float64(time.Second))
}

// Result is what a restore read.
type Result struct {
	Records int
	// End is the changelog offset the store now reflects.
	End int64
}

// progressEvery is how many records a restore reads between progress
// reports.
const progressEvery = 256

// Restore reads changelog partition cl read_committed from plan.From to
// cl.End, its end as DescribeChangelog found it, and loads it into the
// store: the latest value per key wins and a tombstone (or an empty state)
// deletes. Every batch it writes records how far it got, so a restore cut
// short resumes; a log start that passes the read is an error (what lay
// between is gone: the next start restores in full). progress (when not
// nil) is called every few hundred records: a long restore is progress,
// not a stall, to a liveness probe. Call it only after the task's producer
// has fenced the previous owner, so that no transaction of that owner can
// still commit below the end.
func Restore(ctx context.Context, client *kgo.Client, cl Changelog, s *Store, plan Plan, progress func(Progress)) (Result, error) {
	started := time.Now()
	tp := kafkax.TopicPartition{Topic: cl.Topic, Partition: cl.Partition}
	l := s.loader(plan.since)
	defer l.close()
	n := 0
	_, err := kafkax.ReadRange(ctx, client, tp, cl.TopicID, plan.From, cl.End, func(r *kgo.Record) error {
		n++
		if n%progressEvery == 0 {
			if err := ctx.Err(); err != nil {
				return err // a revoke or a stop: what is loaded so far stays
			}
			if progress != nil {
				done := float64(r.Offset + 1 - plan.From)
				progress(Progress{Records: n, Left: cl.End - r.Offset - 1, Rate: done / time.Since(started).Seconds()})
			}
		}
		var value []byte
		if !isDelete(r.Value) {
			value = r.Value
		}
		return l.put(r.Key, value, r.Offset)
	})
	if err != nil {
		return Result{Records: n}, fmt.Errorf("restoring %s/%d: %w", cl.Topic, cl.Partition, err)
	}
	// Everything below the end is in the store now; a tombstone after the
	// end was written after the end was asked for.
	end := max(cl.End, plan.From)
	if err := l.flush(Position{Offset: end, Since: cl.At}, true); err != nil {
		return Result{Records: n}, err
	}
	return Result{Records: n, End: end}, nil
}

// isDelete reports whether a changelog value removes its key: a tombstone,
// or an empty state object as the Python library may have written it.
func isDelete(v []byte) bool { return attr.IsStoreTombstone(v) }
