package wire

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"unicode/utf8"
)

// maxDepth bounds the nesting Marshal follows in values built in Go (a
// slice that contains itself would recurse forever). Decoded values stay
// within encoding/json's own limit of the same size.
const maxDepth = 10000

var (
	errInvalidUTF8 = errors.New("string is not valid UTF-8")
	errDepth       = fmt.Errorf("value nested deeper than %d levels", maxDepth)
)

// Marshal writes v in the canonical wire form (see the package
// documentation): what the Python library writes for the same value, so
// equal values give equal bytes in both languages.
//
// v may be a JSON-native value (nil, bool, string, json.Number, []any,
// map[string]any, Object), a json.RawMessage (decoded strictly first, as
// Decode does), or one of the Go conveniences: any int or uint kind,
// float32 and float64 (written as Python writes a float: 1 is 1.0), []string
// and map[string]string. Containers may nest any of these. Anything else is
// an error, and so are a string or object key that is not valid UTF-8, a
// json.Number that is not a JSON number or has no canonical spelling (see
// CanonicalNumber), NaN and ±Inf, and nesting deeper than 10000 levels.
func Marshal(v any) ([]byte, error) {
	bp := bufPool.Get().(*[]byte)
	b, err := appendValue((*bp)[:0], v, 0)
	var out []byte
	if err == nil {
		out = append(make([]byte, 0, len(b)), b...)
	}
	if cap(b) <= maxPooled {
		*bp = b[:0]
		bufPool.Put(bp)
	}
	return out, err
}

// AppendMarshal appends Marshal's form of v to dst. On an error dst is
// returned as it was.
func AppendMarshal(dst []byte, v any) ([]byte, error) {
	out, err := appendValue(dst, v, 0)
	if err != nil {
		return dst, err
	}
	return out, nil
}

// Marshal writes into a pooled buffer and copies the result out, so a call
// allocates once, for exactly the bytes it returns.
var bufPool = sync.Pool{New: func() any {
	b := make([]byte, 0, 1024)
	return &b
}}

// maxPooled keeps a rare huge value from pinning its buffer in the pool.
const maxPooled = 64 << 10

func appendValue(dst []byte, v any, depth int) ([]byte, error) {
	if depth > maxDepth {
		return dst, errDepth
	}
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...), nil
	case bool:
		if x {
			return append(dst, "true"...), nil
		}
		return append(dst, "false"...), nil
	case string:
		return appendStrict(dst, x)
	case json.Number:
		if !ValidNumber(string(x)) {
			return dst, fmt.Errorf("json.Number %q is not a JSON number", string(x))
		}
		return appendNumber(dst, string(x))
	case map[string]any:
		return appendObject(dst, x, depth)
	case Object:
		return appendObject(dst, x, depth)
	case []any:
		dst = append(dst, '[')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = appendValue(dst, e, depth+1); err != nil {
				return dst, fmt.Errorf("[%d]: %w", i, err)
			}
		}
		return append(dst, ']'), nil
	case int:
		return strconv.AppendInt(dst, int64(x), 10), nil
	case int8:
		return strconv.AppendInt(dst, int64(x), 10), nil
	case int16:
		return strconv.AppendInt(dst, int64(x), 10), nil
	case int32:
		return strconv.AppendInt(dst, int64(x), 10), nil
	case int64:
		return strconv.AppendInt(dst, x, 10), nil
	case uint:
		return strconv.AppendUint(dst, uint64(x), 10), nil
	case uint8:
		return strconv.AppendUint(dst, uint64(x), 10), nil
	case uint16:
		return strconv.AppendUint(dst, uint64(x), 10), nil
	case uint32:
		return strconv.AppendUint(dst, uint64(x), 10), nil
	case uint64:
		return strconv.AppendUint(dst, x, 10), nil
	case float32:
		return AppendFloat(dst, float64(x))
	case float64:
		return AppendFloat(dst, x)
	case []string:
		if len(x) > 0 && depth+1 > maxDepth {
			// Its strings are one level down, as []any's elements are.
			return dst, fmt.Errorf("[0]: %w", errDepth)
		}
		dst = append(dst, '[')
		for i, s := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = appendStrict(dst, s); err != nil {
				return dst, fmt.Errorf("[%d]: %w", i, err)
			}
		}
		return append(dst, ']'), nil
	case map[string]string:
		return appendObject(dst, x, depth)
	case json.RawMessage:
		w, err := Decode(x)
		if err != nil {
			return dst, err
		}
		// What a RawMessage holds is bounded by the decoder's own limit; its
		// nesting counts afresh, wherever it stands.
		return appendValue(dst, w, 0)
	}
	// reflect.TypeOf, not %T: v must not escape, or every caller's value
	// would be boxed on the heap (costly inside a module).
	return dst, fmt.Errorf("no JSON form for %s", reflect.TypeOf(v))
}

// appendObject writes an object with its members sorted by key. Byte order
// of UTF-8 is code point order, which is what Python's sort_keys uses.
func appendObject[V any, M ~map[string]V](dst []byte, m M, depth int) ([]byte, error) {
	var small [32]string
	keys := small[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	dst = append(dst, '{')
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		var err error
		if dst, err = appendStrict(dst, k); err != nil {
			return dst, fmt.Errorf("object key: %w", err)
		}
		dst = append(dst, ':')
		if dst, err = appendValue(dst, any(m[k]), depth+1); err != nil {
			return dst, fmt.Errorf("%s: %w", strconv.Quote(k), err)
		}
	}
	return append(dst, '}'), nil
}

func appendStrict(dst []byte, s string) ([]byte, error) {
	out, ok := appendString(dst, s, true)
	if !ok {
		return dst, errInvalidUTF8
	}
	return out, nil
}

// AppendString appends s as a canonical JSON string: quoted, with only the
// quote, the backslash and the control characters escaped (\b \f \n \r \t,
// the others as \u00XX in lowercase hex), as Python's json writes it with
// ensure_ascii=False. A byte that is not valid UTF-8 is written as the
// escape \ufffd, never as itself (Marshal refuses such a string instead).
func AppendString(dst []byte, s string) []byte {
	out, _ := appendString(dst, s, false)
	return out
}

const hexDigits = "0123456789abcdef"

// appendString is AppendString; when strict, invalid UTF-8 makes it stop
// and report false instead.
func appendString(dst []byte, s string, strict bool) ([]byte, bool) {
	dst = append(dst, '"')
	from := 0 // s[from:i] is still to be copied as it is
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				if strict {
					return dst, false
				}
				dst = append(dst, s[from:i]...)
				dst = append(dst, `\ufffd`...)
				from = i + 1
			}
			i += size
			continue
		}
		if c >= 0x20 && c != '"' && c != '\\' {
			i++
			continue
		}
		dst = append(dst, s[from:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		i++
		from = i
	}
	dst = append(dst, s[from:]...)
	return append(dst, '"'), true
}
