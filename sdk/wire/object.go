package wire

import (
	"encoding/json"
	"strconv"
)

// Object is a decoded JSON object. Its values are JSON-native: nil, bool,
// string, json.Number, []any, and nested objects as map[string]any or
// Object. Build one as a map literal and write it with Bytes (or Marshal),
// which also takes the Go conveniences Marshal lists.
//
// The accessors read what Decode produces, and the Go numbers a map literal
// holds (Int reads json.Number("3") and int 3 alike, but not 3.0). Their
// second result is false when the member is absent or of another kind, so a
// null reads as absent, as it does in the Python library.
type Object map[string]any

// Int is the member as an int64: present, and an integer literal (no
// fraction, no exponent; 1.0 is a float to a Python reader) that fits int64.
func (o Object) Int(name string) (int64, bool) {
	n, ok := numberOf(o[name])
	if !ok || !isIntegerLiteral(string(n)) {
		return 0, false
	}
	i, err := strconv.ParseInt(string(n), 10, 64)
	return i, err == nil
}

// Float is the member as a float64: any number, integer literals included
// (JSON producers such as JavaScript write 1.0 as 1).
func (o Object) Float(name string) (float64, bool) {
	n, ok := numberOf(o[name])
	if !ok {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(n), 64)
	return f, err == nil
}

// String is the member as a string, when it is one.
func (o Object) String(name string) (string, bool) {
	s, ok := o[name].(string)
	return s, ok
}

// Bool is the member as a bool, when it is one.
func (o Object) Bool(name string) (bool, bool) {
	b, ok := o[name].(bool)
	return b, ok
}

// Object is the member as an Object, when it is a nested object
// (map[string]any or Object). It shares the nested map: changing it
// changes o.
func (o Object) Object(name string) (Object, bool) {
	return asObject(o[name])
}

// Lookup walks nested objects, one member name a step (["payload", "id"]
// for payload.id), and returns the value it ends at. It is false when a
// member is missing or a step is not an object. No names at all is o
// itself.
func (o Object) Lookup(path ...string) (any, bool) {
	var cur any = o
	for _, name := range path {
		obj, ok := asObject(cur)
		if !ok {
			return nil, false
		}
		if cur, ok = obj[name]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// Bytes is Marshal(o): the canonical form.
func (o Object) Bytes() ([]byte, error) {
	return Marshal(o)
}

func asObject(v any) (Object, bool) {
	switch x := v.(type) {
	case Object:
		return x, true
	case map[string]any:
		return Object(x), true
	}
	return nil, false
}

// numberOf is a number member's JSON text: a json.Number as it is, a Go
// number as Marshal would write it.
func numberOf(v any) (json.Number, bool) {
	switch x := v.(type) {
	case json.Number:
		return x, true
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, float32, float64:
		b, err := Marshal(x)
		return json.Number(b), err == nil
	}
	return "", false
}
