package attr

import (
	"fmt"
	"unicode/utf8"

	"github.com/flecht-dev/flecht/sdk/wire"
)

// DecodeError says which part of a Kafka record would not decode and why.
// It is the "invalid message" of docs/contract.md §7: the caller routes it to the
// crash/skip/dlq policy and never repairs the input.
type DecodeError struct {
	Part   string // "key" or "value"
	Reason string // what was wrong, without echoing the payload
	Err    error  // the underlying parser error, if any
}

func (e *DecodeError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("invalid message %s: %s: %v", e.Part, e.Reason, e.Err)
	}
	return fmt.Sprintf("invalid message %s: %s", e.Part, e.Reason)
}

func (e *DecodeError) Unwrap() error { return e.Err }

// DecodeKey decodes a record key as strict UTF-8. A nil or empty key is "".
// Invalid bytes are an error, never replaced: a key is state identity, and two
// broken keys must not collide on U+FFFD.
func DecodeKey(key []byte) (string, error) {
	if !utf8.Valid(key) {
		return "", &DecodeError{Part: "key", Reason: fmt.Sprintf("not valid UTF-8 (first bad byte at offset %d)", wire.FirstInvalidUTF8(key))}
	}
	return string(key), nil
}

// DecodeObject decodes a record value. A nil value is a tombstone (the map is
// nil and tombstone is true); an empty, non-nil value is {}. Anything else
// must be one UTF-8 JSON object.
func DecodeObject(value []byte) (obj map[string]any, tombstone bool, err error) {
	if value == nil {
		return nil, true, nil
	}
	if len(value) == 0 {
		return map[string]any{}, false, nil
	}
	m, err := wire.DecodeObject(value)
	if err != nil {
		return nil, false, valueError(err)
	}
	return m, false, nil
}

// IsStoreTombstone reports whether a value deletes its key from a store
// view: a config topic's table or a changelog's state. Besides a real
// tombstone (null) that is an empty value and exactly {} (an empty record's
// bytes), as in the Python library, because the tools operators edit config
// topics with often cannot produce a null. Only a null lets compaction
// remove the key from the topic, so flecht itself writes null to delete.
// A data topic's record is a tombstone only when null (DecodeObject).
func IsStoreTombstone(value []byte) bool {
	return len(value) == 0 || string(value) == "{}"
}

// decodeJSONValue is wire.Decode (strict: valid UTF-8, no lone surrogate
// escape, no trailing data, only numbers that can be written back) with its
// error as the value part's *DecodeError.
func decodeJSONValue(b []byte) (any, error) {
	v, err := wire.Decode(b)
	if err != nil {
		return nil, valueError(err)
	}
	return v, nil
}

// valueError turns wire's decoding error into the value part's.
func valueError(err error) error {
	if we, ok := err.(*wire.DecodeError); ok {
		return &DecodeError{Part: "value", Reason: we.Reason, Err: we.Err}
	}
	return err
}

// ParseJSON strictly parses one JSON value (UTF-8, no lone surrogates, no
// trailing data) into JSON-native form with json.Number numbers. Errors are
// *DecodeError with Part "value".
func ParseJSON(b []byte) (any, error) {
	return decodeJSONValue(b)
}
