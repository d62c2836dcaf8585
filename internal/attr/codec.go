package attr

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/flecht-dev/flecht/sdk/wire"
)

// Codec converts between a Go value of type T and its JSON-native wire form
// (nil, bool, string, json.Number, []any, map[string]any). Encode validates:
// it is the write-site check. Decode is strict: a wire value of the wrong
// shape is an error, never coerced.
//
// Codecs outside this package (the ENCRYPTED codec in internal/secret)
// implement this interface; that is how attr stays free of crypto.
type Codec[T any] interface {
	Encode(v T) (any, error)
	Decode(wire any) (T, error)
	String() string // the declaration as written, e.g. LIST(STR)
}

// funcCodec is the one implementation the built-in codecs share.
type funcCodec[T any] struct {
	name string
	enc  func(T) (any, error)
	dec  func(any) (T, error)
}

func (c funcCodec[T]) Encode(v T) (any, error)    { return c.enc(v) }
func (c funcCodec[T]) Decode(wire any) (T, error) { return c.dec(wire) }
func (c funcCodec[T]) String() string             { return c.name }

func newCodec[T any](name string, enc func(T) (any, error), dec func(any) (T, error)) Codec[T] {
	return funcCodec[T]{name: name, enc: enc, dec: dec}
}

// wrongType is the error every decoder returns for a wire value of the wrong
// JSON kind. It names kinds only, never the value (which may be a secret).
func wrongType(want string, got any) error {
	return fmt.Errorf("expected %s, got %s", want, wire.Kind(got))
}

// STR is a JSON string.
var STR Codec[string] = newCodec("STR",
	func(s string) (any, error) {
		return normalize(s)
	},
	func(w any) (string, error) {
		s, ok := w.(string)
		if !ok {
			return "", wrongType("string", w)
		}
		return s, nil
	})

// INT is a JSON integer literal that fits int64. 1.0 and 1e3 are rejected,
// as the Python codec rejects the float they decode to.
var INT Codec[int64] = newCodec("INT",
	func(n int64) (any, error) {
		return json.Number(strconv.FormatInt(n, 10)), nil
	},
	func(w any) (int64, error) {
		num, ok := w.(json.Number)
		if !ok {
			return 0, wrongType("integer", w)
		}
		n, err := strconv.ParseInt(string(num), 10, 64)
		if err != nil {
			if wire.ValidNumber(string(num)) && wire.IsIntegerLiteral(string(num)) {
				return 0, fmt.Errorf("integer %s is out of the int64 range", num)
			}
			return 0, fmt.Errorf("expected integer, got number %s", num)
		}
		return n, nil
	})

// BOOL is JSON true or false.
var BOOL Codec[bool] = newCodec("BOOL",
	func(b bool) (any, error) { return b, nil },
	func(w any) (bool, error) {
		b, ok := w.(bool)
		if !ok {
			return false, wrongType("boolean", w)
		}
		return b, nil
	})

// FLOAT is a JSON number read as float64. It is written as Python's repr
// writes a float (1.0, 1e+16), so a Python reader sees a float, not an int.
// Reading accepts an integer literal too: JSON has one number type and
// producers such as JavaScript write 1.0 as 1. NaN and ±Inf are rejected both
// ways (JSON has no spelling for them).
var FLOAT Codec[float64] = newCodec("FLOAT",
	func(f float64) (any, error) {
		s, err := pyFloat(f)
		if err != nil {
			return nil, err
		}
		return json.Number(s), nil
	},
	func(w any) (float64, error) {
		num, ok := w.(json.Number)
		if !ok {
			return 0, wrongType("number", w)
		}
		f, err := strconv.ParseFloat(string(num), 64)
		if err != nil {
			return 0, fmt.Errorf("number %s does not fit a float64", num)
		}
		return f, nil
	})

// BYTES is binary as strict, canonical RFC 4648 §4 base64 (standard alphabet,
// padded) in a JSON string. Whitespace, line breaks, the URL alphabet,
// missing padding and non-zero trailing bits are all rejected, so one byte
// string has exactly one wire form. Errors give the length, never the data.
var BYTES Codec[[]byte] = newCodec("BYTES",
	func(b []byte) (any, error) {
		return base64.StdEncoding.EncodeToString(b), nil
	},
	func(w any) ([]byte, error) {
		s, ok := w.(string)
		if !ok {
			return nil, wrongType("base64 string", w)
		}
		b, err := base64.StdEncoding.Strict().DecodeString(s)
		// Go's decoder skips \r and \n even in strict mode; the re-encode
		// comparison catches those and any other non-canonical spelling.
		if err != nil || base64.StdEncoding.EncodeToString(b) != s {
			return nil, fmt.Errorf("not canonical standard base64 (%d chars)", len(s))
		}
		return b, nil
	})
