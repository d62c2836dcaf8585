package module

import (
	"context"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/attr"
	"github.com/flecht-dev/flecht/internal/stage"
	"github.com/flecht-dev/flecht/internal/statekey"
	"github.com/flecht-dev/flecht/internal/transformer"
)

// Offline runs a module over records without Kafka, the way one task of
// the runner does: one instance, batches cut where a state key repeats, every answer
// checked as in a stage, state carried per state key. It is the unit test
// of a transform (`flecht transform test`).
type Offline struct {
	task *Task
	keys transformer.KeyRule
	rule *statekey.Template
	// stateless: the stage keeps no state (transform.stateless).
	stateless bool
	calls     []transformer.Call
	// State is each state key's state (canonical JSON), as the records
	// left it; set it before Run to start from a given state.
	State map[string][]byte
}

// OfflineResult is what became of one input record.
type OfflineResult struct {
	StateKey   string
	NoStateKey bool
	// Invalid is why the record never reached the module (its key, or its
	// value under a state_key that reads it): the stage's invalid_messages
	// policy would decide. Rejected is the module's own rejection.
	Invalid  string
	Rejected string
	Messages []stage.Message
	// StateChanged: the record set or deleted its state; StateBefore and
	// StateAfter are the state around it (nil: none).
	StateChanged bool
	StateBefore  []byte
	StateAfter   []byte
}

// NewOffline makes the offline runner of m as partition 0's task,
// deriving state keys with template (nil: the message key); a stateless
// stage's module may set no state.
func NewOffline(ctx context.Context, m *Module, template *statekey.Template) (*Offline, error) {
	return NewPartitionOffline(ctx, m, template, 0)
}

// NewPartitionOffline is NewOffline for partition's task: its instance is
// set up with that partition, as flecht run sets up the task's.
func NewPartitionOffline(ctx context.Context, m *Module, template *statekey.Template, partition int32) (*Offline, error) {
	if template == nil {
		template, _ = statekey.Parse(statekey.Default)
	}
	k, err := NewTransformer(m).NewBatchTask(ctx, partition)
	if err != nil {
		return nil, err
	}
	return &Offline{task: k.(*Task), keys: transformer.NewKeyRule(template), rule: template, stateless: m.spec.Stateless, State: map[string][]byte{}}, nil
}

// Close ends the instance.
func (o *Offline) Close(ctx context.Context) { o.task.Close(ctx) }

// Run transforms recs in order. An error is the module's failure (the
// stage would stop); the results before it are returned with it.
func (o *Offline) Run(ctx context.Context, recs []*kgo.Record) ([]OfflineResult, error) {
	results := make([]OfflineResult, 0, len(recs))
	// pending maps the queued calls to their results.
	var pending []int
	queued := map[string]bool{}
	flush := func() error {
		if len(o.calls) == 0 {
			return nil
		}
		defer func() { o.calls, pending = o.calls[:0], pending[:0]; clear(queued) }()
		if err := o.task.TransformBatch(ctx, o.calls); err != nil {
			results = results[:pending[0]] // the batch has no results
			return err
		}
		for i := range o.calls {
			c, res := &o.calls[i], &results[pending[i]]
			res.Rejected, res.Messages = c.Rejected, c.Messages
			if c.Rejected != "" || !c.SetState {
				res.StateAfter = res.StateBefore
				continue
			}
			switch {
			case o.stateless:
				return &Failure{Msg: "the module set state, but the stage is stateless (transform.stateless: true)"}
			case c.NoStateKey:
				return &Failure{Msg: "the module set state for a tombstone that has no state key (state_key " + o.rule.String() + " reads the value)"}
			}
			res.StateChanged, res.StateAfter = true, c.NewState
			if c.NewState == nil {
				delete(o.State, c.StateKey)
			} else {
				o.State[c.StateKey] = c.NewState
			}
		}
		return nil
	}
	for _, rec := range recs {
		res := OfflineResult{}
		sk, keyless, reason := o.stateKey(rec)
		if reason != "" {
			if err := flush(); err != nil {
				return results, err
			}
			res.Invalid = reason
			results = append(results, res)
			continue
		}
		res.StateKey, res.NoStateKey = sk, keyless
		if !keyless && queued[sk] {
			if err := flush(); err != nil {
				return results, err
			}
		}
		c := transformer.Call{Rec: rec, StateKey: sk, NoStateKey: keyless}
		if !keyless {
			c.State = o.State[sk]
			res.StateBefore = c.State
			queued[sk] = true
		}
		o.calls = append(o.calls, c)
		pending = append(pending, len(results))
		results = append(results, res)
		if len(o.calls) >= 64 {
			if err := flush(); err != nil {
				return results, err
			}
		}
	}
	return results, flush()
}

// stateKey derives rec's state key as the runner would.
func (o *Offline) stateKey(rec *kgo.Record) (string, bool, string) {
	key, err := attr.DecodeKey(rec.Key)
	if err != nil {
		return "", false, err.Error()
	}
	in := &transformer.Incoming{Key: key, Tombstone: rec.Value == nil, Topic: rec.Topic, Partition: rec.Partition,
		Offset: rec.Offset, Timestamp: rec.Timestamp}
	if o.rule.UsesValue() && rec.Value != nil {
		ev, _, err := attr.Decode[attr.Event](rec.Value)
		if err != nil {
			return "", false, err.Error()
		}
		in.Value = ev
	}
	return o.keys.StateKey(in)
}
