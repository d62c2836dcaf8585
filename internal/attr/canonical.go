package attr

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"
)

// Marshal writes a JSON-native value in the canonical wire form the Python
// library writes (json.dumps with sort_keys, compact separators,
// ensure_ascii=False, allow_nan=False) for the value Python's json.loads makes
// of the same input: equal records give equal bytes in both languages. Unlike
// encoding/json it does not escape <, >, & or U+2028. A json.Number is
// written as Python writes the int or float it stands for (number.go):
// integers exactly at any size, everything else in repr form, so 1e2 is
// written 100.0 and 1.50 is written 1.5.
//
// v may be any value ANY accepts; it is normalized first.
func Marshal(v any) ([]byte, error) {
	w, err := normalize(v)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := writeCanonical(&buf, w); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// writeCanonical expects an already normalized JSON-native value.
func writeCanonical(buf *bytes.Buffer, v any) error {
	switch x := v.(type) {
	case nil:
		buf.WriteString("null")
	case bool:
		if x {
			buf.WriteString("true")
		} else {
			buf.WriteString("false")
		}
	case string:
		writeString(buf, x)
	case json.Number:
		return writeNumber(buf, string(x))
	case []any:
		buf.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeCanonical(buf, e); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		// Byte order of UTF-8 equals code point order, which is what Python's
		// sort_keys uses.
		slices.Sort(keys)
		buf.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			writeString(buf, k)
			buf.WriteByte(':')
			if err := writeCanonical(buf, x[k]); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
	default:
		return fmt.Errorf("not a JSON-native value: %T", v)
	}
	return nil
}

// writeString escapes like Python's json with ensure_ascii=False: quote,
// backslash and control characters only, lowercase hex.
func writeString(buf *bytes.Buffer, s string) {
	buf.WriteByte('"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			if c < utf8.RuneSelf {
				buf.WriteByte(c)
				i++
				continue
			}
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				// Go strings may hold invalid UTF-8; never emit it.
				buf.WriteString(`\ufffd`)
			} else {
				buf.WriteString(s[i : i+size])
			}
			i += size
			continue
		}
		switch c {
		case '"':
			buf.WriteString(`\"`)
		case '\\':
			buf.WriteString(`\\`)
		case '\n':
			buf.WriteString(`\n`)
		case '\r':
			buf.WriteString(`\r`)
		case '\t':
			buf.WriteString(`\t`)
		case '\b':
			buf.WriteString(`\b`)
		case '\f':
			buf.WriteString(`\f`)
		default:
			fmt.Fprintf(buf, `\u%04x`, c)
		}
		i++
	}
	buf.WriteByte('"')
}

// pyFloat formats f as Python's repr(float) does, which is what the Python
// library writes: shortest round-trip digits, always a decimal point or an
// exponent (1.0, not 1), scientific outside 1e-4 <= |f| < 1e16. A Python
// reader's FLOAT codec rejects an integer literal, so "1" would not do.
func pyFloat(f float64) (string, error) {
	var buf [32]byte
	b, err := appendPyFloat(buf[:0], f)
	return string(b), err
}

// appendPyFloat appends pyFloat's form of f to dst.
func appendPyFloat(dst []byte, f float64) ([]byte, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return dst, fmt.Errorf("%v is not representable in JSON", f)
	}
	if f == 0 {
		if math.Signbit(f) {
			return append(dst, "-0.0"...), nil
		}
		return append(dst, "0.0"...), nil
	}
	if f < 0 {
		dst = append(dst, '-')
		f = -f
	}
	// [d][.ddd]e±XX: the shortest digits that read back as f.
	var sci [32]byte
	e := strconv.AppendFloat(sci[:0], f, 'e', -1, 64)
	at := bytes.IndexByte(e, 'e')
	exp, _ := strconv.Atoi(string(e[at+1:]))
	var digits [24]byte
	d := append(digits[:0], e[0])
	if at > 1 {
		d = append(d, e[2:at]...) // skip the point
	}
	switch {
	case exp >= 16 || exp < -4:
		dst = append(dst, d[0])
		if len(d) > 1 {
			dst = append(dst, '.')
			dst = append(dst, d[1:]...)
		}
		dst = append(dst, 'e')
		if exp < 0 {
			dst, exp = append(dst, '-'), -exp
		} else {
			dst = append(dst, '+')
		}
		if exp < 10 {
			dst = append(dst, '0')
		}
		dst = strconv.AppendInt(dst, int64(exp), 10)
	case exp >= 0:
		intLen := exp + 1
		if len(d) <= intLen {
			dst = append(dst, d...)
			for range intLen - len(d) {
				dst = append(dst, '0')
			}
			dst = append(dst, ".0"...)
		} else {
			dst = append(dst, d[:intLen]...)
			dst = append(dst, '.')
			dst = append(dst, d[intLen:]...)
		}
	default:
		dst = append(dst, "0."...)
		for range -exp - 1 {
			dst = append(dst, '0')
		}
		dst = append(dst, d...)
	}
	return dst, nil
}
