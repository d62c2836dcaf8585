package attr

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/big"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/flecht-dev/flecht/internal/jsonspan"
	"github.com/flecht-dev/flecht/sdk/wire"
)

// FuzzDecodeObject: any bytes either decode to a record that re-encodes and
// re-decodes to the same canonical bytes, or fail with a *DecodeError. Never
// a panic, never a half-decoded record.
func FuzzDecodeObject(f *testing.F) {
	for _, s := range []string{
		``, `{}`, `{"a":1}`, `{"big":12345678901234567890,"p":1.50}`, `[1]`, `null`,
		`{"a":"\ud83d\ude00"}`, `{"a":"\ud800"}`, "{\"a\":\"\xff\"}", `{"a":{"b":[true,false,null]}}`,
		`{"a":1} x`, ` { "k" : "v" } `, `{"a":"\u0000"}`, `{"a":1e999}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		// CheckObject is Members' verdict without the members, and its
		// one-pass check says what wire.CheckSyntax says.
		if _, merr := Members(in); (CheckObject(in) == nil) != (merr == nil) {
			t.Fatalf("CheckObject = %v, Members = %v", CheckObject(in), merr)
		}
		if len(in) > 0 {
			at := jsonspan.SkipSpace(in, 0)
			want := wire.CheckSyntax(in) == nil && at < len(in) && in[at] == '{'
			if got := CheckObject(in) == nil; got != want {
				t.Fatalf("CheckObject(%q) accepts: %v; CheckSyntax and a '{' say %v", in, got, want)
			}
		}
		ev, tomb, err := Decode[Event](in)
		if err != nil {
			if _, ok := err.(*DecodeError); !ok {
				t.Fatalf("error of type %T: %v", err, err)
			}
			return
		}
		if tomb {
			t.Fatal("non-nil input decoded as tombstone")
		}
		if !utf8.Valid(in) {
			t.Fatal("accepted invalid UTF-8")
		}
		b, err := ev.Bytes()
		if err != nil {
			t.Fatalf("decoded record does not encode: %v", err)
		}
		again, _, err := Decode[Event](b)
		if err != nil {
			t.Fatalf("canonical bytes do not decode: %v\n%q", err, b)
		}
		b2, _ := again.Bytes()
		if !bytes.Equal(b, b2) {
			t.Fatalf("canonical form not stable:\n%q\n%q", b, b2)
		}
		// The byte scanner must see the members the decoder saw.
		ms, err := Members(in)
		if err != nil {
			t.Fatalf("Members on a valid object: %v", err)
		}
		seen := map[string]int{}
		for _, m := range ms {
			seen[m.Key]++
		}
		if len(seen) != ev.Len() {
			t.Fatalf("scanner found %d distinct keys, decoder %d", len(seen), ev.Len())
		}
		for _, m := range ms {
			if seen[m.Key] > 1 {
				continue
			}
			v, err := LookupField(in, []string{m.Key})
			if err != nil || !bytes.Equal(v, m.Value) {
				t.Fatalf("LookupField(%q) = %q, %v; Members says %q", m.Key, v, err, m.Value)
			}
			want, _ := ev.RawValue(m.Key)
			wb, _ := Marshal(want)
			got, err := decodeJSONValue(m.Value)
			if err != nil {
				t.Fatalf("member value %q does not decode: %v", m.Value, err)
			}
			gb, _ := Marshal(got)
			if !bytes.Equal(wb, gb) {
				t.Fatalf("member %q: scanner value %s, decoder value %s", m.Key, gb, wb)
			}
		}
	})
}

// FuzzReplaceField: replacing a field in a valid object keeps every byte
// outside the value, and the result still decodes.
func FuzzReplaceField(f *testing.F) {
	f.Add([]byte(messy), "auth", "api_key", []byte(`"x"`))
	f.Add([]byte(`{"a":{"b":1}}`), "a", "b", []byte(`[1, {"c": "}"}]`))
	f.Add([]byte(`{"a":1}`), "a", "", []byte(`2`))
	f.Fuzz(func(t *testing.T, raw []byte, k1, k2 string, val []byte) {
		path := []string{k1}
		if k2 != "" {
			path = append(path, k2)
		}
		old, errLookup := LookupField(raw, path)
		out, err := ReplaceField(raw, path, val)
		if err != nil {
			return
		}
		if errLookup != nil {
			t.Fatalf("ReplaceField succeeded where LookupField failed: %v", errLookup)
		}
		i := bytes.Index(raw, old)
		if i < 0 {
			t.Fatal("looked-up value is not a slice of raw")
		}
		if _, _, err := DecodeObject(out); err != nil {
			t.Fatalf("result does not decode: %v\n%q", err, out)
		}
		got, err := LookupField(out, path)
		if err != nil || !bytes.Equal(got, bytes.Trim(val, " \t\r\n")) {
			t.Fatalf("replaced value reads back as %q, %v", got, err)
		}
		if len(out) != len(raw)-len(old)+len(bytes.Trim(val, " \t\r\n")) {
			t.Fatal("bytes outside the value changed length")
		}
	})
}

// FuzzCanonicalJSON holds Marshal to the properties of Python's json.dumps
// (sort_keys, compact separators, ensure_ascii=False) for any record that
// decodes: the output is valid compact JSON with keys in code point order
// at every level and only the escapes Python writes; it means the same
// value as the input (strings exact, integers exact, other numbers as the
// float64 Python reads); and writing it again changes nothing. The seeds
// are the upstream vectors (testdata/canonical).
func FuzzCanonicalJSON(f *testing.F) {
	raw, err := os.ReadFile("testdata/canonical/vectors.json")
	if err != nil {
		f.Fatal(err)
	}
	var vs struct {
		Vectors []struct {
			Input *string `json:"input"`
		} `json:"vectors"`
	}
	if err := json.Unmarshal(raw, &vs); err != nil {
		f.Fatal(err)
	}
	for _, v := range vs.Vectors {
		if v.Input != nil && len(*v.Input) < 2000 {
			f.Add([]byte(*v.Input))
		}
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		ev, _, err := Decode[Event](in)
		if err != nil {
			return
		}
		out, err := ev.Bytes()
		if err != nil {
			t.Fatalf("a decoded record does not write: %v", err)
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, out); err != nil || !bytes.Equal(compact.Bytes(), out) {
			t.Fatalf("not compact JSON (%v): %q", err, out)
		}
		checkKeyOrder(t, out)
		checkEscapes(t, out)
		a, errA := decodeJSONValue(in)
		if len(in) == 0 {
			a, errA = map[string]any{}, nil
		}
		b, errB := decodeJSONValue(out)
		if errA != nil || errB != nil {
			t.Fatalf("decode: %v / %v", errA, errB)
		}
		if why := sameValue(a, b); why != "" {
			t.Fatalf("%s\n in %q\nout %q", why, in, out)
		}
		again, _, err := Decode[Event](out)
		if err != nil {
			t.Fatal(err)
		}
		if out2, _ := again.Bytes(); !bytes.Equal(out, out2) {
			t.Fatalf("writing twice changed it:\n%q\n%q", out, out2)
		}
	})
}

// FuzzCanonicalNumber: a number literal is written as the int or the float
// it stands for, in a form that reads back as the same value and kind and
// is its own canonical form.
func FuzzCanonicalNumber(f *testing.F) {
	for _, s := range []string{"0", "-0", "-0.0", "1e2", "2.5E-3", "1.50", "1e16", "1e-5", "5e-324",
		"12345678901234567890", "1E400", "0.1e-400", "123.456e+7", "9007199254740993.0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !validNumber(s) {
			return
		}
		out, err := canonicalNumber(s)
		if err != nil {
			if checkNumber(s) == nil {
				t.Fatalf("%q: canonicalNumber refuses (%v), checkNumber accepts", s, err)
			}
			return
		}
		if checkNumber(s) != nil {
			t.Fatalf("%q: checkNumber refuses what canonicalNumber writes", s)
		}
		if !validNumber(out) {
			t.Fatalf("%q → %q: not a JSON number", s, out)
		}
		if again, err := canonicalNumber(out); err != nil || again != out {
			t.Fatalf("%q → %q → %q (%v): not idempotent", s, out, again, err)
		}
		if isIntegerLiteral(s) != isIntegerLiteral(out) {
			t.Fatalf("%q → %q: an int became a float or back", s, out)
		}
		if isIntegerLiteral(s) {
			x, _ := new(big.Int).SetString(s, 10)
			y, _ := new(big.Int).SetString(out, 10)
			if x.Cmp(y) != 0 || out != x.String() {
				t.Fatalf("%q → %q: not the integer's decimal form %s", s, out, x)
			}
			return
		}
		x, _ := strconv.ParseFloat(s, 64)
		y, _ := strconv.ParseFloat(out, 64)
		if math.Float64bits(x) != math.Float64bits(y) {
			t.Fatalf("%q → %q: another float (%v, %v)", s, out, x, y)
		}
		if !reprShape.MatchString(out) {
			t.Fatalf("%q → %q: not in repr form", s, out)
		}
		// repr switches to an exponent outside 1e-4 <= |x| < 1e16.
		if abs := math.Abs(x); strings.Contains(out, "e") != (abs != 0 && (abs < 1e-4 || abs >= 1e16)) {
			t.Fatalf("%q → %q: exponent form where repr would not (or the reverse)", s, out)
		}
		// Shortest round trip, as repr: the same significant digits as Go's
		// shortest formatting.
		if got, want := sigDigits(out), sigDigits(strconv.FormatFloat(x, 'e', -1, 64)); got != want {
			t.Fatalf("%q → %q: digits %s, shortest round trip %s", s, out, got, want)
		}
	})
}

// checkKeyOrder walks out's tokens: every object's keys strictly ascend in
// code point (UTF-8 byte) order.
func checkKeyOrder(t *testing.T, out []byte) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.UseNumber()
	type frame struct {
		object  bool
		lastKey *string
		wantKey bool
	}
	var stack []frame
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatalf("tokens: %v", err)
		}
		top := len(stack) - 1
		if top >= 0 && stack[top].object && stack[top].wantKey {
			if d, ok := tok.(json.Delim); ok && d == '}' {
				stack = stack[:top]
				continue
			}
			k := tok.(string)
			if last := stack[top].lastKey; last != nil && *last >= k {
				t.Fatalf("key %q after %q: not in code point order", k, *last)
			}
			stack[top].lastKey, stack[top].wantKey = &k, false
			continue
		}
		if top >= 0 && stack[top].object {
			stack[top].wantKey = true // this token is the member's value
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, frame{object: true, wantKey: true})
		case json.Delim('['):
			stack = append(stack, frame{})
		case json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
	}
}

// checkEscapes: Python's ensure_ascii=False escapes only ", \ and the
// control characters (as \b \f \n \r \t, else \u00XX in lowercase hex).
func checkEscapes(t *testing.T, out []byte) {
	t.Helper()
	for i := 0; i < len(out); i++ {
		c := out[i]
		if c < 0x20 {
			t.Fatalf("raw control byte %#x at %d", c, i)
		}
		if c != '\\' {
			continue
		}
		i++
		switch out[i] {
		case '"', '\\', 'b', 'f', 'n', 'r', 't':
		case 'u':
			code, err := strconv.ParseUint(string(out[i+1:i+5]), 16, 16)
			if err != nil || code >= 0x20 || strings.ContainsAny(string(out[i+1:i+5]), "ABCDEF") ||
				code == '\b' || code == '\f' || code == '\n' || code == '\r' || code == '\t' {
				t.Fatalf("escape \\u%s at %d: Python writes that character otherwise", out[i+1:i+5], i)
			}
			i += 4
		default:
			t.Fatalf("escape \\%c at %d: Python never writes it", out[i], i)
		}
	}
}

// sameValue compares two decoded JSON values as Python would see them:
// integers exactly, other numbers as float64 (sign of zero included).
func sameValue(a, b any) string {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return "object differs in kind or size"
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok {
				return fmt.Sprintf("key %q lost", k)
			}
			if why := sameValue(v, w); why != "" {
				return k + ": " + why
			}
		}
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return "array differs in kind or length"
		}
		for i := range x {
			if why := sameValue(x[i], y[i]); why != "" {
				return fmt.Sprintf("[%d]: %s", i, why)
			}
		}
	case json.Number:
		y, ok := b.(json.Number)
		if !ok || isIntegerLiteral(string(x)) != isIntegerLiteral(string(y)) {
			return "number differs in kind"
		}
		if isIntegerLiteral(string(x)) {
			p, _ := new(big.Int).SetString(string(x), 10)
			q, _ := new(big.Int).SetString(string(y), 10)
			if p.Cmp(q) != 0 {
				return fmt.Sprintf("integer %s became %s", x, y)
			}
			return ""
		}
		p, _ := strconv.ParseFloat(string(x), 64)
		q, _ := strconv.ParseFloat(string(y), 64)
		if math.Float64bits(p) != math.Float64bits(q) {
			return fmt.Sprintf("float %s became %s", x, y)
		}
	default:
		if a != b {
			return fmt.Sprintf("%#v became %#v", a, b)
		}
	}
	return ""
}

// reprShape is what Python's float repr looks like: digits with a point
// and at least one decimal, or one digit, optional decimals, and a signed
// exponent of at least two digits.
var reprShape = regexp.MustCompile(`^-?(?:(?:0|[1-9][0-9]*)\.[0-9]+|[1-9](?:\.[0-9]*[1-9])?e[+-](?:0[1-9]|[1-9][0-9]+))$`)

// sigDigits is a number's significant digits: no sign, point, exponent, or
// leading and trailing zeros.
func sigDigits(num string) string {
	mant, _, _ := strings.Cut(strings.TrimPrefix(num, "-"), "e")
	return strings.Trim(strings.Replace(mant, ".", "", 1), "0")
}
