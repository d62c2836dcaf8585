package wire

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strconv"
)

// Numbers are kept as their wire text (json.Number) while a value is in
// memory, so reading one never loses a digit. What is written is another
// matter: the Python library re-encodes every number through the int or
// float that json.loads made of it, so the same spelling must be written for
// mixed pipelines to produce identical bytes:
//
//	integer literal            → the int, exact at any size   (-0 → 0)
//	fraction and/or exponent   → the float in repr form      (1e2 → 100.0, 2.5E-3 → 0.0025)
//
// Two kinds of number have no such spelling. A literal beyond the float64
// range decodes to inf in Python, and json.dumps(allow_nan=False) then
// refuses it; an integer of more than 4300 digits is refused by Python's
// int conversion already. Decode refuses both, so a record that could not
// be written back is refused when it is read, not when it is written.

// maxIntDigits is CPython's default int_max_str_digits: json.loads refuses
// a longer integer literal, and str() of a longer int fails.
const maxIntDigits = 4300

var (
	errFloatRange = errors.New("number is beyond the float64 range (Python reads it as inf, which JSON cannot spell)")
	errIntDigits  = fmt.Errorf("integer has more than %d digits (Python's int conversion limit)", maxIntDigits)
)

func notNumber(s string) error {
	return fmt.Errorf("%q is not a JSON number", s)
}

// ValidNumber reports whether s matches the JSON number grammar (RFC 8259
// §6): an optional minus, an integer part without leading zeros, an
// optional fraction and an optional exponent.
func ValidNumber(s string) bool {
	end, ok := numberEnd(s, 0)
	return ok && end == len(s)
}

// numberEnd is the offset after the JSON number that starts at b[i], or
// false when none does. It is ValidNumber for a number inside a larger text.
func numberEnd[T string | []byte](b T, i int) (int, bool) {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i = skipDigits(b, i)
	default:
		return 0, false
	}
	if i < len(b) && b[i] == '.' {
		j := skipDigits(b, i+1)
		if j == i+1 {
			return 0, false
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := skipDigits(b, i)
		if j == i {
			return 0, false
		}
		i = j
	}
	return i, true
}

func skipDigits[T string | []byte](b T, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}

// IsIntegerLiteral reports whether the number literal s has neither a
// fraction nor an exponent: Python reads it as an int, anything else as a
// float. s is taken to be a valid number (ValidNumber); only the fraction
// and the exponent are looked for.
func IsIntegerLiteral(s string) bool {
	return isIntegerLiteral(s)
}

func isIntegerLiteral[T string | []byte](s T) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '.' || c == 'e' || c == 'E' {
			return false
		}
	}
	return true
}

// CanonicalNumber is the spelling Marshal writes for the number literal s:
// what Python writes for the int or float json.loads makes of it. It is an
// error when s is not a JSON number or has no canonical spelling (beyond the
// float64 range, or an integer of more than 4300 digits).
func CanonicalNumber(s string) (string, error) {
	if !ValidNumber(s) {
		return "", notNumber(s)
	}
	var buf [32]byte
	b, err := appendNumber(buf[:0], s)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// CheckNumber reports, as an error, why the number literal s has no
// canonical spelling (see CanonicalNumber); nil when it has one. It does
// not build the spelling: only an exponent, or more integer digits than the
// largest float64 has, can overflow.
func CheckNumber(s string) error {
	if !ValidNumber(s) {
		return notNumber(s)
	}
	return checkNumber(s)
}

// checkNumber is CheckNumber for a literal known to be a JSON number.
func checkNumber(s string) error {
	if isIntegerLiteral(s) {
		return checkIntDigits(s)
	}
	if len(s) <= 308 && !hasExponent(s) {
		return nil
	}
	if f, err := strconv.ParseFloat(s, 64); err != nil || math.IsInf(f, 0) {
		return errFloatRange
	}
	return nil
}

// appendNumber appends CanonicalNumber(s) to dst; s must be a JSON number.
func appendNumber(dst []byte, s string) ([]byte, error) {
	if isIntegerLiteral(s) {
		if err := checkIntDigits(s); err != nil {
			return dst, err
		}
		if s == "-0" {
			s = "0"
		}
		return append(dst, s...), nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) {
		return dst, errFloatRange
	}
	return AppendFloat(dst, f)
}

func checkIntDigits[T string | []byte](s T) error {
	n := len(s)
	if n > 0 && s[0] == '-' {
		n--
	}
	if n > maxIntDigits {
		return errIntDigits
	}
	return nil
}

func hasExponent[T string | []byte](s T) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == 'e' || s[i] == 'E' {
			return true
		}
	}
	return false
}

// AppendFloat appends f as Python's repr(float) writes it, which is what the
// Python library writes for a float: the shortest digits that read back as
// f, always with a decimal point or an exponent (1.0, not 1), in scientific
// form outside 1e-4 <= |f| < 1e16 (1e+16, 1.5e-05). A Python reader's float
// codec refuses an integer literal, so 1 would not do. NaN and ±Inf have no
// JSON spelling and are an error; dst is then returned unchanged.
func AppendFloat(dst []byte, f float64) ([]byte, error) {
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
	exp := 0
	neg := e[at+1] == '-'
	for _, c := range e[at+2:] {
		exp = exp*10 + int(c-'0')
	}
	if neg {
		exp = -exp
	}
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

// numberProblem finds the first number in b (valid JSON) that has no
// canonical spelling, and returns its offset and why, or -1.
func numberProblem(b []byte) (int, error) {
	for i := 0; i < len(b); {
		switch c := b[i]; {
		case c == '"':
			i++
			for i < len(b) && b[i] != '"' {
				if b[i] == '\\' {
					i++ // the escaped byte can be a quote
				}
				i++
			}
			i++ // the closing quote
		case c == '-' || (c >= '0' && c <= '9'):
			j := i + 1
			for j < len(b) && isNumberByte(b[j]) {
				j++
			}
			// Short literals without an exponent are always fine; only the
			// rest is worth a string and a parse.
			if span := b[i:j]; len(span) > 308 || hasExponent(span) {
				if err := checkNumber(string(span)); err != nil {
					return i, err
				}
			}
			i = j
		default:
			i++
		}
	}
	return -1, nil
}

func isNumberByte(c byte) bool {
	return (c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-'
}
