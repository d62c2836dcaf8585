package stage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/attr"
	"github.com/flecht-dev/flecht/internal/lease"
	"github.com/flecht-dev/flecht/internal/state"
)

// stateEntry is one state key's state during a batch.
type stateEntry struct {
	orig    []byte // as stored before the batch (nil: none)
	current attr.State
	touched bool
}

// emitter collects what one Transform call emits.
type emitter struct {
	messages []Message
	state    *attr.State
}

func (e *emitter) Message(m Message)  { e.messages = append(e.messages, m) }
func (e *emitter) State(s attr.State) { e.state = &s }

// processTask runs one task's share of a batch as one transaction: the
// outputs, the final changed state per key, and the input offsets commit
// together or not at all.
func (r *Runner) processTask(ctx context.Context, t *lease.Lease, recs []*kgo.Record, gen groupGeneration) (err error) {
	order := r.topicOrder
	sort.SliceStable(recs, func(i, j int) bool {
		if a, b := order[recs[i].Topic], order[recs[j].Topic]; a != b {
			return a < b
		}
		return recs[i].Offset < recs[j].Offset
	})

	if err := t.Prod.BeginTransaction(); err != nil {
		return fmt.Errorf("task %d: begin transaction: %w", t.N, err)
	}
	committed := false
	defer func() {
		if !committed {
			// Best effort: the process is about to crash, and the next
			// owner's fence aborts anything left open anyway.
			abortCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			if abortErr := t.Prod.EndTransaction(abortCtx, kgo.TryAbort); abortErr != nil {
				r.log.Debug("abort after failure", "partition", t.N, "error", abortErr)
			}
		}
	}()

	var (
		produceMu  sync.Mutex
		produceErr error
		produced   int
	)
	produce := func(rec *kgo.Record) {
		produced++
		t.Prod.Produce(ctx, rec, func(_ *kgo.Record, err error) {
			if err != nil {
				produceMu.Lock()
				if produceErr == nil {
					produceErr = err
				}
				produceMu.Unlock()
			}
		})
	}

	states := map[string]*stateEntry{}
	offsets := map[string]map[int32]int64{}
	em := &emitter{}
	for _, rec := range recs {
		if offsets[rec.Topic] == nil {
			offsets[rec.Topic] = map[int32]int64{}
		}
		offsets[rec.Topic][rec.Partition] = rec.Offset + 1
		if err := r.processRecord(ctx, t, rec, states, em, produce); err != nil {
			return err
		}
	}

	writes, err := r.stateWrites(t, states, produce)
	if err != nil {
		return err
	}
	if err := t.Prod.Flush(ctx); err != nil {
		return fmt.Errorf("task %d: flush: %w", t.N, err)
	}
	if produceErr != nil {
		return fmt.Errorf("task %d: produce: %w", t.N, produceErr)
	}
	if len(offsets) > 0 {
		if err := commitOffsets(ctx, t.Prod, t.TxnID, r.stage.ApplicationID, gen, offsets); err != nil {
			return fmt.Errorf("task %d: %w", t.N, err)
		}
	}
	if err := t.Prod.EndTransaction(ctx, kgo.TryCommit); err != nil {
		return fmt.Errorf("task %d: commit: %w", t.N, err)
	}
	if produced == 0 && len(offsets) > 0 {
		if err := endEmptyTransaction(ctx, t.Prod, t.TxnID); err != nil {
			return fmt.Errorf("task %d: commit offsets: %w", t.N, err)
		}
	}
	committed = true
	r.obs.TxnCommitted.Inc()
	if t.Store != nil {
		if err := t.Store.Apply(writes); err != nil {
			return err
		}
	}
	return nil
}

// processRecord runs the transformer on one record and produces what it
// emits; its new state stays in states until the batch ends.
func (r *Runner) processRecord(ctx context.Context, t *lease.Lease, rec *kgo.Record, states map[string]*stateEntry, em *emitter, produce func(*kgo.Record)) error {
	r.obs.MessageIn(rec.Topic, len(rec.Key)+len(rec.Value))
	d, reason := r.decode(rec)
	if reason != "" {
		return r.invalid(ctx, rec, reason, produce)
	}
	entry := &stateEntry{} // a keyless tombstone's: empty, never written
	if !d.keyless {
		var err error
		if entry, err = r.loadState(t, states, d.stateKey); err != nil {
			return err
		}
	}
	em.messages, em.state = em.messages[:0], nil
	start := time.Now()
	if err := r.tf.Transform(ctx, d.in, entry.current, em); err != nil {
		var rejected *InvalidRecordError
		if !errors.As(err, &rejected) {
			return fmt.Errorf("transform %s/%d@%d: %w", rec.Topic, rec.Partition, rec.Offset, err)
		}
		// Whatever the call emitted before rejecting is dropped.
		return r.invalid(ctx, rec, rejected.Reason, produce)
	}
	r.obs.MessageProcessing.Observe(time.Since(start).Seconds())
	for _, m := range em.messages {
		out, err := m.Record(ctx, r.counts)
		if err != nil {
			return fmt.Errorf("output of %s/%d@%d: %w", rec.Topic, rec.Partition, rec.Offset, err)
		}
		r.obs.MessageOut(out.Topic, len(out.Key)+len(out.Value))
		produce(out)
	}
	if em.state == nil {
		return nil
	}
	switch {
	case !r.stateful:
		return fmt.Errorf("transform %s/%d@%d emitted state, but the transformer is declared stateless", rec.Topic, rec.Partition, rec.Offset)
	case d.keyless:
		return fmt.Errorf("transform %s/%d@%d emitted state for a tombstone, which has no state key: state_key %q reads the value and a tombstone has none; emit no state for such a tombstone",
			rec.Topic, rec.Partition, rec.Offset, r.template.String())
	}
	entry.current, entry.touched = *em.state, true
	return nil
}

// decoded is an input record as the runner hands it to the transformer.
type decoded struct {
	in       *Incoming
	stateKey string
	// keyless marks a tombstone under a state_key that reads the value: it
	// has no state key, so it sees an empty state and may emit none.
	keyless bool
}

// decode turns a record into what the transformer sees and its state key,
// or names why it cannot (an invalid message, SPEC §7).
func (r *Runner) decode(rec *kgo.Record) (decoded, string) {
	key, err := attr.DecodeKey(rec.Key)
	if err != nil {
		return decoded{}, err.Error()
	}
	ev, tomb, err := attr.Decode[attr.Event](rec.Value)
	if err != nil {
		return decoded{}, err.Error()
	}
	d := decoded{in: &Incoming{
		Key: key, Value: ev, Tombstone: tomb, Topic: rec.Topic, Partition: rec.Partition,
		Offset: rec.Offset, Timestamp: rec.Timestamp, Headers: rec.Headers, Raw: rec.Value,
	}, stateKey: key}
	if reason := r.stateKey(&d); reason != "" {
		return decoded{}, reason
	}
	return d, ""
}

// stateKey sets the record's state key from the template, or says why the
// record has none it may use.
func (r *Runner) stateKey(d *decoded) string {
	in := d.in
	switch {
	case !r.stateful || r.template.IsDefault():
		// The message key; a stateless stage never looks state up.
	case in.Tombstone && r.template.UsesValue():
		d.keyless = true
	case r.guardKeys && strings.ContainsRune(in.Key, r.keySep):
		return fmt.Sprintf("key %q contains %q, which state_key %q needs to tell where the key ends: this key and another could share a state key from two partitions (the silent split); keep %q out of keys or change state_key (see flecht lint state-key)",
			in.Key, string(r.keySep), r.template.String(), string(r.keySep))
	default:
		sk, err := r.template.Render(in.Key, in.Value.View())
		if err != nil {
			return err.Error()
		}
		d.stateKey = sk
	}
	return ""
}

func (r *Runner) loadState(t *lease.Lease, states map[string]*stateEntry, sk string) (*stateEntry, error) {
	if e, ok := states[sk]; ok {
		return e, nil
	}
	e := &stateEntry{}
	if t.Store != nil {
		v, ok, err := t.Store.Get(sk)
		if err != nil {
			return nil, err
		}
		if ok {
			st, _, err := attr.Decode[attr.State](v)
			if err != nil {
				return nil, fmt.Errorf("state of %q in the changelog does not decode: %w", sk, err)
			}
			e.orig, e.current = v, st
		}
	}
	states[sk] = e
	return e, nil
}

// stateWrites produces one changelog record per state key whose final state
// differs from where the batch started, and returns the matching store writes.
func (r *Runner) stateWrites(t *lease.Lease, states map[string]*stateEntry, produce func(*kgo.Record)) ([]state.Write, error) {
	keys := make([]string, 0, len(states))
	for k, e := range states {
		if e.touched {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var writes []state.Write
	for _, k := range keys {
		e := states[k]
		var value []byte
		if e.current.Len() > 0 {
			b, err := e.current.Bytes()
			if err != nil {
				return nil, fmt.Errorf("state of %q: %w", k, err)
			}
			value = b
		}
		if value == nil && e.orig == nil {
			continue // no state before, none after
		}
		if value != nil && bytes.Equal(value, e.orig) {
			continue // unchanged: nothing to write
		}
		produce(state.ChangelogRecord(r.changelog, t.N, k, value))
		r.obs.StateWritten(len(value))
		writes = append(writes, state.Write{Key: k, Value: value})
	}
	return writes, nil
}
