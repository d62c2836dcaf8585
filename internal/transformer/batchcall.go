package transformer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/attr"
)

// A BatchTransformer's records are queued as calls and handed over in
// batches. A batch ends before a record whose state key is already in it
// (so each record sees the state the previous record of its key left),
// at the batch limits (fewer calls when records take long: callCap),
// before an invalid record is handled (outputs keep
// the input's order), and at the end of each poll's records and before a
// transaction seals: a transaction holds only records that were
// transformed.
const (
	maxBatchCalls = 64
	maxBatchBytes = 1 << 20
)

// callCap is how many records a call may hold when each takes about per:
// a call ends its records together, and it must leave a transaction that
// may take cut (txnCut) room for more than one call.
func callCap(per, cut time.Duration) int {
	if per <= 0 {
		return maxBatchCalls
	}
	return int(min(max(cut/4/per, 1), maxBatchCalls))
}

// queueRecord queues one record of a BatchTransformer's task.
func (r *Runner) queueRecord(ctx context.Context, t *task, rec *kgo.Record) error {
	r.obs.MessageIn(rec.Topic, len(rec.Key)+len(rec.Value))
	c := Call{Rec: rec}
	key, err := attr.DecodeKey(rec.Key)
	if err != nil {
		return r.invalidInOrder(ctx, t, rec, err.Error())
	}
	c.StateKey = key
	if r.stateful && !r.template.IsDefault() {
		d, reason := r.decode(rec)
		if reason != "" {
			return r.invalidInOrder(ctx, t, rec, reason)
		}
		c.StateKey, c.NoStateKey = d.stateKey, d.keyless
	}
	if r.stateful && !c.NoStateKey {
		if _, queued := t.callKeys[c.StateKey]; queued {
			if err := t.flushCalls(ctx); err != nil {
				return err
			}
		}
		entry, err := r.loadState(t, c.StateKey)
		if err != nil {
			return err
		}
		c.entry, c.State = entry, entry.raw
		t.callKeys[c.StateKey] = struct{}{}
	}
	t.calls = append(t.calls, c)
	t.callBytes += len(rec.Key) + len(rec.Value) + len(c.State)
	if len(t.calls) >= t.callCap || t.callBytes >= maxBatchBytes {
		return t.flushCalls(ctx)
	}
	return nil
}

// invalidInOrder applies invalid_messages to a record that never reaches
// the transformer, after the records queued before it.
func (r *Runner) invalidInOrder(ctx context.Context, t *task, rec *kgo.Record, reason string) error {
	if err := t.flushCalls(ctx); err != nil {
		return err
	}
	t.from = rec
	return r.invalid(ctx, rec, reason, t)
}

// flushCalls hands the queued records to the task's instance and takes
// what it answered, in order, into the open transaction.
func (t *task) flushCalls(ctx context.Context) error {
	if len(t.calls) == 0 {
		return nil
	}
	r := t.r
	calls := t.calls
	defer t.resetCalls()
	start := time.Now()
	if err := t.bt.TransformBatch(ctx, calls); err != nil {
		if r.stopping.Load() {
			// Interrupted by the stop, or failed as it came: either way
			// its records are not done, and the next run does them.
			r.log.Info("a module call ended by the stop; its records are left to the next run", "partition", t.n,
				"from", fmt.Sprintf("%s/%d@%d", calls[0].Rec.Topic, t.n, calls[0].Rec.Offset), "records", len(calls), "error", err)
			t.unqueue(calls)
			return errInterrupted
		}
		return transformerFailure(fmt.Errorf("transform: %w", err))
	}
	took := time.Since(start)
	t.took(took, 1)
	t.callCap = callCap(took/time.Duration(len(calls)), r.txnCut())
	per := took.Seconds() / float64(len(calls))
	for i := range calls {
		c := &calls[i]
		t.from = c.Rec
		r.obs.MessageProcessing.Observe(per)
		if c.Rejected != "" {
			if err := r.invalid(ctx, c.Rec, c.Rejected, t); err != nil {
				return err
			}
			continue
		}
		reason, err := r.outputs(ctx, t, c.Rec, c.Messages)
		switch {
		case err != nil:
			return transformerFailure(fmt.Errorf("%s: %w", r.batchTF.Label(), err))
		case reason != "":
			if err := r.invalid(ctx, c.Rec, reason, t); err != nil {
				return err
			}
			continue // nothing of it is written, its state stays
		}
		r.produceOutputs(t)
		if !c.SetState {
			continue
		}
		switch {
		case !r.stateful:
			return transformerFailure(fmt.Errorf("%s on %s/%d@%d set state, but the stage is stateless (transform.stateless: true)", r.batchTF.Label(), c.Rec.Topic, c.Rec.Partition, c.Rec.Offset))
		case c.NoStateKey:
			return transformerFailure(fmt.Errorf("%s on %s/%d@%d set state for a tombstone, which has no state key: state_key %q reads the value and a tombstone has none; set no state for such a tombstone",
				r.batchTF.Label(), c.Rec.Topic, c.Rec.Partition, c.Rec.Offset, r.template.String()))
		}
		c.entry.raw, c.entry.touched = c.NewState, true
	}
	return nil
}

// resetCalls empties the queue, keeping its memory.
func (t *task) resetCalls() {
	for i := range t.calls {
		t.calls[i] = Call{Messages: t.calls[i].Messages[:0]}
	}
	t.calls = t.calls[:0]
	clear(t.callKeys)
	t.callBytes = 0
}

// errInterrupted ends a task's processing when the stage stops in the
// middle of a module call (Interrupter).
var errInterrupted = errors.New("interrupted by the stop")

// unqueue takes calls, which were never done, out of the open
// transaction: its offsets go back to each input topic's first record
// among them, so that its commit covers only the records before.
func (t *task) unqueue(calls []Call) {
	tx := t.open
	seen := map[string]bool{}
	for i := range calls {
		rec := calls[i].Rec
		if !seen[rec.Topic] {
			seen[rec.Topic] = true
			tx.offsets[rec.Topic] = rec.Offset
		}
	}
	tx.records -= len(calls)
}
