package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"unicode/utf8"
)

// DecodeError says why bytes are not a value Decode accepts. Reason never
// echoes the input (it may hold a secret); Err is the underlying parser's
// error, if any.
type DecodeError struct {
	Reason string
	Err    error
}

func (e *DecodeError) Error() string {
	if e.Err != nil {
		return e.Reason + ": " + e.Err.Error()
	}
	return e.Reason
}

func (e *DecodeError) Unwrap() error { return e.Err }

// Decode parses exactly one JSON value into JSON-native form (nil, bool,
// string, json.Number, []any, map[string]any). It is strict where
// encoding/json is lenient: invalid UTF-8 and lone UTF-16 surrogate escapes
// are errors instead of silently becoming U+FFFD, and anything but
// whitespace after the value is an error. It also refuses what decodes but
// can never be written back canonically: a number beyond the float64 range
// or an integer of more than 4300 digits (Python decodes those and then
// fails when it writes them). Errors are *DecodeError.
func Decode(b []byte) (any, error) {
	if s, ok := simpleString(b); ok {
		return s, nil // the common encrypted payload, without a parser
	}
	v, err := parse(b)
	if err != nil {
		return nil, err
	}
	if off, err := numberProblem(b); off >= 0 {
		return nil, &DecodeError{Reason: fmt.Sprintf("number at offset %d cannot be written back", off), Err: err}
	}
	return v, nil
}

// DecodeObject is Decode for a value that must be a JSON object; any other
// value is an error naming the JSON kind it is.
func DecodeObject(b []byte) (Object, error) {
	v, err := Decode(b)
	if err != nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, &DecodeError{Reason: fmt.Sprintf("JSON %s, expected an object", Kind(v))}
	}
	return Object(m), nil
}

// CheckSyntax checks b as strictly as Decode does, except for numbers: one
// JSON value, valid UTF-8, no lone surrogate escape, no trailing data. A
// number Decode refuses because it could not be written back (1E400) passes:
// this is the check for tools that keep bytes as they are and never write
// such a number anew. It builds no value. Errors are *DecodeError, the one
// Decode would return.
func CheckSyntax(b []byte) error {
	if utf8.Valid(b) && validJSON(b) && loneSurrogate(b) < 0 {
		return nil
	}
	if _, err := parse(b); err != nil {
		return err
	}
	return &DecodeError{Reason: "not JSON"}
}

// parse is Decode without the number check.
func parse(b []byte) (any, *DecodeError) {
	if !utf8.Valid(b) {
		return nil, &DecodeError{Reason: fmt.Sprintf("not valid UTF-8 (first bad byte at offset %d)", FirstInvalidUTF8(b))}
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, &DecodeError{Reason: "not JSON", Err: err}
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, &DecodeError{Reason: fmt.Sprintf("trailing data after the JSON value at offset %d", dec.InputOffset())}
	}
	if off := loneSurrogate(b); off >= 0 {
		return nil, &DecodeError{Reason: fmt.Sprintf("lone UTF-16 surrogate escape at offset %d", off)}
	}
	return v, nil
}

// FirstInvalidUTF8 is the offset of the first byte of b that is not part of
// valid UTF-8, or -1 when b is valid.
func FirstInvalidUTF8(b []byte) int {
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

// Kind names the JSON kind of a JSON-native value, as errors do: "null",
// "boolean", "string", "number", "array" or "object" (map[string]any and
// Object alike). Any other value is named by its Go type.
func Kind(v any) string {
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
	case map[string]any, Object:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}
