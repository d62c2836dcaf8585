package transformer

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/attr"
)

// A BatchTransformer's records are queued as calls and handed over in
// batches. A batch ends before a record whose state key is already in it
// (so each record sees the state the previous record of its key left),
// at the batch limits, before an invalid record is handled (outputs keep
// the input's order), and at the end of each poll's records and before a
// transaction seals: a transaction holds only records that were
// transformed.
const (
	maxBatchCalls = 64
	maxBatchBytes = 1 << 20
)

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
	if len(t.calls) >= maxBatchCalls || t.callBytes >= maxBatchBytes {
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
	return r.invalid(ctx, rec, reason, t.produce)
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
		return transformerFailure(fmt.Errorf("transform: %w", err))
	}
	per := time.Since(start).Seconds() / float64(len(calls))
	for i := range calls {
		c := &calls[i]
		r.obs.MessageProcessing.Observe(per)
		if c.Rejected != "" {
			if err := r.invalid(ctx, c.Rec, c.Rejected, t.produce); err != nil {
				return err
			}
			continue
		}
		reason, err := r.outputs(ctx, t, c.Rec, c.Messages)
		switch {
		case err != nil:
			return err
		case reason != "":
			if err := r.invalid(ctx, c.Rec, reason, t.produce); err != nil {
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
			return fmt.Errorf("transform %s/%d@%d set state, but the stage is stateless (transform.stateless: true)", c.Rec.Topic, c.Rec.Partition, c.Rec.Offset)
		case c.NoStateKey:
			return fmt.Errorf("transform %s/%d@%d set state for a tombstone, which has no state key: state_key %q reads the value and a tombstone has none; set no state for such a tombstone",
				c.Rec.Topic, c.Rec.Partition, c.Rec.Offset, r.template.String())
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
