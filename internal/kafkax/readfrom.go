package kafkax

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// StartFunc picks where a read of one partition starts, given the
// partition's current bounds (log start, and the end captured now). The
// result is clamped into those bounds; returning b.End reads nothing.
type StartFunc func(tp TopicPartition, b Bounds) int64

// FromLogStart reads every partition from its log start.
func FromLogStart(_ TopicPartition, b Bounds) int64 { return b.Start }

// LastN reads about the last n offsets of every partition (fewer records
// when some of those offsets are transaction markers or compacted away).
func LastN(n int64) StartFunc {
	return func(_ TopicPartition, b Bounds) int64 { return max(b.Start, b.End-n) }
}

// FromOffsets starts each partition at the offset in starts; a partition
// missing from the map is not read.
func FromOffsets(starts map[TopicPartition]int64) StartFunc {
	return func(tp TopicPartition, b Bounds) int64 {
		if o, ok := starts[tp]; ok {
			return o
		}
		return b.End
	}
}

// OffsetsAfter returns, per partition of the topics, the first offset whose
// record timestamp is at or after t (the end offset where there is none),
// from the broker's time index. Use it with FromOffsets to read only a
// recent window of a long topic.
func OffsetsAfter(ctx context.Context, adm *kadm.Client, millis int64, topics ...string) (map[TopicPartition]int64, error) {
	if _, err := DescribeTopics(ctx, adm, topics...); err != nil {
		return nil, err
	}
	listed, err := adm.ListOffsetsAfterMilli(ctx, millis, topics...)
	if err == nil {
		err = listed.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("listing offsets for a timestamp: %w", err)
	}
	out := map[TopicPartition]int64{}
	listed.Each(func(o kadm.ListedOffset) {
		out[TopicPartition{o.Topic, o.Partition}] = o.Offset
	})
	return out, nil
}

// ReadFrom reads the given topics read_committed as ReadPartitionsToEnd
// does, but each partition from the offset start picks instead of the log
// start, up to the end offsets captured when it begins. The result's Bounds
// are the ranges actually read. Before reading it calls planned (when not
// nil) with the number of offsets it is about to cover, for a progress
// indicator.
func ReadFrom(ctx context.Context, cl *kgo.Client, topics []string, start StartFunc, planned func(offsets int64), fn func(*kgo.Record) error) (*ReadResult, error) {
	if start == nil {
		start = FromLogStart
	}
	adm := kadm.NewClient(cl)
	details, err := DescribeTopics(ctx, adm, topics...)
	if err != nil {
		return nil, err
	}
	starts, err := adm.ListStartOffsets(ctx, topics...)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("listing start offsets: %w", err)
	}
	ends, err := adm.ListCommittedOffsets(ctx, topics...)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("listing end offsets: %w", err)
	}

	res := &ReadResult{Bounds: map[TopicPartition]Bounds{}}
	var work []*partitionCursor
	var total int64
	for _, t := range topics {
		for _, pd := range details[t].Partitions.Sorted() {
			s, _ := starts.Lookup(t, pd.Partition)
			e, _ := ends.Lookup(t, pd.Partition)
			tp := TopicPartition{t, pd.Partition}
			b := Bounds{Start: s.Offset, End: e.Offset}
			from := min(max(start(tp, b), b.Start), b.End)
			res.Bounds[tp] = Bounds{Start: from, End: b.End}
			if from < b.End {
				work = append(work, &partitionCursor{tp: tp, topicID: details[t].ID, next: from, end: b.End})
				total += b.End - from
			}
		}
	}
	if planned != nil {
		planned(total)
	}
	if len(work) == 0 {
		return res, nil
	}

	n, err := readCursors(ctx, cl, adm, work, fn)
	res.Records = n
	if err != nil {
		return nil, err
	}
	return res, nil
}

// ReadRange reads one partition read_committed from offset from up to end,
// as ReadFrom does, for a caller that already knows the partition's bounds
// and topic ID: nothing is described or listed first. A log start that
// passes from while it reads is an error, not a skip: what lay between is
// gone, and a caller resuming from from must know. It returns the records
// read.
func ReadRange(ctx context.Context, cl *kgo.Client, tp TopicPartition, topicID [16]byte, from, end int64, fn func(*kgo.Record) error) (int, error) {
	return ReadRanges(ctx, cl, []Range{{TP: tp, TopicID: topicID, From: from, End: end}}, fn)
}

// Range is a stretch [From, End) of one partition whose topic ID is known.
type Range struct {
	TP      TopicPartition
	TopicID [16]byte
	From    int64
	End     int64
}

// ReadRanges is ReadRange over several partitions in one read: their
// leaders are read concurrently, fn is never called concurrently.
func ReadRanges(ctx context.Context, cl *kgo.Client, ranges []Range, fn func(*kgo.Record) error) (int, error) {
	var work []*partitionCursor
	for _, r := range ranges {
		if r.From < r.End {
			work = append(work, &partitionCursor{tp: r.TP, topicID: r.TopicID, next: r.From, end: r.End, strict: true})
		}
	}
	if len(work) == 0 {
		return 0, nil
	}
	return readCursors(ctx, cl, kadm.NewClient(cl), work, fn)
}

// readCursors reads every cursor to its end, round after round while
// leaders move, calling fn for each record (never concurrently).
func readCursors(ctx context.Context, cl *kgo.Client, adm *kadm.Client, work []*partitionCursor, fn func(*kgo.Record) error) (int, error) {
	var mu sync.Mutex // serialises fn
	n := 0
	deliver := func(recs []*kgo.Record) error {
		mu.Lock()
		defer mu.Unlock()
		for _, r := range recs {
			if err := fn(r); err != nil {
				return err
			}
			n++
		}
		return nil
	}
	for len(work) > 0 {
		byLeader, err := groupByLeader(ctx, adm, work)
		if err != nil {
			return n, err
		}
		if err := readRound(ctx, cl, byLeader, deliver); errors.Is(err, errLeaderMoved) {
			cl.ForceMetadataRefresh()
		} else if err != nil {
			return n, err
		}
		remaining := work[:0]
		for _, c := range work {
			if c.next < c.end {
				remaining = append(remaining, c)
			}
		}
		work = remaining
	}
	return n, nil
}
