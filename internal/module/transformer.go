package module

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/attr"
	"github.com/flecht-dev/flecht/internal/lineage"
	"github.com/flecht-dev/flecht/internal/stage"
	"github.com/flecht-dev/flecht/internal/transformer"
	"github.com/flecht-dev/flecht/sdk/abi"
	"github.com/flecht-dev/flecht/sdk/wire"
)

// Transformer runs a module as a stage's transformer, an instance per
// task (transformer.BatchTransformer). It checks everything a module answers
// before the runner sees it: outputs only to the declared topics, JSON
// objects as values and state, no record over 1 MiB.
type Transformer struct {
	m         *Module
	outputs   []string
	stateless bool
}

// NewTransformer makes m the transformer of a stage; a stateless one
// (Spec.Stateless) has no changelog and may set no state.
func NewTransformer(m *Module) *Transformer {
	return &Transformer{m: m, outputs: slices.Clone(m.spec.OutputTopics), stateless: m.spec.Stateless}
}

// Module is the transformer's module.
func (t *Transformer) Module() *Module { return t.m }

// The runner takes a module as a BatchTransformer (and its tasks as
// Interrupters) by interface: a method lost would make it a plain
// transformer silently, so the compiler checks.
var (
	_ transformer.BatchTransformer = (*Transformer)(nil)
	_ transformer.LogicNamer       = (*Transformer)(nil)
	_ transformer.Interrupter      = (*Task)(nil)
)

// Label names the module in errors: its name and sha256 prefix.
func (t *Transformer) Label() string { return t.m.label() }

// Logic names the module in the lineage headers of its outputs, by its
// sha256 prefix.
func (t *Transformer) Logic() string { return lineage.ModuleLogic(t.m.SHA256()) }

// OutputTopics are the topics the module may write to; startup checks
// they exist.
func (t *Transformer) OutputTopics() []string { return t.outputs }

// Stateless reports whether the stage keeps no state.
func (t *Transformer) Stateless() bool { return t.stateless }

// Transform is never called: the runner calls a BatchTransformer's tasks.
func (t *Transformer) Transform(context.Context, *transformer.Incoming, attr.State, transformer.Emit) error {
	return errors.New("a module transforms batches: the runner calls NewBatchTask")
}

// NewBatchTask instantiates the module for partition's task.
func (t *Transformer) NewBatchTask(ctx context.Context, partition int32) (transformer.BatchTask, error) {
	inst, err := t.m.NewInstance(ctx, partition)
	if err != nil {
		return nil, err
	}
	return &Task{t: t, inst: inst}, nil
}

// Task is one task's instance of a module transformer.
type Task struct {
	t     *Transformer
	inst  *Instance
	batch Batch
	rec   abi.Record
	rr    abi.ResultReader
	res   abi.Result
	arena []byte // the batch's results, copied out of the module's memory
	// lastCalls is the length of the batch before, perRecord the results'
	// bytes per record it took.
	lastCalls, perRecord int
	// marks are the calls' message counts before the batch, to undo it.
	marks []int
	// mu guards inst against Interrupt while renew replaces it.
	mu sync.Mutex
}

// Close ends the instance.
func (k *Task) Close(ctx context.Context) { k.inst.Close(ctx) }

// TransformBatch runs the module over calls and fills in their results:
// a call per record under record isolation, one call for all under task
// isolation.
func (k *Task) TransformBatch(ctx context.Context, calls []transformer.Call) error {
	// A new arena for each batch: the outputs of the batch before live
	// on in the old one until their transaction is produced. It is sized
	// by what the records of the batch before needed.
	if k.lastCalls > 0 {
		k.perRecord = len(k.arena) / k.lastCalls
	}
	k.arena = make([]byte, 0, (k.perRecord+64)*len(calls))
	k.lastCalls = len(calls)
	if k.inst.image == nil {
		return k.transformCalls(calls)
	}
	// One thread for the batch: the resets between its records know from
	// the thread's page faults whether the module wrote a page it had not
	// written before (linearMemory.revert).
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	k.inst.memory.otherThread()
	if len(calls) == 1 {
		return k.transformEach(calls, false)
	}
	// The resets after the batch's first copy back the pages known to be
	// written, without counting faults per record; one count at the end
	// proves no record wrote another page. If one did, a record after it
	// may have seen what it wrote there: the batch runs again, counting
	// per record, on a fresh instance if the first run failed (what
	// failed may have been the leftover's doing).
	k.marks = k.marks[:0]
	for i := range calls {
		k.marks = append(k.marks, len(calls[i].Messages))
	}
	err := k.transformEach(calls, true)
	if err != nil && k.inst.abandoned.Load() {
		return err // interrupted, or over its time limit: nothing to prove
	}
	grew, werr := k.inst.memory.newPages()
	if werr != nil {
		return k.inst.brk(fmt.Errorf("%s could not be reset between records: %w", k.t.m.label(), werr))
	}
	if !grew {
		return err
	}
	for i := range calls {
		c := &calls[i]
		c.Messages, c.Rejected, c.SetState, c.NewState = c.Messages[:k.marks[i]], "", false, nil
	}
	if err != nil {
		if rerr := k.renew(ctx); rerr != nil {
			return err
		}
	}
	return k.transformEach(calls, false)
}

// transformEach runs a call per record; trusted: every reset but the
// first copies back the pages known (Instance.trustReset).
func (k *Task) transformEach(calls []transformer.Call, trusted bool) error {
	defer func() { k.inst.trustReset = false }()
	for i := range calls {
		k.inst.trustReset = trusted && i > 0
		if err := k.transformCalls(calls[i : i+1]); err != nil {
			return err
		}
	}
	return nil
}

// renew replaces the instance with a fresh one.
func (k *Task) renew(ctx context.Context) error {
	inst, err := k.t.m.NewInstance(ctx, k.inst.partition)
	if err != nil {
		return err
	}
	k.mu.Lock()
	old := k.inst
	k.inst = inst
	k.mu.Unlock()
	old.Close(ctx)
	return nil
}

// transformCalls runs one call of the module over calls.
func (k *Task) transformCalls(calls []transformer.Call) error {
	k.batch.Reset()
	for i := range calls {
		k.encode(&calls[i])
		k.batch.Add(&k.rec, calls[i].Rec.Topic)
	}
	out, err := k.inst.Transform(&k.batch)
	if err != nil {
		return err
	}
	// The results alias the module's memory until its next call, and the
	// outputs live until their transaction is produced: copied into the
	// batch's arena. An arena that grows leaves the outputs of its records
	// before in the array they were copied to, which they keep alive.
	start := len(k.arena)
	k.arena = append(k.arena, out...)
	k.rr.Reset(k.arena[start:len(k.arena):len(k.arena)])
	for i := range calls {
		if err := k.rr.Next(&k.res); err != nil {
			return k.inst.brk(fmt.Errorf("%s answered with results that do not read (ABI v%d): %w", k.t.m.label(), abi.Version, err))
		}
		if err := k.take(&calls[i], &k.res, i); err != nil {
			return err
		}
	}
	if err := k.rr.End(); err != nil {
		return k.inst.brk(fmt.Errorf("%s answered with results that do not read (ABI v%d): %w", k.t.m.label(), abi.Version, err))
	}
	return nil
}

// encode fills k.rec with c's record. The bytes alias c's record and
// strings, which the batch only copies.
func (k *Task) encode(c *transformer.Call) {
	rec := c.Rec
	r := &k.rec
	*r = abi.Record{Partition: rec.Partition, Offset: rec.Offset, Timestamp: rec.Timestamp.UnixMilli(),
		Topic: bytesOf(rec.Topic), Key: rec.Key, Value: rec.Value, StateKey: bytesOf(c.StateKey), Headers: r.Headers[:0]}
	if rec.Key == nil {
		r.Flags |= abi.RecordKeyNull
	}
	if rec.Value == nil {
		r.Flags |= abi.RecordValueNull
	}
	if c.NoStateKey {
		r.Flags |= abi.RecordNoStateKey
		r.StateKey = nil
	} else if c.State != nil {
		r.Flags |= abi.RecordHasState
		r.State = c.State
	}
	for _, h := range rec.Headers {
		r.Headers = append(r.Headers, abi.Header{Key: bytesOf(h.Key), Value: h.Value})
	}
}

// take checks one result and fills in c.
func (k *Task) take(c *transformer.Call, res *abi.Result, i int) error {
	where := func() string { return k.batch.Where(i) } // for errors only
	switch res.Kind {
	case abi.ResultRejected:
		c.Rejected = clip(string(res.Reason), 1024) // it goes to logs and dead-letter headers
		if c.Rejected == "" {
			c.Rejected = "rejected by " + k.t.m.label()
		}
		return nil
	case abi.ResultFailed:
		return k.inst.brk(&Failure{Msg: fmt.Sprintf("%s failed on %s: %s", k.t.m.label(), where(), clip(string(res.Reason), 2048))})
	}
	for j := range res.Messages {
		m, err := k.message(c.Rec, &res.Messages[j])
		if err != nil {
			return k.inst.brk(fmt.Errorf("%s on %s, message %d: %w", k.t.m.label(), where(), j, err))
		}
		c.Messages = append(c.Messages, m)
	}
	if res.StateAction != abi.StateKeep {
		if err := k.mayKeepState(c); err != nil {
			return k.inst.brk(fmt.Errorf("%s on %s: %w", k.t.m.label(), where(), err))
		}
	}
	switch res.StateAction {
	case abi.StateDelete:
		c.SetState, c.NewState = true, nil
	case abi.StateSet:
		// What json_set spliced is canonical already (host.go).
		st, err := res.State, error(nil)
		if !k.inst.spliced.made(st) {
			st, err = canonicalState(st)
		}
		if err != nil {
			return k.inst.brk(fmt.Errorf("%s on %s: its new state %w", k.t.m.label(), where(), err))
		}
		if len(st)+len(c.StateKey) > MaxMessageBytes {
			return k.inst.brk(fmt.Errorf("%s on %s: its new state is %d bytes, over the changelog's limit of %d (1 MiB)", k.t.m.label(), where(), len(st), MaxMessageBytes))
		}
		c.SetState, c.NewState = true, st
	}
	return nil
}

// mayKeepState says why c's record may set or delete no state: the stage
// keeps none, or the record is a tombstone without a state key.
func (k *Task) mayKeepState(c *transformer.Call) error {
	switch {
	case k.t.stateless:
		return errors.New("it set state, but the stage is stateless (transform.stateless: true): set no state, or remove stateless from the stage file")
	case c.NoStateKey:
		return errors.New("it set state for a tombstone, which has no state key: the stage's state_key reads the value and a tombstone has none; set no state for such a tombstone")
	}
	return nil
}

// message checks one output and makes it a stage.Message: the input's
// event time and headers unless the module gave its own.
func (k *Task) message(in *kgo.Record, m *abi.Message) (stage.Message, error) {
	// The declared topic's own string: none allocated per message.
	i := slices.IndexFunc(k.t.outputs, func(o string) bool { return o == string(m.Topic) })
	if i < 0 {
		return stage.Message{}, fmt.Errorf("it sent to topic %q, which is not among the stage's output_topics %q: declare it there", m.Topic, k.t.outputs)
	}
	topic := k.t.outputs[i]
	size := len(m.Key) + len(m.Value)
	for _, h := range m.Headers {
		size += len(h.Key) + len(h.Value)
	}
	if size > MaxMessageBytes {
		return stage.Message{}, fmt.Errorf("its record to %s is %d bytes, over the limit of %d (1 MiB)", topic, size, MaxMessageBytes)
	}
	out := stage.Message{Topic: topic, RawKey: m.Key, Timestamp: in.Timestamp, Headers: in.Headers}
	switch {
	case m.Flags&abi.MessageKeyNull != 0:
		out.RawKey, out.NullKey = nil, true
	case !utf8.Valid(m.Key):
		return stage.Message{}, fmt.Errorf("its record to %s has a key that is not valid UTF-8", topic)
	case m.Key == nil:
		out.RawKey = []byte{}
	}
	if m.Flags&abi.MessageValueNull != 0 {
		out.Tombstone = true
	} else {
		// What json_set spliced is an object already (host.go).
		if !k.inst.spliced.made(m.Value) {
			if err := checkObject(m.Value); err != nil {
				return stage.Message{}, fmt.Errorf("its record to %s has a value that is not a JSON object: %w", topic, err)
			}
		}
		out.RawValue = m.Value
		if out.RawValue == nil {
			out.RawValue = []byte{}
		}
	}
	if m.Flags&abi.MessageTimestamp != 0 {
		out.Timestamp = time.UnixMilli(m.Timestamp)
	}
	if m.Flags&abi.MessageHeaders != 0 {
		out.Headers = make([]kgo.RecordHeader, len(m.Headers))
		for i, h := range m.Headers {
			out.Headers[i] = kgo.RecordHeader{Key: string(h.Key), Value: h.Value}
		}
	}
	if m.Flags&abi.MessagePartition != 0 {
		out.Partition, out.Explicit = m.Partition, true
	}
	return out, nil
}

// checkObject accepts a JSON object, as the runner would decode it: the
// canonical form at once, anything else through the strict decoder.
func checkObject(v []byte) error {
	if wire.IsCanonicalObject(v) {
		return nil
	}
	_, err := wire.DecodeObject(v)
	return err
}

// canonicalState is a module's new state in the canonical form the
// changelog holds (an empty object deletes the state: nil).
func canonicalState(st []byte) ([]byte, error) {
	if !wire.IsCanonicalObject(st) {
		obj, err := wire.DecodeObject(st)
		if err != nil {
			return nil, fmt.Errorf("is not a JSON object: %w", err)
		}
		if st, err = wire.Marshal(obj); err != nil {
			return nil, fmt.Errorf("cannot be written canonically: %w", err)
		}
	}
	if string(st) == "{}" {
		return nil, nil
	}
	return st, nil
}

// bytesOf views s as bytes without copying; the bytes must not be
// written to.
func bytesOf(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// Interrupt ends the call in progress soon (Instance.Interrupt): the
// runner's Interrupter, when the stage stops.
func (k *Task) Interrupt() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.inst.Interrupt()
}
