package attr

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
)

// Record is a JSON object whose every write went through a codec (or through
// Wrap's normalization), so it always marshals. It is an immutable value:
// With returns a changed copy. The zero Record is the empty object.
type Record struct {
	raw map[string]any
}

// Event, State and Config are the three record kinds of a stage. They share
// Record's behaviour; the distinct types keep a State from being emitted
// where an Event belongs.
type (
	Event  struct{ Record }
	State  struct{ Record }
	Config struct{ Record }
)

// AnyRecord is the set of record types the generic constructors build.
type AnyRecord interface {
	Record | Event | State | Config
}

// Reader is anything an attribute can read from: Record, Event, State,
// Config. The interface is sealed so that every record keeps the
// JSON-native invariant.
type Reader interface {
	record() Record
}

func (r Record) record() Record { return r }

// Len is the number of top-level members.
func (r Record) Len() int { return len(r.raw) }

// Names returns the member names, sorted.
func (r Record) Names() []string {
	names := make([]string, 0, len(r.raw))
	for k := range r.raw {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}

// Raw returns a deep copy of the JSON-native map: read it, spread it, print
// it; changing it does not change the record.
func (r Record) Raw() map[string]any {
	return copyNative(r.raw).(map[string]any)
}

// View returns the JSON-native map itself, without the copy Raw makes, for
// read-only use on hot paths (rendering a state key per record). Callers
// must not modify it or anything in it: records are shared, immutable values.
func (r Record) View() map[string]any { return r.raw }

// RawValue returns a deep copy of one member's JSON-native value, for tools
// that inspect fields they have no attribute for (scan, inspect).
func (r Record) RawValue(name string) (any, bool) {
	v, ok := r.raw[name]
	return copyNative(v), ok
}

// Bytes is the canonical wire form (sorted keys, compact; see Marshal).
func (r Record) Bytes() ([]byte, error) {
	if r.raw == nil {
		return []byte("{}"), nil
	}
	return Marshal(r.raw)
}

// MarshalJSON makes a record print as its JSON object. Note that
// encoding/json re-escapes <, > and & in the result; use Bytes for the wire.
func (r Record) MarshalJSON() ([]byte, error) { return r.Bytes() }

// Equal reports whether two records write the same bytes (Bytes). Numbers
// compare as they are written: 1.5 and 1.50 are equal, 1 and 1.0 are not
// (an int and a float to a Python reader).
func (r Record) Equal(o Reader) bool {
	a, errA := r.Bytes()
	b, errB := o.record().Bytes()
	return errA == nil && errB == nil && bytes.Equal(a, b)
}

// With returns a copy of r with the fields applied in order: the spread idiom
// {**r, A: v}. Members not named keep their exact wire value. The first field
// that failed to encode (or broke the required rule) is returned as the
// error, and r is unchanged either way.
func (r Record) With(fields ...Field) (Record, error) {
	raw := make(map[string]any, len(r.raw)+len(fields))
	for k, v := range r.raw {
		raw[k] = v // values are never mutated in place, so sharing is safe
	}
	for _, f := range fields {
		if f.err != nil {
			return r, f.err
		}
		if f.del {
			delete(raw, f.name)
		} else {
			raw[f.name] = f.wire
		}
	}
	return Record{raw: raw}, nil
}

// With is Record.With keeping the Event type.
func (e Event) With(fields ...Field) (Event, error) {
	r, err := e.Record.With(fields...)
	return Event{r}, err
}

// With is Record.With keeping the State type.
func (s State) With(fields ...Field) (State, error) {
	r, err := s.Record.With(fields...)
	return State{r}, err
}

// With is Record.With keeping the Config type.
func (c Config) With(fields ...Field) (Config, error) {
	r, err := c.Record.With(fields...)
	return Config{r}, err
}

// Build makes a record of type R from typed fields, e.g.
// attr.Build[attr.Event](Device.Of("sensor-1"), Seen.Of(now)).
func Build[R AnyRecord](fields ...Field) (R, error) {
	rec, err := Record{}.With(fields...)
	return as[R](rec), err
}

// Wrap makes a record of type R from a wire-form map (decoded JSON, another
// record's Raw, an API payload) without any attribute: the extractor rule of
// relaying source data verbatim. Values are copied and normalized to
// JSON-native form; a value with no JSON form is an error.
func Wrap[R AnyRecord](raw map[string]any) (R, error) {
	var zero R
	w, err := normalize(raw)
	if err != nil {
		return zero, err
	}
	m, _ := w.(map[string]any)
	if m == nil {
		m = map[string]any{}
	}
	return as[R](Record{raw: m}), nil
}

// Convert re-types a record (a Config read as the State it seeds, say). The
// two share storage, which is safe because records are immutable.
func Convert[R AnyRecord](src Reader) R {
	return as[R](src.record())
}

// Decode strictly decodes a Kafka record value into R (docs/contract.md §2). A nil value
// is a tombstone: the record is empty and tombstone is true. Errors are
// *DecodeError with Part "value".
func Decode[R AnyRecord](value []byte) (rec R, tombstone bool, err error) {
	m, tomb, err := DecodeObject(value)
	if err != nil || tomb {
		return rec, tomb, err
	}
	return as[R](Record{raw: m}), false, nil
}

func as[R AnyRecord](rec Record) R {
	var out R
	switch p := any(&out).(type) {
	case *Record:
		*p = rec
	case *Event:
		p.Record = rec
	case *State:
		p.Record = rec
	case *Config:
		p.Record = rec
	default:
		panic("attr: unreachable record type " + reflect.TypeOf(out).String())
	}
	return out
}

// At returns the JSON-native value at a path of nested object members
// (["payload", "id"] for payload.id), without copying: read it, don't change
// it. present is false when a member is missing or a step is not an object.
func At(r Reader, path []string) (v any, present bool) {
	var cur any = r.record().raw
	for _, seg := range path {
		obj, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = obj[seg]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// ScalarText is the text of a string, number or boolean wire value, as it
// appears in keys and ids; other values (null, objects, arrays) have none.
func ScalarText(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case json.Number:
		return x.String(), true
	case bool:
		if x {
			return "true", true
		}
		return "false", true
	}
	return "", false
}
