package offline

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/lineage"
	"github.com/flecht-dev/flecht/internal/transformer"
)

// Range bounds the input the engine reads: every input partition from a
// start to the end it has when the run begins (its last stable offset,
// so the records of a transaction still open are not waited for).
type Range struct {
	// Since starts each partition at its first record at or after Since,
	// as `flecht replay --to-datetime` resets it; zero: at its log start,
	// the whole history a replay reads by default.
	Since time.Time
	// MaxRecords reads at most this many records of each input partition
	// (0: all of them).
	MaxRecords int64
	// Spans, when set, reads only the input partitions it names, each
	// from Start (or its log start, if later) up to End, not included:
	// `flecht verify` reruns the logic up to the committed offsets.
	Spans map[kafkax.TopicPartition]kafkax.Bounds
}

// Output is one record a logic would write: an output, or a dead letter
// (an invalid message under invalid_messages: dlq, or a builtin's own).
type Output struct {
	// Logic is the index of the logic among those Run was given.
	Logic int
	// Source is the input record it was made from.
	Source lineage.Source
	// Index is its place among the records its source made, from 0.
	Index      int
	DeadLetter bool
	Record     *kgo.Record
}

// Result is what a run read and the state each logic ended with.
type Result struct {
	// Inputs is the number of input records read.
	Inputs int64
	// Read is the offsets read of each input partition.
	Read map[kafkax.TopicPartition]kafkax.Bounds
	// States is, per logic, the state each state key was left with.
	States []map[string][]byte
}

// RunOptions are a run's range and its progress.
type RunOptions struct {
	Range Range
	// Planned is told how many offsets the run covers, before it reads.
	Planned func(offsets int64)
	// Read is told of input records as they are read.
	Read func(records int)
}

// LogicError is a logic's failure on the input: what would stop the
// stage (an invalid message under invalid_messages: crash, a module that
// fails), from the logic of that index.
type LogicError struct {
	Logic int
	Err   error
}

func (e *LogicError) Error() string { return e.Err.Error() }
func (e *LogicError) Unwrap() error { return e.Err }

// chunkRecords is how many records of one partition the reader hands its
// lane at once.
const chunkRecords = 512

// errEnough ends a read once every partition gave MaxRecords.
var errEnough = errors.New("every partition read up to the record limit")

// Run reads the range of the env's input topics once and runs every
// logic over it: a lane per input partition number and logic, each with
// empty state, the partitions in parallel (as many at once as
// GOMAXPROCS), every logic seeing the same records in the same order.
// emit gets each output as its lane makes it, never concurrently.
func (e *Env) Run(ctx context.Context, logics []*transformer.Logic, o RunOptions, emit func(Output)) (*Result, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var emitMu sync.Mutex
	lanes := make([]*lane, e.partitions)
	defer func() {
		for _, l := range lanes {
			if l != nil {
				l.close()
			}
		}
	}()
	for p := range lanes {
		l, err := newLane(ctx, int32(p), logics, func(out Output) {
			emitMu.Lock()
			defer emitMu.Unlock()
			emit(out)
		})
		if err != nil {
			return nil, err
		}
		lanes[p] = l
	}

	var (
		failMu  sync.Mutex
		failure error
	)
	fail := func(err error) {
		failMu.Lock()
		if failure == nil {
			failure = err
		}
		failMu.Unlock()
		cancel()
	}
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for _, l := range lanes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.run(ctx, sem, fail)
		}()
	}

	start, working := e.start(ctx, o.Range)
	counts := map[kafkax.TopicPartition]int64{}
	capped := 0
	var inputs int64
	res, err := kafkax.ReadFrom(ctx, e.client, e.stage.InputTopics, start, o.Planned, func(rec *kgo.Record) error {
		if int(rec.Partition) >= len(lanes) {
			return fmt.Errorf("input topic %s has partition %d, but had %d when the run began: run it again", rec.Topic, rec.Partition, len(lanes))
		}
		if o.Range.Spans != nil && rec.Offset >= o.Range.Spans[kafkax.TopicPartition{Topic: rec.Topic, Partition: rec.Partition}].End {
			return nil
		}
		if limit := o.Range.MaxRecords; limit > 0 {
			tp := kafkax.TopicPartition{Topic: rec.Topic, Partition: rec.Partition}
			if counts[tp] >= limit {
				return nil
			}
			if counts[tp]++; counts[tp] == limit {
				if capped++; capped == *working {
					lanes[rec.Partition].add(ctx, rec)
					inputs++
					return errEnough
				}
			}
		}
		inputs++
		if o.Read != nil && inputs%chunkRecords == 0 {
			o.Read(chunkRecords)
		}
		lanes[rec.Partition].add(ctx, rec)
		return nil
	})
	if errors.Is(err, errEnough) {
		err = nil
	}
	for _, l := range lanes {
		l.flush(ctx)
		close(l.in)
	}
	wg.Wait()
	if failure != nil {
		return nil, failure
	}
	if err != nil {
		return nil, fmt.Errorf("reading the input: %w", err)
	}
	if o.Read != nil {
		o.Read(int(inputs % chunkRecords))
	}
	out := &Result{Inputs: inputs, States: make([]map[string][]byte, len(logics))}
	if res != nil {
		out.Read = res.Bounds
	}
	for i := range logics {
		out.States[i] = map[string][]byte{}
		for _, l := range lanes {
			st, err := l.lanes[i].State()
			if err != nil {
				return nil, &LogicError{Logic: i, Err: err}
			}
			for k, v := range st {
				out.States[i][k] = v
			}
		}
	}
	return out, nil
}

// start is where each partition's read starts, and (once the read has
// asked for every partition) how many partitions have records to read.
func (e *Env) start(ctx context.Context, r Range) (kafkax.StartFunc, *int) {
	working := new(int)
	var after map[kafkax.TopicPartition]int64
	if !r.Since.IsZero() {
		var err error
		after, err = kafkax.OffsetsAfter(ctx, kadm.NewClient(e.client), r.Since.UnixMilli(), e.stage.InputTopics...)
		if err != nil {
			after = nil // the read's own listing reports the cluster's failure
		}
	}
	return func(tp kafkax.TopicPartition, b kafkax.Bounds) int64 {
		from := b.Start
		if after != nil {
			if o, ok := after[tp]; ok {
				from = o
			} else {
				from = b.End
			}
		}
		if r.Spans != nil {
			if s, ok := r.Spans[tp]; ok && s.Start < s.End {
				from = max(from, s.Start)
			} else {
				from = b.End
			}
		}
		if min(max(from, b.Start), b.End) < b.End {
			*working++
		}
		return from
	}, working
}

// lane is the lanes of one input partition number, one per logic, fed
// the partition's records by the reader.
type lane struct {
	p     int32
	in    chan []*kgo.Record
	buf   []*kgo.Record
	lanes []*transformer.Lane
	// last is, per logic, the input record whose outputs came last, and
	// index how many it made so far.
	last  []*kgo.Record
	index []int
}

func newLane(ctx context.Context, p int32, logics []*transformer.Logic, emit func(Output)) (*lane, error) {
	l := &lane{p: p, in: make(chan []*kgo.Record, 4), last: make([]*kgo.Record, len(logics)), index: make([]int, len(logics))}
	for i, g := range logics {
		tl, err := g.NewLane(ctx, p, func(from, rec *kgo.Record) {
			if from != l.last[i] {
				l.last[i], l.index[i] = from, 0
			}
			emit(Output{
				Logic: i, Source: lineage.Source{Topic: from.Topic, Partition: from.Partition, Offset: from.Offset},
				Index: l.index[i], DeadLetter: isDeadLetter(rec), Record: rec,
			})
			l.index[i]++
		})
		if err != nil {
			l.close()
			return nil, &LogicError{Logic: i, Err: err}
		}
		l.lanes = append(l.lanes, tl)
	}
	return l, nil
}

// add buffers one record, handing a full chunk to the lane's goroutine.
func (l *lane) add(ctx context.Context, rec *kgo.Record) {
	l.buf = append(l.buf, rec)
	if len(l.buf) >= chunkRecords {
		l.flush(ctx)
	}
}

func (l *lane) flush(ctx context.Context) {
	if len(l.buf) == 0 {
		return
	}
	select {
	case l.in <- l.buf:
	case <-ctx.Done():
	}
	l.buf = nil
}

// run processes the lane's chunks until the reader closes it; after a
// failure (its own or another lane's) it only drains them.
func (l *lane) run(ctx context.Context, sem chan struct{}, fail func(error)) {
	for recs := range l.in {
		if ctx.Err() != nil {
			continue
		}
		sem <- struct{}{}
		for i, tl := range l.lanes {
			if err := tl.Process(ctx, recs); err != nil {
				fail(&LogicError{Logic: i, Err: err})
				break
			}
		}
		<-sem
	}
}

func (l *lane) close() {
	for _, tl := range l.lanes {
		tl.Close(context.Background())
	}
}

// isDeadLetter says whether a record a lane made is a dead letter: it
// names the record it stands for (transformer's dead-letter headers).
func isDeadLetter(rec *kgo.Record) bool {
	for _, h := range rec.Headers {
		if h.Key == transformer.HeaderDLQTopic {
			return true
		}
	}
	return false
}
