package kafkax

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TopicPartition names one partition of one topic.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// Bounds are the offsets a read covered for one partition: from the log
// start to the end captured before reading (the last stable offset, so an
// open transaction never makes the read wait).
type Bounds struct {
	Start int64
	End   int64
}

// ReadResult tells what a read-to-end covered.
type ReadResult struct {
	Bounds  map[TopicPartition]Bounds
	Records int
}

// ReadToEnd reads every partition of the given topics read_committed, from
// the log start to the end offsets captured when it starts, and returns the
// records in offset order per partition (partitions in topic, partition
// order). It never blocks on an empty topic, and a missing topic is an error.
func ReadToEnd(ctx context.Context, cl *kgo.Client, topics ...string) ([]*kgo.Record, error) {
	var out []*kgo.Record
	_, err := ReadToEndFunc(ctx, cl, topics, func(r *kgo.Record) error {
		out = append(out, r)
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Topic != b.Topic {
			return a.Topic < b.Topic
		}
		if a.Partition != b.Partition {
			return a.Partition < b.Partition
		}
		return a.Offset < b.Offset
	})
	return out, nil
}

// ReadToEndFunc is ReadToEnd with a callback instead of a slice, for reads
// too large to hold. fn sees each partition's records in offset order;
// partitions led by different brokers are read concurrently but fn is never
// called concurrently.
//
// It issues Fetch requests itself rather than running a consumer: a fetch
// response tells where the next fetch starts even when the last offsets
// before the end are transaction markers, aborted records or compacted away,
// which a record-by-record consumer cannot see.
func ReadToEndFunc(ctx context.Context, cl *kgo.Client, topics []string, fn func(*kgo.Record) error) (*ReadResult, error) {
	return ReadPartitionsToEnd(ctx, cl, topics, nil, fn)
}

// ReadPartitionsToEnd reads only the given partitions of the topics (all when
// only is nil), as ReadToEndFunc does.
func ReadPartitionsToEnd(ctx context.Context, cl *kgo.Client, topics []string, only map[string][]int32, fn func(*kgo.Record) error) (*ReadResult, error) {
	start := FromLogStart
	if only != nil {
		want := map[TopicPartition]bool{}
		for t, parts := range only {
			for _, p := range parts {
				want[TopicPartition{t, p}] = true
			}
		}
		start = func(tp TopicPartition, b Bounds) int64 {
			if want[tp] {
				return b.Start
			}
			return b.End // not asked for: read nothing
		}
	}
	return ReadFrom(ctx, cl, topics, start, nil, fn)
}

// readRound reads from every leader concurrently until its partitions are
// done, a leader moves (errLeaderMoved) or something fails; the first real
// failure cancels the others.
func readRound(ctx context.Context, cl *kgo.Client, byLeader map[int32][]*partitionCursor, deliver func([]*kgo.Record) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, len(byLeader))
	for leader, cursors := range byLeader {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fetchFromLeader(ctx, cl, leader, cursors, deliver); err != nil {
				errs <- err
				if !errors.Is(err, errLeaderMoved) {
					cancel()
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	// The failing reader sends its error before it cancels the others, so
	// the first error that is not a leader move is the cause.
	moved := false
	for e := range errs {
		if !errors.Is(e, errLeaderMoved) {
			return e
		}
		moved = true
	}
	if moved {
		return errLeaderMoved
	}
	return nil
}

type partitionCursor struct {
	tp      TopicPartition
	topicID [16]byte
	next    int64
	end     int64
	// strict: a log start past next is an error, not a jump ahead.
	strict bool
}

var errLeaderMoved = errors.New("partition leadership moved")

func groupByLeader(ctx context.Context, adm *kadm.Client, work []*partitionCursor) (map[int32][]*partitionCursor, error) {
	topics := map[string]bool{}
	for _, c := range work {
		topics[c.tp.Topic] = true
	}
	names := make([]string, 0, len(topics))
	for t := range topics {
		names = append(names, t)
	}
	details, err := DescribeTopics(ctx, adm, names...)
	if err != nil {
		return nil, err
	}
	out := map[int32][]*partitionCursor{}
	for _, c := range work {
		pd, ok := details[c.tp.Topic].Partitions[c.tp.Partition]
		if !ok || pd.Leader < 0 {
			return nil, fmt.Errorf("partition %s/%d has no leader", c.tp.Topic, c.tp.Partition)
		}
		out[pd.Leader] = append(out[pd.Leader], c)
	}
	return out, nil
}

// fetchFromLeader fetches the cursors' partitions from one broker until each
// reaches its end.
func fetchFromLeader(ctx context.Context, cl *kgo.Client, leader int32, cursors []*partitionCursor, deliver func([]*kgo.Record) error) error {
	br := cl.Broker(int(leader))
	decompressor := kgo.DefaultDecompressor()
	idle := 0
	for {
		var open []*partitionCursor
		for _, c := range cursors {
			if c.next < c.end {
				open = append(open, c)
			}
		}
		if len(open) == 0 {
			return nil
		}
		req := fetchRequest(open)
		before := progress(open)
		kresp, err := br.Request(ctx, req)
		if err != nil {
			return fmt.Errorf("fetching from broker %d: %w", leader, err)
		}
		resp := kresp.(*kmsg.FetchResponse)
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return fmt.Errorf("fetching from broker %d: %w", leader, err)
		}
		byKey := map[TopicPartition]*partitionCursor{}
		byID := map[[16]byte]string{}
		for _, c := range open {
			byKey[c.tp] = c
			byID[c.topicID] = c.tp.Topic
		}
		for i := range resp.Topics {
			rt := &resp.Topics[i]
			name := rt.Topic
			if name == "" {
				name = byID[rt.TopicID]
			}
			for j := range rt.Partitions {
				rp := &rt.Partitions[j]
				c := byKey[TopicPartition{name, rp.Partition}]
				if c == nil {
					continue
				}
				switch err := kerr.ErrorForCode(rp.ErrorCode); {
				case err == nil:
				case errors.Is(err, kerr.NotLeaderForPartition), errors.Is(err, kerr.FencedLeaderEpoch),
					errors.Is(err, kerr.UnknownLeaderEpoch), errors.Is(err, kerr.LeaderNotAvailable):
					return errLeaderMoved
				case errors.Is(err, kerr.OffsetOutOfRange):
					// Retention removed what we were about to read; go on
					// from the new log start rather than fail the read.
					if rp.LogStartOffset > c.next && !c.strict {
						c.next = rp.LogStartOffset
						continue
					}
					return fmt.Errorf("reading %s/%d at offset %d: %w", name, rp.Partition, c.next, err)
				default:
					return fmt.Errorf("reading %s/%d: %w", name, rp.Partition, NeedsACL(err, "Read on topic "+name))
				}
				fp, next := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{
					Offset:         c.next,
					IsolationLevel: kgo.ReadCommitted(),
					Topic:          name,
					Partition:      rp.Partition,
				}, rp, decompressor, nil)
				if fp.Err != nil && len(fp.Records) == 0 {
					return fmt.Errorf("decoding %s/%d at offset %d: %w", name, rp.Partition, c.next, fp.Err)
				}
				keep := fp.Records[:0]
				for _, r := range fp.Records {
					if r.Offset >= c.next && r.Offset < c.end {
						keep = append(keep, r)
					}
				}
				if err := deliver(keep); err != nil {
					return err
				}
				if next > c.next {
					c.next = next
				}
			}
		}
		// Every offset below the captured end is decided, so each fetch
		// should move; a broker that keeps answering empty is a fault,
		// not a reason to spin forever.
		if progress(open) == before {
			if idle++; idle >= maxIdleFetches {
				c := open[0]
				return fmt.Errorf("reading %s/%d: broker %d returned no data at offset %d (end %d) %d times", c.tp.Topic, c.tp.Partition, leader, c.next, c.end, idle)
			}
		} else {
			idle = 0
		}
	}
}

const maxIdleFetches = 50

func progress(cs []*partitionCursor) int64 {
	var sum int64
	for _, c := range cs {
		sum += c.next
	}
	return sum
}

func fetchRequest(open []*partitionCursor) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = 200
	req.MinBytes = 1
	req.MaxBytes = 32 << 20
	req.IsolationLevel = 1 // read_committed
	req.SessionID = 0
	req.SessionEpoch = -1 // no fetch session: every request is complete
	topics := map[string]int{}
	for _, c := range open {
		i, ok := topics[c.tp.Topic]
		if !ok {
			t := kmsg.NewFetchRequestTopic()
			t.Topic = c.tp.Topic
			t.TopicID = c.topicID
			req.Topics = append(req.Topics, t)
			i = len(req.Topics) - 1
			topics[c.tp.Topic] = i
		}
		p := kmsg.NewFetchRequestTopicPartition()
		p.Partition = c.tp.Partition
		p.FetchOffset = c.next
		p.CurrentLeaderEpoch = -1
		p.LogStartOffset = -1
		p.PartitionMaxBytes = 4 << 20
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, p)
	}
	return req
}
