package attr

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
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
		n, err := canonicalNumber(string(x))
		if err != nil {
			return err
		}
		buf.WriteString(n)
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
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "", fmt.Errorf("%v is not representable in JSON", f)
	}
	if f == 0 {
		if math.Signbit(f) {
			return "-0.0", nil
		}
		return "0.0", nil
	}
	s := strconv.FormatFloat(f, 'e', -1, 64) // [-]d[.ddd]e±XX
	mant, expText, _ := strings.Cut(s, "e")
	exp, _ := strconv.Atoi(expText)
	sign := ""
	if mant[0] == '-' {
		sign, mant = "-", mant[1:]
	}
	digits := strings.Replace(mant, ".", "", 1)
	var b strings.Builder
	b.WriteString(sign)
	switch {
	case exp >= 16 || exp < -4:
		b.WriteString(digits[:1])
		if len(digits) > 1 {
			b.WriteString(".")
			b.WriteString(digits[1:])
		}
		if exp < 0 {
			fmt.Fprintf(&b, "e-%02d", -exp)
		} else {
			fmt.Fprintf(&b, "e+%02d", exp)
		}
	case exp >= 0:
		intLen := exp + 1
		if len(digits) <= intLen {
			b.WriteString(digits)
			b.WriteString(strings.Repeat("0", intLen-len(digits)))
			b.WriteString(".0")
		} else {
			b.WriteString(digits[:intLen])
			b.WriteString(".")
			b.WriteString(digits[intLen:])
		}
	default:
		b.WriteString("0.")
		b.WriteString(strings.Repeat("0", -exp-1))
		b.WriteString(digits)
	}
	return b.String(), nil
}
