// Package transformer runs transformers. A transformer is per-record logic
// behind the runner in this package, which owns everything exactly-once needs: tasks
// per input partition with fenced transactional producers, state restored
// from the changelog, and per task one transaction per commit interval
// carrying outputs, state and input offsets (docs/contract.md §3).
package transformer

import (
	"context"
	"fmt"
	"time"

	"github.com/flecht-dev/flecht/internal/stage"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/attr"
)

// Incoming is one input record as a transformer sees it. Value is the
// decoded JSON object; Tombstone is true for a null value (Value is then
// empty). Under a state_key that reads the value a tombstone has no state
// key: it comes with an empty state and must not emit one.
type Incoming struct {
	Key       string
	Value     attr.Event
	Tombstone bool
	Topic     string
	Partition int32
	Offset    int64
	Timestamp time.Time
	Headers   []kgo.RecordHeader
	// Raw is the record's value bytes as read, for stages that forward
	// verbatim.
	Raw []byte
}

// Emit is how a transformer answers, the two yields of the upstream
// contract: any number of messages, and the key's new state. The last State
// call wins; an empty state deletes the key's state.
type Emit interface {
	Message(m stage.Message)
	State(s attr.State)
}

// Transformer is per-record logic. It must not keep per-key state in
// memory: state lives in the State it is given and emits, so it survives
// crashes, rebalances and replays. An error crashes the stage; nothing of
// the task's open transaction commits and the restart processes the record
// again. A record
// the transformer cannot use (bad data, not a bug) is rejected with
// Invalid instead: it then follows the stage's invalid_messages policy.
type Transformer interface {
	Transform(ctx context.Context, in *Incoming, state attr.State, out Emit) error
}

// RawTransformer is a Transformer with a faster path for records it can
// handle from their value's bytes alone (count stamps one member on a
// canonical JSON object), skipping the decode into Value and the encoding
// of its outputs. The runner calls TransformRaw first, with in.Value empty
// and in.Raw the value's bytes (nil for a tombstone), not yet checked to be
// valid JSON. When it answers handled=false it must have emitted nothing;
// the runner then decodes the record as usual (an invalid one follows
// invalid_messages) and calls Transform. The runner takes this path only
// when the state key does not read the value.
type RawTransformer interface {
	Transformer
	TransformRaw(ctx context.Context, in *Incoming, state attr.State, out Emit) (handled bool, err error)
}

// InvalidRecordError rejects one input record as invalid. The runner
// routes it through the invalid_messages policy (docs/contract.md §7) exactly like a
// record that does not decode: crash stops the stage, skip and dlq drop
// what the call emitted and go on inside the same transaction. Reason
// needs no location: the runner adds topic, partition and offset.
type InvalidRecordError struct {
	Reason string
}

func (e *InvalidRecordError) Error() string { return e.Reason }

// Invalid rejects the record being transformed; see InvalidRecordError.
func Invalid(format string, args ...any) error {
	return &InvalidRecordError{Reason: fmt.Sprintf(format, args...)}
}

// TransformFunc adapts a function to Transformer.
type TransformFunc func(ctx context.Context, in *Incoming, state attr.State, out Emit) error

// Transform calls f.
func (f TransformFunc) Transform(ctx context.Context, in *Incoming, state attr.State, out Emit) error {
	return f(ctx, in, state, out)
}

// OutputDeclarer is implemented by transformers that know their output
// topics up front, so startup can check they exist.
type OutputDeclarer interface {
	OutputTopics() []string
}

// DLQUser is implemented by transformers that may send records to
// dead-letter topics themselves; startup then ensures those topics exist.
type DLQUser interface {
	UsesDLQ() bool
}

// BatchTransformer is a transformer with an instance of its own per task,
// called with batches of records: a WebAssembly module (internal/module),
// where each call crosses into the module and a batch shares the cost of
// the crossing. It sees values and state as bytes (state as canonical
// JSON) and never has Transform called.
type BatchTransformer interface {
	// NewBatchTask makes the instance of the task of partition, when the
	// task starts; the task closes it when it ends. An error stops the
	// stage.
	NewBatchTask(ctx context.Context, partition int32) (BatchTask, error)
	// Label names the transformer in the errors the runner finds in what
	// it answered (a module: its name and sha256 prefix).
	Label() string
}

// BatchTask is one task's instance of a BatchTransformer.
type BatchTask interface {
	// TransformBatch fills in the result of every call, in order. The
	// records of a batch have distinct state keys, so each sees the state
	// the previous record of its key left. An error stops the stage;
	// nothing of the task's open transaction commits.
	TransformBatch(ctx context.Context, calls []Call) error
	Close(ctx context.Context)
}

// Interrupter is a BatchTask whose call in progress can be ended from
// another goroutine. When the stage stops (SIGTERM) the runner interrupts
// every task's instance: the call ends soon with an error, and the
// records it held are neither committed nor counted as failed; the next
// run processes them.
type Interrupter interface {
	Interrupt()
}

// Call is one record of a batch and, once TransformBatch returned, what
// the transformer answered for it.
type Call struct {
	Rec *kgo.Record
	// StateKey is the record's state key; NoStateKey marks a tombstone
	// under a state_key that reads the value, which has none.
	StateKey   string
	NoStateKey bool
	// State is the state key's state as canonical JSON (nil: none).
	State []byte

	// Rejected, when set, is why the record is invalid: the stage's
	// invalid_messages policy decides, and nothing else of the answer
	// counts.
	Rejected string
	// Messages are the outputs, their bytes their own.
	Messages []stage.Message
	// SetState: the record set its state key's state to NewState
	// (canonical JSON; nil deletes it).
	SetState bool
	NewState []byte

	entry *stateEntry
}
