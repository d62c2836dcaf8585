package transformer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/flecht-dev/flecht/internal/stage"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/attr"
	"github.com/flecht-dev/flecht/internal/state"
	"github.com/flecht-dev/flecht/internal/statekey"
	"github.com/flecht-dev/flecht/sdk/wire"
)

// stateEntry is one state key's state during a transaction.
type stateEntry struct {
	orig    []byte // as it stood before the transaction (nil: none)
	current attr.State
	// raw is the current state's canonical bytes (nil: none) instead of
	// current, for a transformer that sees state as bytes (byteState).
	raw     []byte
	touched bool
	// final is the entry's bytes at the end of the transaction (set when
	// it is sealed), where the next transaction's orig starts.
	final []byte
}

// emitter collects what one Transform call emits.
type emitter struct {
	messages []stage.Message
	state    *attr.State
}

func (e *emitter) Message(m stage.Message) { e.messages = append(e.messages, m) }
func (e *emitter) State(s attr.State)      { e.state = &s }

// processRecord runs the transformer on one record of the task's open
// transaction and produces what it emits; its new state stays in the
// transaction until it is sealed.
func (r *Runner) processRecord(ctx context.Context, t *task, rec *kgo.Record) error {
	r.obs.MessageIn(rec.Topic, len(rec.Key)+len(rec.Value))
	if r.raw != nil {
		if handled, err := r.processRaw(ctx, t, rec); handled || err != nil {
			return err
		}
	}
	d, reason := r.decode(rec)
	if reason != "" {
		return r.invalid(ctx, rec, reason, t)
	}
	entry := &stateEntry{} // a keyless tombstone's: empty, never written
	if !d.keyless {
		var err error
		if entry, err = r.loadState(t, d.stateKey); err != nil {
			return err
		}
	}
	em := &t.em
	em.messages, em.state = em.messages[:0], nil
	start := time.Now()
	if err := r.tf.Transform(ctx, d.in, entry.current, em); err != nil {
		return r.transformError(ctx, t, rec, err)
	}
	return r.emitted(ctx, t, rec, entry, d.keyless, start)
}

// processRaw tries the transformer's raw path (RawTransformer): no decode
// of the value, and outputs as the transformer wrote them. handled is
// false when the record needs the usual path: a key that does not decode,
// a state key it cannot have, a value the transformer will not take raw.
func (r *Runner) processRaw(ctx context.Context, t *task, rec *kgo.Record) (handled bool, err error) {
	key, err := attr.DecodeKey(rec.Key)
	if err != nil {
		return false, nil // the usual path names it
	}
	d := decoded{in: &Incoming{
		Key: key, Tombstone: rec.Value == nil, Topic: rec.Topic, Partition: rec.Partition,
		Offset: rec.Offset, Timestamp: rec.Timestamp, Headers: rec.Headers, Raw: rec.Value,
	}, stateKey: key}
	if reason := r.stateKey(&d); reason != "" || d.keyless {
		return false, nil
	}
	entry, err := r.loadState(t, d.stateKey)
	if err != nil {
		return true, err
	}
	em := &t.em
	em.messages, em.state = em.messages[:0], nil
	start := time.Now()
	handled, err = r.raw.TransformRaw(ctx, d.in, entry.current, em)
	switch {
	case err != nil:
		return true, r.transformError(ctx, t, rec, err)
	case !handled && (len(em.messages) > 0 || em.state != nil):
		return true, fmt.Errorf("transform %s/%d@%d: the raw path emitted, then declined the record", rec.Topic, rec.Partition, rec.Offset)
	case !handled:
		return false, nil
	}
	return true, r.emitted(ctx, t, rec, entry, false, start)
}

// transformError routes a Transform error: a rejected record follows the
// invalid_messages policy, anything else stops the stage.
func (r *Runner) transformError(ctx context.Context, t *task, rec *kgo.Record, err error) error {
	var rejected *InvalidRecordError
	if !errors.As(err, &rejected) {
		return transformerFailure(fmt.Errorf("transform %s/%d@%d: %w", rec.Topic, rec.Partition, rec.Offset, err))
	}
	// Whatever the call emitted before rejecting is dropped.
	return r.invalid(ctx, rec, rejected.Reason, t)
}

// emitted produces what one Transform call emitted and keeps its state.
func (r *Runner) emitted(ctx context.Context, t *task, rec *kgo.Record, entry *stateEntry, keyless bool, start time.Time) error {
	r.obs.MessageProcessing.Observe(time.Since(start).Seconds())
	em := &t.em
	reason, err := r.outputs(ctx, t, rec, em.messages)
	switch {
	case err != nil:
		return err
	case reason != "":
		return r.invalid(ctx, rec, reason, t) // nothing of it is written, its state stays
	}
	r.produceOutputs(t)
	if em.state == nil {
		return nil
	}
	switch {
	case !r.stateful:
		return fmt.Errorf("transform %s/%d@%d emitted state, but the transformer is declared stateless", rec.Topic, rec.Partition, rec.Offset)
	case keyless:
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
// or names why it cannot (an invalid message, docs/contract.md §7).
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
	if !r.stateful {
		return "" // the message key; a stateless stage never looks state up
	}
	sk, keyless, reason := r.keys.StateKey(d.in)
	if reason == "" {
		d.stateKey, d.keyless = sk, keyless
	}
	return reason
}

// KeyRule derives a record's state key from a stage's state_key template,
// guarding the separator that tells where the message key ends.
type KeyRule struct {
	template *statekey.Template
	sep      rune
	guard    bool
}

// NewKeyRule is the rule of template t.
func NewKeyRule(t *statekey.Template) KeyRule {
	sep, guard := t.KeySeparator()
	return KeyRule{template: t, sep: sep, guard: guard}
}

// StateKey is in's state key; keyless marks a tombstone under a template
// that reads the value (it has none), and reason says why the record is
// invalid instead. in.Value must be decoded when the template reads it.
func (k KeyRule) StateKey(in *Incoming) (sk string, keyless bool, reason string) {
	switch t := k.template; {
	case t.IsDefault():
		return in.Key, false, ""
	case in.Tombstone && t.UsesValue():
		return "", true, ""
	case k.guard && strings.ContainsRune(in.Key, k.sep):
		return "", false, fmt.Sprintf("key %q contains %q, which state_key %q needs to tell where the key ends: this key and another could share a state key from two partitions (the silent split); keep %q out of keys or change state_key (see flecht lint state-key)",
			in.Key, string(k.sep), t.String(), string(k.sep))
	default:
		sk, err := t.Render(in.Key, in.Value.View())
		if err != nil {
			return "", false, err.Error()
		}
		return sk, false, ""
	}
}

// loadState finds a state key's state for the open transaction: its own,
// else the one the sealed transaction ends with, else the committed one
// (cache, then store).
func (r *Runner) loadState(t *task, sk string) (*stateEntry, error) {
	states := t.open.states
	if e, ok := states[sk]; ok {
		return e, nil
	}
	e := &stateEntry{}
	if sealed := t.sealed; sealed != nil {
		if prev, ok := sealed.states[sk]; ok {
			e.orig, e.current, e.raw = prev.final, prev.current, prev.final
			states[sk] = e
			return e, nil
		}
	}
	if c, ok := t.cache.get(sk); ok {
		e.orig, e.current, e.raw = c.raw, c.state, c.raw
		states[sk] = e
		return e, nil
	}
	if t.lease.Store != nil {
		v, ok, err := t.lease.Store.Get(sk)
		if err != nil {
			return nil, err
		}
		if ok && r.byteState {
			// Bytes are all it needs, in the canonical form a module may
			// rely on; anything else is decoded once and written so.
			raw, err := canonicalState(v)
			if err != nil {
				return nil, fmt.Errorf("state of %q in the changelog does not decode: %w", sk, err)
			}
			e.orig, e.raw = v, raw
		} else if ok {
			st, _, err := attr.Decode[attr.State](v)
			if err != nil {
				return nil, fmt.Errorf("state of %q in the changelog does not decode: %w", sk, err)
			}
			e.orig, e.current = v, st
		}
		t.cache.put(sk, e.orig, e.current)
	}
	states[sk] = e
	return e, nil
}

// stateWrites produces one changelog record per state key whose final state
// differs from where the transaction started, and returns the matching
// store writes.
func (r *Runner) stateWrites(t *task, tx *txn) ([]state.Write, error) {
	keys := make([]string, 0, len(tx.states))
	for k, e := range tx.states {
		e.final = e.orig
		if e.touched {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var writes []state.Write
	for _, k := range keys {
		e := tx.states[k]
		value, err := r.stateBytes(k, e)
		if err != nil {
			return nil, err
		}
		if value == nil && e.orig == nil {
			continue // no state before, none after
		}
		if value != nil && bytes.Equal(value, e.orig) {
			continue // unchanged: nothing to write
		}
		e.final = value
		t.produce(state.ChangelogRecord(r.changelog, t.n, k, value))
		r.obs.StateWritten(len(value))
		writes = append(writes, state.Write{Key: k, Value: value})
	}
	return writes, nil
}

// stateBytes is e's current state as the changelog holds it (nil: none).
func (r *Runner) stateBytes(k string, e *stateEntry) ([]byte, error) {
	if r.byteState {
		return e.raw, nil
	}
	if e.current.Len() == 0 {
		return nil, nil
	}
	b, err := e.current.Bytes()
	if err != nil {
		return nil, fmt.Errorf("state of %q: %w", k, err)
	}
	return b, nil
}

// stateCache keeps the committed state of the keys a task used last,
// decoded, so that a key's first record in a transaction neither reads
// the store nor decodes JSON. It only ever holds committed state: it is
// filled from the store and from transactions that committed.
type stateCache struct {
	max     int
	entries map[string]cachedState
}

type cachedState struct {
	raw   []byte // nil: no state
	state attr.State
}

// stateCacheEntries bounds a task's cache; past it, entries are dropped
// in map order.
const stateCacheEntries = 1 << 14

func newStateCache() *stateCache {
	return &stateCache{max: stateCacheEntries, entries: map[string]cachedState{}}
}

func (c *stateCache) get(k string) (cachedState, bool) {
	e, ok := c.entries[k]
	return e, ok
}

func (c *stateCache) put(k string, raw []byte, st attr.State) {
	if _, ok := c.entries[k]; !ok && len(c.entries) >= c.max {
		for old := range c.entries {
			delete(c.entries, old)
			break
		}
	}
	c.entries[k] = cachedState{raw: raw, state: st}
}

// apply takes a committed transaction's final states.
func (c *stateCache) apply(tx *txn) {
	for k, e := range tx.states {
		if e.touched {
			c.put(k, e.final, e.current)
		}
	}
}

// canonicalState is a stored state in the canonical form.
func canonicalState(v []byte) ([]byte, error) {
	if wire.IsCanonicalObject(v) {
		return v, nil
	}
	st, _, err := attr.Decode[attr.State](v)
	if err != nil {
		return nil, err
	}
	return st.Bytes()
}
