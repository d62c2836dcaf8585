package attr

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/flecht-dev/flecht/internal/jsonspan"
	"github.com/flecht-dev/flecht/sdk/wire"
)

// This file works on JSON bytes instead of decoded maps, for tools that must
// change one field and leave every other byte of a record as it was: key
// order, whitespace, escapes, number spellings. A re-encryption sweep
// rewrites a token this way, so a record's unrelated fields do not churn and
// its diff is exactly the field it meant to change. The byte scanning is
// package jsonspan's; the strict validation it relies on stays here.

// RawMember is one top-level member of a JSON object as it is on the wire.
type RawMember struct {
	Key   string          // the decoded key
	Value json.RawMessage // the value's exact bytes, without surrounding whitespace
}

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
		return nil, nil // an empty value is {} (docs/contract.md §2)
	}
	start, err := rawObjectStart(raw)
	if err != nil {
		return nil, err
	}
	ms, err := jsonspan.Members(raw, start)
	if err != nil {
		return nil, err
	}
	out := make([]RawMember, len(ms))
	for i, m := range ms {
		out[i] = RawMember{Key: m.Key, Value: json.RawMessage(raw[m.Start:m.End])}
	}
	return out, nil
}

// CheckObject validates raw as Members does, without listing the members:
// nil when raw is a JSON object (or empty, which is {}).
func CheckObject(raw []byte) error {
	if len(raw) == 0 {
		return nil
	}
	_, err := rawObjectStart(raw)
	return err
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
		raw = []byte("{}") // an empty value is {} (docs/contract.md §2)
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
		ms, err := jsonspan.Members(raw, at)
		if err != nil {
			return 0, 0, err
		}
		found := -1
		for i, m := range ms {
			if m.Key != seg {
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
			return ms[found].Start, ms[found].End, nil
		}
		at = ms[found].Start
	}
	panic("unreachable")
}

// rawObjectStart validates raw as strictly as DecodeObject does, without
// building a map, and returns the offset of its '{'. Numbers are the one
// exception: a number that DecodeObject refuses because it could not be
// written back (1E400) is still valid JSON, and the tools working on raw
// bytes never write it anew, they keep it byte for byte.
func rawObjectStart(raw []byte) (int, error) {
	if err := wire.CheckSyntax(raw); err != nil {
		return 0, valueError(err)
	}
	at := jsonspan.SkipSpace(raw, 0)
	if raw[at] != '{' {
		// The kind of what Decode makes of it; a number it refuses leaves
		// nothing, named null.
		v, _ := wire.Decode(raw)
		return 0, &DecodeError{Part: "value", Reason: fmt.Sprintf("JSON %s, expected an object", wire.Kind(v))}
	}
	return at, nil
}
