package attr

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"unicode/utf8"
)

// DecodeError says which part of a Kafka record would not decode and why.
// It is the "invalid message" of SPEC §7: the caller routes it to the
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
		return "", &DecodeError{Part: "key", Reason: fmt.Sprintf("not valid UTF-8 (first bad byte at offset %d)", firstInvalidUTF8(key))}
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
	v, err := decodeJSONValue(value)
	if err != nil {
		return nil, false, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, false, &DecodeError{Part: "value", Reason: fmt.Sprintf("JSON %s, expected an object", jsonKind(v))}
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

// decodeJSONValue parses exactly one JSON value into JSON-native form with
// numbers kept as json.Number. It is strict where encoding/json is lenient:
// invalid UTF-8 and lone surrogate escapes are errors instead of silently
// becoming U+FFFD, and trailing data is an error. It also refuses what
// decodes but can never be written back in the canonical form (a lone
// surrogate, a number beyond float64, an integer over 4300 digits; see
// number.go): Python decodes those and then fails when it writes them.
func decodeJSONValue(b []byte) (any, error) {
	if s, ok := simpleString(b); ok {
		return s, nil // the common encrypted payload, without a Decoder
	}
	if !utf8.Valid(b) {
		return nil, &DecodeError{Part: "value", Reason: fmt.Sprintf("not valid UTF-8 (first bad byte at offset %d)", firstInvalidUTF8(b))}
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, &DecodeError{Part: "value", Reason: "not JSON", Err: err}
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, &DecodeError{Part: "value", Reason: fmt.Sprintf("trailing data after the JSON value at offset %d", dec.InputOffset())}
	}
	if off := loneSurrogate(b); off >= 0 {
		return nil, &DecodeError{Part: "value", Reason: fmt.Sprintf("lone UTF-16 surrogate escape at offset %d", off)}
	}
	if off, err := numberProblem(b); off >= 0 {
		return nil, &DecodeError{Part: "value", Reason: fmt.Sprintf("number at offset %d cannot be written back", off), Err: err}
	}
	return v, nil
}

func firstInvalidUTF8(b []byte) int {
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 {
			return i
		}
		i += size
	}
	return -1
}

// loneSurrogate returns the offset of the first \uD800-\uDFFF escape that is
// not part of a high+low pair, or -1. b must be valid JSON.
func loneSurrogate(b []byte) int {
	if !bytes.Contains(b, []byte(`\u`)) {
		return -1
	}
	inString := false
	for i := 0; i < len(b); i++ {
		c := b[i]
		if !inString {
			if c == '"' {
				inString = true
			}
			continue
		}
		switch c {
		case '"':
			inString = false
		case '\\':
			if i+1 < len(b) && b[i+1] == 'u' {
				r, ok := hex4(b, i+2)
				if ok && r >= 0xD800 && r <= 0xDFFF {
					if r >= 0xDC00 {
						return i
					}
					// high surrogate: must be followed by \u low surrogate
					lo, ok := rune(0), false
					if i+7 < len(b) && b[i+6] == '\\' && b[i+7] == 'u' {
						lo, ok = hex4(b, i+8)
					}
					if !ok || lo < 0xDC00 || lo > 0xDFFF {
						return i
					}
					i += 11 // past the pair
					continue
				}
				i += 5
				continue
			}
			i++ // skip the escaped character
		}
	}
	return -1
}

func hex4(b []byte, at int) (rune, bool) {
	if at+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[at : at+4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, false
		}
	}
	return r, true
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case json.Number:
		return "number"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

// ParseJSON strictly parses one JSON value (UTF-8, no lone surrogates, no
// trailing data) into JSON-native form with json.Number numbers. Errors are
// *DecodeError with Part "value".
func ParseJSON(b []byte) (any, error) {
	return decodeJSONValue(b)
}

// simpleString recognizes a JSON string literal with no escapes and no
// control characters, the one shape that needs no real parser.
func simpleString(b []byte) (string, bool) {
	if len(b) < 2 || b[0] != '"' || b[len(b)-1] != '"' {
		return "", false
	}
	inner := b[1 : len(b)-1]
	for _, c := range inner {
		if c < 0x20 || c == '"' || c == '\\' {
			return "", false
		}
	}
	if !utf8.Valid(inner) {
		return "", false
	}
	return string(inner), true
}
