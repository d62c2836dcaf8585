// Package transformtest runs a module's handler natively in `go test`,
// the way flecht runs the module: the records in order, each seeing the
// state that the previous record of its state key left, with the config
// records you give it. It drives the same code the module runs inside
// WebAssembly, through the same ABI encoding.
//
//	h, err := transformtest.New(transform.Setup{OutputTopics: []string{"out"}})
//	res := h.Run(transformtest.Input{Key: "dev-1", Value: wire.Object{"t": 20}})
//
// A Harness is not safe for concurrent use, and a test binary holds one
// module: the handler its init registered.
package transformtest

import (
	"errors"
	"fmt"
	"time"

	"github.com/flecht-dev/flecht/sdk/abi"
	"github.com/flecht-dev/flecht/sdk/internal/bridge"
	"github.com/flecht-dev/flecht/sdk/transform"
	"github.com/flecht-dev/flecht/sdk/wire"
)

// Harness runs the registered handler.
type Harness struct {
	// Configs are the config records Lookup finds, by key.
	Configs map[string]wire.Object
	// State holds each state key's state (canonical JSON), as the runs
	// left it; set it to start from a given state.
	State map[string][]byte
	// Logs are the lines the module logged, "LEVEL message".
	Logs []string

	records   int64
	batch     abi.BatchWriter
	stateless bool
}

// New sets the module up, as `flecht run` does for each task, and returns
// a harness with no state; the error is the module's refusal.
func New(s transform.Setup) (*Harness, error) {
	h := &Harness{Configs: map[string]wire.Object{}, State: map[string][]byte{}, stateless: s.Stateless}
	bridge.Lookup = h.lookup
	bridge.Log = h.log
	topics := make([]any, len(s.OutputTopics))
	for i, t := range s.OutputTopics {
		topics[i] = t
	}
	cfg := s.Config
	if cfg == nil {
		cfg = wire.Object{}
	}
	doc, err := wire.Marshal(wire.Object{"application_id": s.ApplicationID, "partition": s.Partition,
		"output_topics": topics, "module": s.Module, "config": cfg, "stateless": s.Stateless})
	if err != nil {
		return nil, fmt.Errorf("setup: %w", err)
	}
	if refusal := bridge.Setup(doc); refusal != "" {
		return nil, errors.New(refusal)
	}
	return h, nil
}

func (h *Harness) lookup(key string) ([]byte, bool) {
	obj, ok := h.Configs[key]
	if !ok {
		return nil, false
	}
	b, err := wire.Marshal(obj)
	return b, err == nil
}

func (h *Harness) log(level int, msg string) {
	name := [...]string{"DEBUG", "INFO", "WARN", "ERROR"}
	l := "LEVEL" + fmt.Sprint(level)
	if level >= 0 && level < len(name) {
		l = name[level]
	}
	h.Logs = append(h.Logs, l+" "+msg)
}

// Input is one input record. Zero fields take defaults: topic "input",
// partition 0, the offset counting the records run so far, the Unix epoch
// as event time, the key as state key.
type Input struct {
	Topic     string
	Partition int32
	Offset    *int64
	Time      time.Time
	Key       string
	NullKey   bool
	// Value is a wire.Object or map[string]any (written as canonical
	// JSON), or []byte as it is on the wire. Ignored for a tombstone.
	Value     any
	Tombstone bool
	Headers   []Header
	// StateKey overrides the state key (the stage's state_key template
	// would give it); NoStateKey marks a tombstone that has none.
	StateKey   *string
	NoStateKey bool
}

// Header is a Kafka record header; a nil Value is null.
type Header struct {
	Key   string
	Value []byte
}

// Message is an output record as flecht would write it.
type Message struct {
	Topic   string
	Key     string
	NullKey bool
	// Value is nil for a tombstone.
	Value   []byte
	Time    time.Time
	Headers []Header
	// Partition is set when the module chose it (Explicit).
	Partition int32
	Explicit  bool
}

// Result is the module's answer for one record.
type Result struct {
	Messages []Message
	// StateChanged: the record set or deleted its state key's state;
	// State is the new state (nil when deleted).
	StateChanged bool
	State        []byte
	// Rejected is the reason, when the module rejected the record as
	// invalid.
	Rejected string
	// Err is the module's failure (an error or a panic): the stage would
	// stop.
	Err error
}

// Run transforms one record and applies its new state.
func (h *Harness) Run(in Input) Result {
	rec, sk, err := h.record(in)
	if err != nil {
		return Result{Err: err}
	}
	h.batch.Reset()
	h.batch.Add(&rec)
	h.records++
	out := bridge.Transform(h.batch.Bytes(), func(int) {})
	var rr abi.ResultReader
	rr.Reset(out)
	var res abi.Result
	if err := rr.Next(&res); err != nil {
		return Result{Err: fmt.Errorf("the module's result does not read: %w", err)}
	}
	if err := rr.End(); err != nil {
		return Result{Err: fmt.Errorf("the module's result does not read: %w", err)}
	}
	switch res.Kind {
	case abi.ResultRejected:
		return Result{Rejected: string(res.Reason)}
	case abi.ResultFailed:
		return Result{Err: errors.New(string(res.Reason))}
	}
	r := Result{}
	for _, m := range res.Messages {
		r.Messages = append(r.Messages, message(m, in))
	}
	switch res.StateAction {
	case abi.StateSet, abi.StateDelete:
		if in.NoStateKey {
			return Result{Err: errors.New("the module set state for a record without a state key")}
		}
		if h.stateless {
			return Result{Err: errors.New("the module set state, but the stage is stateless")}
		}
		r.StateChanged = true
		if res.StateAction == abi.StateSet {
			r.State = append([]byte(nil), res.State...)
			h.State[sk] = r.State
		} else {
			delete(h.State, sk)
		}
	}
	return r
}

func (h *Harness) record(in Input) (abi.Record, string, error) {
	rec := abi.Record{Partition: in.Partition, Offset: h.records, Timestamp: in.Time.UnixMilli(),
		Topic: []byte(in.Topic), Key: []byte(in.Key)}
	if in.Topic == "" {
		rec.Topic = []byte("input")
	}
	if in.Time.IsZero() {
		rec.Timestamp = 0
	}
	if in.Offset != nil {
		rec.Offset = *in.Offset
	}
	if in.NullKey {
		rec.Flags |= abi.RecordKeyNull
		rec.Key = nil
	}
	if in.Tombstone {
		rec.Flags |= abi.RecordValueNull
	} else {
		switch v := in.Value.(type) {
		case []byte:
			rec.Value = v
		default:
			b, err := wire.Marshal(v)
			if err != nil {
				return rec, "", fmt.Errorf("input value: %w", err)
			}
			rec.Value = b
		}
	}
	for _, hd := range in.Headers {
		rec.Headers = append(rec.Headers, abi.Header{Key: []byte(hd.Key), Value: hd.Value})
	}
	sk := in.Key
	if in.StateKey != nil {
		sk = *in.StateKey
	}
	if in.NoStateKey {
		rec.Flags |= abi.RecordNoStateKey
		return rec, "", nil
	}
	rec.StateKey = []byte(sk)
	if st, ok := h.State[sk]; ok {
		rec.Flags |= abi.RecordHasState
		rec.State = st
	}
	return rec, sk, nil
}

// message is an output as the host completes it: the input's event time
// and headers unless the module gave its own.
func message(m abi.Message, in Input) Message {
	out := Message{Topic: string(m.Topic), Key: string(m.Key), NullKey: m.Flags&abi.MessageKeyNull != 0, Time: in.Time, Headers: in.Headers}
	if m.Flags&abi.MessageValueNull == 0 {
		out.Value = append([]byte{}, m.Value...)
	}
	if m.Flags&abi.MessageTimestamp != 0 {
		out.Time = time.UnixMilli(m.Timestamp)
	}
	if m.Flags&abi.MessageHeaders != 0 {
		out.Headers = nil
		for _, h := range m.Headers {
			out.Headers = append(out.Headers, Header{Key: string(h.Key), Value: append([]byte(nil), h.Value...)})
		}
	}
	if m.Flags&abi.MessagePartition != 0 {
		out.Partition, out.Explicit = m.Partition, true
	}
	return out
}
