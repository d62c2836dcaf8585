package transform

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/flecht-dev/flecht/sdk/abi"
	"github.com/flecht-dev/flecht/sdk/wire"
)

// Header is a Kafka record header; a nil Value is null.
type Header struct {
	Key   string
	Value []byte
}

// Record is the input record being transformed, with its state key's
// state. It is valid only during the handler's call: keep what you need
// of it, not the Record.
type Record struct {
	raw     abi.Record
	headers []Header // decoded on first use
	object  wire.Object
	objErr  error
	decoded bool
}

// reset forgets what was decoded of the record before; the batch reader
// reads the next into raw in place.
func (r *Record) reset() {
	r.headers, r.object, r.objErr, r.decoded = nil, nil, nil, false
}

// Topic is the input topic.
func (r *Record) Topic() string { return string(r.raw.Topic) }

// Partition is the input partition, which is also the task's.
func (r *Record) Partition() int32 { return r.raw.Partition }

// Offset is the record's offset in its partition.
func (r *Record) Offset() int64 { return r.raw.Offset }

// Time is the record's event time (its Kafka timestamp). Use it, not the
// clock: a replay must see the same time. The clock inside a module reads
// this time too.
func (r *Record) Time() time.Time { return time.UnixMilli(r.raw.Timestamp) }

// Key is the message key ("" for a null key: see NullKey).
func (r *Record) Key() string { return string(r.raw.Key) }

// KeyBytes is the message key's bytes, valid during the call.
func (r *Record) KeyBytes() []byte { return r.raw.Key }

// NullKey reports whether the key is null rather than empty.
func (r *Record) NullKey() bool { return r.raw.Flags&abi.RecordKeyNull != 0 }

// Tombstone reports whether the value is null.
func (r *Record) Tombstone() bool { return r.raw.Flags&abi.RecordValueNull != 0 }

// Value is the value's bytes as they are on the wire (nil for a
// tombstone), valid during the call.
func (r *Record) Value() []byte {
	if r.Tombstone() {
		return nil
	}
	return r.raw.Value
}

// Object decodes the value as a JSON object, strictly (the rules the
// runner applies to every record it decodes). A value that does not
// decode is usually bad data: return Reject(err.Error()) to send it down
// the stage's invalid_messages path. A tombstone decodes to nil.
func (r *Record) Object() (wire.Object, error) {
	if !r.decoded {
		r.decoded = true
		if !r.Tombstone() {
			if len(r.raw.Value) == 0 {
				r.object = wire.Object{} // an empty value is {}
			} else {
				r.object, r.objErr = wire.DecodeObject(r.raw.Value)
			}
		}
	}
	return r.object, r.objErr
}

// Headers are the record's headers, in order.
func (r *Record) Headers() []Header {
	if r.headers == nil && len(r.raw.Headers) > 0 {
		r.headers = make([]Header, len(r.raw.Headers))
		for i, h := range r.raw.Headers {
			r.headers[i] = Header{Key: string(h.Key), Value: h.Value}
		}
	}
	return r.headers
}

// Header is the value of the last header named name.
func (r *Record) Header(name string) ([]byte, bool) {
	for i := len(r.raw.Headers) - 1; i >= 0; i-- {
		if string(r.raw.Headers[i].Key) == name {
			return r.raw.Headers[i].Value, true
		}
	}
	return nil, false
}

// StateKey is the record's state key: the message key, or what the
// stage's state_key template makes of it. ok is false for a tombstone
// under a template that reads the value: it has no state key, and its
// handler may not set state.
func (r *Record) StateKey() (key string, ok bool) {
	if r.raw.Flags&abi.RecordNoStateKey != 0 {
		return "", false
	}
	return string(r.raw.StateKey), true
}

// State is the state key's state as the previous record of the key left
// it (committed or in the same transaction).
func (r *Record) State() State {
	if r.raw.Flags&abi.RecordHasState == 0 {
		return State{}
	}
	return State{raw: r.raw.State}
}

// State is a state key's state: a JSON object, or none.
type State struct {
	raw []byte
}

// Exists reports whether the key has state.
func (s State) Exists() bool { return s.raw != nil }

// Bytes is the state as canonical JSON (nil when none), valid during the
// call.
func (s State) Bytes() []byte { return s.raw }

// Object decodes the state; no state is an empty object.
func (s State) Object() (wire.Object, error) {
	if s.raw == nil {
		return wire.Object{}, nil
	}
	return wire.DecodeObject(s.raw)
}

// member finds a top-level member's bytes without decoding the state:
// the host keeps state canonical, so a plain scan finds it (an escaped
// member name sends it the long way round).
func (s State) member(name string) ([]byte, bool) {
	if s.raw == nil {
		return nil, false
	}
	if v, present, ok := topMember(s.raw, name); ok {
		return v, present
	}
	obj, err := wire.DecodeObject(s.raw)
	if err != nil {
		return nil, false
	}
	v, ok := obj[name]
	if !ok {
		return nil, false
	}
	b, err := wire.Marshal(v)
	return b, err == nil
}

// topMember finds member name of the canonical JSON object obj by
// skipping values, not checking them: what a module runs for every
// record costs ten times what it would natively. ok is false when obj is
// not shaped as expected or a member name holds an escape.
func topMember(obj []byte, name string) (value []byte, present, ok bool) {
	if len(obj) < 2 || obj[0] != '{' {
		return nil, false, false
	}
	i := 1
	for i < len(obj) && obj[i] == '"' {
		j := i + 1
		for j < len(obj) && obj[j] != '"' {
			if obj[j] == '\\' {
				return nil, false, false
			}
			j++
		}
		if j+1 >= len(obj) || obj[j+1] != ':' {
			return nil, false, false
		}
		start := j + 2
		end := skipValue(obj, start)
		if end < 0 {
			return nil, false, false
		}
		if string(obj[i+1:j]) == name {
			return obj[start:end], true, true
		}
		if end >= len(obj) || obj[end] != ',' {
			return nil, false, end < len(obj) && obj[end] == '}'
		}
		i = end + 1
	}
	return nil, false, i < len(obj) && obj[i] == '}'
}

// skipValue returns the offset after the JSON value at i, or -1.
func skipValue(b []byte, i int) int {
	depth := 0
	for i < len(b) {
		switch b[i] {
		case '"':
			i++
			for i < len(b) && b[i] != '"' {
				if b[i] == '\\' {
					i++
				}
				i++
			}
			if i >= len(b) {
				return -1
			}
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return i
			}
			depth--
		case ',':
			if depth == 0 {
				return i
			}
		case ' ', '\t', '\n', '\r':
			return -1 // not the canonical form: decode instead
		}
		i++
		if depth == 0 && i < len(b) && (b[i] == ',' || b[i] == '}') {
			return i
		}
	}
	return -1
}

// Int reads an integer member of the state.
func (s State) Int(name string) (int64, bool) {
	b, ok := s.member(name)
	if !ok || len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	// By hand: strconv and its string conversion cost a module more than
	// the scan.
	neg := b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 || (b[0] == '0' && len(b) > 1) {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		if n > (1<<63)/10 {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	switch {
	case !neg && n <= 1<<63-1:
		return int64(n), true
	case neg && n <= 1<<63:
		return -int64(n), true
	}
	return 0, false
}

// Float reads a number member of the state.
func (s State) Float(name string) (float64, bool) {
	b, ok := s.member(name)
	if !ok || !wire.ValidNumber(string(b)) {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(b), 64)
	return f, err == nil
}

// String reads a string member of the state.
func (s State) String(name string) (string, bool) {
	b, ok := s.member(name)
	if !ok || len(b) == 0 || b[0] != '"' {
		return "", false
	}
	var v string
	if json.Unmarshal(b, &v) != nil {
		return "", false
	}
	return v, true
}

// Bool reads a boolean member of the state.
func (s State) Bool(name string) (bool, bool) {
	b, ok := s.member(name)
	switch {
	case !ok:
		return false, false
	case string(b) == "true":
		return true, true
	case string(b) == "false":
		return false, true
	}
	return false, false
}
