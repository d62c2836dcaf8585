package attr

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strconv"
)

// Numbers are kept as their wire text (json.Number) while a record is in
// memory, so reading one never loses a digit. What is written is another
// matter: the Python library re-encodes every number through the int or
// float that json.loads made of it, so a builtin must write the same
// spelling for mixed pipelines to produce identical bytes:
//
//	integer literal            → the int, exact at any size   (-0 → 0)
//	fraction and/or exponent   → the float in repr form      (1e2 → 100.0, 2.5E-3 → 0.0025)
//
// Two kinds of number have no such spelling. A literal beyond the float64
// range decodes to inf in Python and json.dumps(allow_nan=False) then
// refuses it; an integer of more than 4300 digits is refused by Python's
// int conversion already. The first only surfaces when a Python stage
// writes the record back, and then as an exception that stops the stage
// whatever its on_invalid_message says; flecht refuses both when it
// decodes, so they reach the stage's invalid_messages policy (crash, skip,
// dlq) like any other record it cannot write back.

// maxIntDigits is CPython's default int_max_str_digits: json.loads refuses
// a longer integer literal, and str() of a longer int fails.
const maxIntDigits = 4300

var (
	errFloatRange = errors.New("number is beyond the float64 range (Python reads it as inf, which JSON cannot spell)")
	errIntDigits  = fmt.Errorf("integer has more than %d digits (Python's int conversion limit)", maxIntDigits)
)

// canonicalNumber is the spelling Python writes for the value of the
// number literal s (valid JSON number grammar).
func canonicalNumber(s string) (string, error) {
	var buf bytes.Buffer
	err := writeNumber(&buf, s)
	return buf.String(), err
}

// writeNumber writes canonicalNumber(s) to buf.
func writeNumber(buf *bytes.Buffer, s string) error {
	if isIntegerLiteral(s) {
		if err := checkIntDigits(s); err != nil {
			return err
		}
		if s == "-0" {
			s = "0"
		}
		buf.WriteString(s)
		return nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) {
		return errFloatRange
	}
	var tmp [32]byte
	b, err := appendPyFloat(tmp[:0], f)
	buf.Write(b)
	return err
}

// checkNumber reports whether the literal s has a canonical spelling,
// without building it: only an exponent, or more integer digits than the
// largest float64 has, can overflow.
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

func checkIntDigits(s string) error {
	n := len(s)
	if n > 0 && s[0] == '-' {
		n--
	}
	if n > maxIntDigits {
		return errIntDigits
	}
	return nil
}

func hasExponent(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == 'e' || s[i] == 'E' {
			return true
		}
	}
	return false
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
			if span := b[i:j]; len(span) > 308 || bytes.ContainsAny(span, "eE") {
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
