package transform

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unsafe"

	"github.com/flecht-dev/flecht/sdk/abi"
	"github.com/flecht-dev/flecht/sdk/wire"
)

// Output collects what the handler answers for one record: any number of
// messages, to the stage's declared output topics, and the state key's new
// state. Each message keeps the input's event time and headers unless it
// says otherwise, so that a replay writes the same records.
type Output struct {
	results *abi.ResultWriter
	scratch []byte
	state   []byte
	action  uint32
	err     error
}

// Message is an output record, for SendMessage.
type Message struct {
	Topic string
	Key   string
	// NullKey writes a null key instead of Key.
	NullKey bool
	// Value is a wire.Object or map[string]any (written as canonical
	// JSON), or []byte / json.RawMessage holding a JSON object, written as
	// it is. Ignored for a tombstone.
	Value     any
	Tombstone bool
	// Time is the record's timestamp; zero keeps the input's event time.
	Time time.Time
	// Headers replace the input's headers when SetHeaders is true (nil
	// then writes none).
	Headers    []Header
	SetHeaders bool
	// Partition places the record there when ExplicitPartition is true;
	// otherwise Kafka's murmur2 partition of its key.
	Partition         int32
	ExplicitPartition bool
}

// Send writes value (see Message.Value) under key to topic.
func (o *Output) Send(topic, key string, value any) error {
	return o.SendMessage(Message{Topic: topic, Key: key, Value: value})
}

// SendBytes writes value (JSON object bytes, written as they are) under
// key to topic: Send without a conversion or a copy, for a hot path.
func (o *Output) SendBytes(topic string, key, value []byte) error {
	o.results.Message(&abi.Message{Topic: bytesOf(topic), Key: key, Value: value})
	return nil
}

// SendWith writes to topic, under key (nil: a null key), the JSON object
// raw with member name set to value: a record with one field changed, in
// the canonical form (wire.With), without decoding it and without a copy.
// When raw is not a JSON object it returns the *wire.DecodeError that
// says why, and writes nothing: reject the record with it, or not.
func (o *Output) SendWith(topic string, key []byte, raw []byte, name string, value any) error {
	m := abi.Message{Topic: bytesOf(topic), Key: key}
	if key == nil {
		m.Flags |= abi.MessageKeyNull
	}
	mark := o.results.Mark()
	b, err := wire.AppendWith(o.results.OpenMessage(&m), raw, name, value)
	if err != nil {
		o.results.Truncate(mark)
		var notObject *wire.DecodeError
		if !errors.As(err, &notObject) {
			o.fail(fmt.Errorf("message to %s: %w", topic, err))
		}
		return err
	}
	o.results.CloseMessage(b, &m)
	return nil
}

// SetStateWith sets the state key's state to the JSON object raw (the
// current state's Bytes, say) with member name set to value, as
// SendWith writes a record.
func (o *Output) SetStateWith(raw []byte, name string, value any) error {
	b, err := wire.AppendWith(o.state[:0], raw, name, value)
	if err != nil {
		return o.fail(fmt.Errorf("state: %w", err))
	}
	o.state, o.action = b, abi.StateSet
	return nil
}

// Delete writes a tombstone for key to topic.
func (o *Output) Delete(topic, key string) error {
	return o.SendMessage(Message{Topic: topic, Key: key, Tombstone: true})
}

// SendMessage writes m.
func (o *Output) SendMessage(m Message) error {
	am := abi.Message{Topic: bytesOf(m.Topic), Key: bytesOf(m.Key)}
	if m.NullKey {
		am.Flags |= abi.MessageKeyNull
		am.Key = nil
	}
	if m.Tombstone {
		am.Flags |= abi.MessageValueNull
	} else {
		v, err := o.encode(m.Value)
		if err != nil {
			return o.fail(fmt.Errorf("message to %s: %w", m.Topic, err))
		}
		am.Value = v
	}
	if !m.Time.IsZero() {
		am.Flags |= abi.MessageTimestamp
		am.Timestamp = m.Time.UnixMilli()
	}
	if m.SetHeaders {
		am.Flags |= abi.MessageHeaders
		am.Headers = make([]abi.Header, len(m.Headers))
		for i, h := range m.Headers {
			am.Headers[i] = abi.Header{Key: []byte(h.Key), Value: h.Value}
		}
	}
	if m.ExplicitPartition {
		am.Flags |= abi.MessagePartition
		am.Partition = m.Partition
	}
	o.results.Message(&am)
	return nil
}

// SetState makes state (a wire.Object, a map[string]any, or []byte /
// json.RawMessage holding a JSON object) the state key's new state. An
// empty object deletes it, as DeleteState does.
func (o *Output) SetState(state any) error {
	b, err := o.encode(state)
	if err != nil {
		return o.fail(fmt.Errorf("state: %w", err))
	}
	if string(b) == "{}" {
		o.DeleteState()
		return nil
	}
	o.state = append(o.state[:0], b...)
	o.action = abi.StateSet
	return nil
}

// DeleteState removes the state key's state.
func (o *Output) DeleteState() {
	o.state = o.state[:0]
	o.action = abi.StateDelete
}

// encode turns a value into the bytes to write; they are valid until the
// next encode.
func (o *Output) encode(v any) ([]byte, error) {
	switch x := v.(type) {
	case []byte:
		return x, nil
	case json.RawMessage:
		return x, nil
	case nil:
		return nil, errors.New("no value: give an object, or send a tombstone")
	}
	b, err := wire.AppendMarshal(o.scratch[:0], v)
	if err != nil {
		return nil, err
	}
	o.scratch = b
	return b, nil
}

// fail keeps the first error of the call: a handler that ignores it still
// fails the record.
func (o *Output) fail(err error) error {
	if o.err == nil {
		o.err = err
	}
	return err
}

// RejectError is a record rejected as invalid; see Reject.
type RejectError struct {
	Reason string
}

func (e *RejectError) Error() string { return e.Reason }

// Reject rejects the record being transformed as invalid (bad data, not a
// bug): what the handler sent and set for it is dropped, and the stage's
// invalid_messages policy (crash, skip or dlq) decides. Return it from the
// handler.
func Reject(format string, args ...any) error {
	return &RejectError{Reason: fmt.Sprintf(format, args...)}
}

// bytesOf views s as bytes without copying: the result writer only copies
// from it.
func bytesOf(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }
