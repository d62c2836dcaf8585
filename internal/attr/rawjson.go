package attr

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// This file works on JSON bytes instead of decoded maps, for tools that must
// change one field and leave every other byte of a record as it was: key
// order, whitespace, escapes, number spellings. A re-encryption sweep
// rewrites a token this way, so a record's unrelated fields do not churn and
// its diff is exactly the field it meant to change.

// RawMember is one top-level member of a JSON object as it is on the wire.
type RawMember struct {
	Key   string          // the decoded key
	Value json.RawMessage // the value's exact bytes, without surrounding whitespace
}

var errMalformedObject = errors.New("malformed JSON object")

// ErrFieldNotFound: the path names a member that does not exist.
var ErrFieldNotFound = errors.New("field not found")

// SplitPath splits a dotted path ("auth.api_key") into segments. Keys that
// contain dots need the []string form directly.
func SplitPath(dotted string) []string {
	return strings.Split(dotted, ".")
}

// Members returns the top-level members of a JSON object in wire order,
// duplicates included. raw must be strictly valid (see DecodeObject).
func Members(raw []byte) ([]RawMember, error) {
	if len(raw) == 0 {
		return nil, nil // an empty value is {} (SPEC §2)
	}
	start, err := rawObjectStart(raw)
	if err != nil {
		return nil, err
	}
	ms, err := objectMembers(raw, start)
	if err != nil {
		return nil, err
	}
	out := make([]RawMember, len(ms))
	for i, m := range ms {
		out[i] = RawMember{Key: m.key, Value: json.RawMessage(raw[m.valStart:m.valEnd])}
	}
	return out, nil
}

// LookupField returns the exact bytes of the value at path (each segment a
// member of the object before it).
func LookupField(raw []byte, path []string) (json.RawMessage, error) {
	start, end, err := fieldSpan(raw, path)
	if err != nil {
		return nil, err
	}
	return json.RawMessage(raw[start:end]), nil
}

// ReplaceField returns raw with the value at path replaced by newValue, and
// every other byte unchanged. newValue must be one valid JSON value
// (surrounding whitespace is dropped). A path
// through a duplicated key is refused: which copy a reader takes is the last,
// but rewriting only one would leave the other behind.
func ReplaceField(raw []byte, path []string, newValue []byte) ([]byte, error) {
	if _, err := decodeJSONValue(newValue); err != nil {
		return nil, fmt.Errorf("replacement value: %w", err)
	}
	newValue = bytes.Trim(newValue, " \t\r\n")
	start, end, err := fieldSpan(raw, path)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(raw)-(end-start)+len(newValue))
	out = append(out, raw[:start]...)
	out = append(out, newValue...)
	out = append(out, raw[end:]...)
	return out, nil
}

func fieldSpan(raw []byte, path []string) (int, int, error) {
	if len(path) == 0 {
		return 0, 0, errors.New("empty field path")
	}
	if len(raw) == 0 {
		raw = []byte("{}") // an empty value is {} (SPEC §2)
	}
	at, err := rawObjectStart(raw)
	if err != nil {
		return 0, 0, err
	}
	for depth, seg := range path {
		where := strings.Join(path[:depth+1], ".")
		if raw[at] != '{' {
			return 0, 0, fmt.Errorf("%s: parent is not an object", where)
		}
		ms, err := objectMembers(raw, at)
		if err != nil {
			return 0, 0, err
		}
		found := -1
		for i, m := range ms {
			if m.key != seg {
				continue
			}
			if found >= 0 {
				return 0, 0, fmt.Errorf("%s: key appears more than once", where)
			}
			found = i
		}
		if found < 0 {
			return 0, 0, fmt.Errorf("%s: %w", where, ErrFieldNotFound)
		}
		if depth == len(path)-1 {
			return ms[found].valStart, ms[found].valEnd, nil
		}
		at = ms[found].valStart
	}
	panic("unreachable")
}

// rawObjectStart validates raw as strictly as DecodeObject does, without
// building a map, and returns the offset of its '{'.
func rawObjectStart(raw []byte) (int, error) {
	if !utf8.Valid(raw) || !json.Valid(raw) || loneSurrogate(raw) >= 0 {
		_, err := decodeJSONValue(raw) // the slow path only for the message
		if err == nil {
			err = &DecodeError{Part: "value", Reason: "not JSON"}
		}
		return 0, err
	}
	at := skipSpace(raw, 0)
	if raw[at] != '{' {
		v, _ := decodeJSONValue(raw)
		return 0, &DecodeError{Part: "value", Reason: fmt.Sprintf("JSON %s, expected an object", jsonKind(v))}
	}
	return at, nil
}

// unquote decodes a JSON string literal; the common case without escapes
// needs no allocation beyond the string itself.
func unquote(lit []byte) (string, bool) {
	if len(lit) >= 2 && bytes.IndexByte(lit[1:len(lit)-1], '\\') < 0 {
		return string(lit[1 : len(lit)-1]), true
	}
	var s string
	err := json.Unmarshal(lit, &s)
	return s, err == nil
}

type rawMember struct {
	key              string
	valStart, valEnd int
}

// objectMembers lists the members of the object starting at raw[at] == '{'.
// raw has been validated, but every index is still checked so that a bug
// here is an error, not a panic.
func objectMembers(raw []byte, at int) ([]rawMember, error) {
	// Unreachable on validated input; a fixed error keeps the hot path free
	// of allocations.
	malformed := errMalformedObject
	if at >= len(raw) || raw[at] != '{' {
		return nil, malformed
	}
	i := skipSpace(raw, at+1)
	var out []rawMember
	if i < len(raw) && raw[i] == '}' {
		return out, nil
	}
	for {
		if i >= len(raw) || raw[i] != '"' {
			return nil, malformed
		}
		keyEnd := stringEnd(raw, i)
		if keyEnd < 0 {
			return nil, malformed
		}
		key, ok := unquote(raw[i:keyEnd])
		if !ok {
			return nil, malformed
		}
		i = skipSpace(raw, keyEnd)
		if i >= len(raw) || raw[i] != ':' {
			return nil, malformed
		}
		valStart := skipSpace(raw, i+1)
		valEnd := valueEnd(raw, valStart)
		if valEnd < 0 {
			return nil, malformed
		}
		out = append(out, rawMember{key: key, valStart: valStart, valEnd: valEnd})
		i = skipSpace(raw, valEnd)
		if i >= len(raw) {
			return nil, malformed
		}
		switch raw[i] {
		case ',':
			i = skipSpace(raw, i+1)
		case '}':
			return out, nil
		default:
			return nil, malformed
		}
	}
}

func skipSpace(raw []byte, i int) int {
	for i < len(raw) {
		switch raw[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// stringEnd returns the offset just past the string starting at raw[i] == '"',
// or -1.
func stringEnd(raw []byte, i int) int {
	for j := i + 1; j < len(raw); j++ {
		switch raw[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return -1
}

// valueEnd returns the offset just past the value starting at raw[i], or -1.
// Containers are skipped by bracket depth, iteratively, so deep nesting
// cannot exhaust the stack.
func valueEnd(raw []byte, i int) int {
	if i >= len(raw) {
		return -1
	}
	switch raw[i] {
	case '"':
		return stringEnd(raw, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(raw); j++ {
			switch raw[j] {
			case '"':
				end := stringEnd(raw, j)
				if end < 0 {
					return -1
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	default:
		j := i
		for j < len(raw) {
			switch raw[j] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return j
			}
			j++
		}
		return j
	}
}
