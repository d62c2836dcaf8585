package transformer

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/lease"
	"github.com/flecht-dev/flecht/internal/metrics"
	"github.com/flecht-dev/flecht/internal/stagefile"
)

// Logic is a stage's per-record path as the runner's tasks run it —
// decode, state key, the transformer's call, the invalid_messages policy,
// outputs placed on their partitions and checked for size, dead letters,
// each key's state — for a caller that runs it over records it read
// itself: the offline engine (internal/offline) behind `flecht preview`.
// It is the runner's own code, not a copy: a Lane is a task whose
// records go to a function instead of a transaction, and whose state
// stays in memory, starting empty.
type Logic struct {
	r *Runner
}

// LogicOptions are what a Logic needs of the cluster, read once by the
// caller as the runner reads them when it starts (topics.go).
type LogicOptions struct {
	Stage *stagefile.Stage
	// Counts are the partition counts of the topics it writes (outputs
	// and dead-letter topics), where outputs are placed.
	Counts *kafkax.PartitionCounts
	// Limits are those topics' record size limits (nil: the producer's
	// default for every topic).
	Limits  *kafkax.RecordLimits
	Metrics *metrics.Observer
	Log     *slog.Logger
}

// NewLogic is tf's per-record path for the stage.
func NewLogic(tf Transformer, o LogicOptions) *Logic {
	r := NewRunner(Options{Stage: o.Stage, Metrics: o.Metrics, Log: o.Log})
	r.counts, r.limits = o.Counts, o.Limits
	if r.limits == nil {
		r.limits = kafkax.NewRecordLimits()
	}
	r.use(tf)
	return &Logic{r: r}
}

// Stateful says whether the logic keeps state per state key.
func (g *Logic) Stateful() bool { return g.r.stateful }

// Changelog is the topic the runner writes state to; a Lane never hands
// its records to the sink.
func (g *Logic) Changelog() string { return g.r.changelog }

// A Lane runs the records of one input partition number through the
// logic, in the order given, as that partition's task would.
type Lane struct {
	t *task
}

// NewLane makes the lane of partition: a module's instance set up with
// that partition, as the runner's task. out gets every output and dead
// letter with the input record it was made from, in the order the task
// would produce them.
func (g *Logic) NewLane(ctx context.Context, partition int32, out func(from, rec *kgo.Record)) (*Lane, error) {
	t := &task{
		r: g.r, lease: &lease.Lease{N: partition}, n: partition,
		open: newTxn(), cache: newStateCache(), clockEvery: 1,
	}
	t.sink = func(rec *kgo.Record) { out(t.from, rec) }
	if bf := g.r.batchTF; bf != nil {
		bt, err := bf.NewBatchTask(ctx, partition)
		if err != nil {
			return nil, transformerFailure(fmt.Errorf("task %d: %w", partition, err))
		}
		t.bt, t.callKeys, t.callCap = bt, map[string]struct{}{}, maxBatchCalls
	}
	return &Lane{t: t}, nil
}

// Process runs recs, which must be of the lane's partition. An error is
// what would stop the stage (an invalid message under crash, a failure
// of the transformer); the outputs of the records before it were handed
// to out.
func (l *Lane) Process(ctx context.Context, recs []*kgo.Record) error {
	t := l.t
	for _, rec := range recs {
		if rec.Partition != t.n {
			return fmt.Errorf("record %s/%d@%d handed to the lane of partition %d", rec.Topic, rec.Partition, rec.Offset, t.n)
		}
		if err := t.processOne(ctx, rec); err != nil {
			return err
		}
	}
	return t.flushCalls(ctx)
}

// State is the state each state key was left with (canonical JSON for a
// module, the builtin's JSON for a builtin); keys whose state was deleted
// or never set are absent.
func (l *Lane) State() (map[string][]byte, error) {
	out := map[string][]byte{}
	for k, e := range l.t.open.states {
		if !e.touched {
			continue
		}
		v, err := l.t.r.stateBytes(k, e)
		if err != nil {
			return nil, err
		}
		if v != nil {
			out[k] = v
		}
	}
	return out, nil
}

// Close ends the lane's instance, if it has one.
func (l *Lane) Close(ctx context.Context) {
	if l.t.bt != nil {
		l.t.bt.Close(ctx)
	}
}
