package wire

import (
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
)

func TestDecodeValues(t *testing.T) {
	for in, want := range map[string]any{
		`null`:                      nil,
		` true `:                    true,
		`"plain"`:                   "plain",
		`"esc\u00e9\n\ud83d\ude00"`: "escé\n😀",
		`"\\ud800"`:                 `\ud800`, // an escaped backslash, not an escape
		`-0.0`:                      json.Number("-0.0"),
		`12345678901234567890`:      json.Number("12345678901234567890"),
		"[1.50,{}]\n":               []any{json.Number("1.50"), map[string]any{}},
		`{"a":{"b":[false]}}`:       map[string]any{"a": map[string]any{"b": []any{false}}},
		`{"a":1,"a":2}`:             map[string]any{"a": json.Number("2")},
	} {
		got, err := Decode([]byte(in))
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("Decode(%s) = %#v, %v; want %#v", in, got, err, want)
		}
	}
}

// What Decode refuses, and the reason it gives, which never quotes the
// input.
var refusals = []struct{ in, reason string }{
	{"\"caf\xe9\"", "not valid UTF-8 (first bad byte at offset 4)"},
	{"{\"a\":\"\xff\"}", "not valid UTF-8 (first bad byte at offset 6)"},
	{"\xef\xbb\xbf{}", "not JSON"},
	{"", "not JSON"},
	{"  ", "not JSON"},
	{"{not json", "not JSON"},
	{"{'a':1}", "not JSON"},
	{"[NaN]", "not JSON"},
	{`{"a":`, "not JSON"},
	{"\"\x01\"", "not JSON"},
	{strings.Repeat("[", 10001) + strings.Repeat("]", 10001), "not JSON"},
	{`{} {}`, "trailing data after the JSON value at offset 4"},
	{`1 x`, "trailing data"},
	{`{"a":"\\"}x`, "trailing data"},
	{`"\ud800"`, "lone UTF-16 surrogate escape at offset 1"},
	{`{"a":"\udc00x"}`, "lone UTF-16 surrogate escape at offset 6"},
	{`["\ud800\u0041"]`, "lone UTF-16 surrogate escape"},
	{`{"\udfff":1}`, "lone UTF-16 surrogate escape"},
	{`[1,1E400]`, "number at offset 3 cannot be written back"},
	{`{"a":-1e309}`, "number at offset 5 cannot be written back"},
	{`[` + strings.Repeat("9", 4301) + `]`, "number at offset 1 cannot be written back"},
}

func TestDecodeRefuses(t *testing.T) {
	for _, c := range refusals {
		_, err := Decode([]byte(c.in))
		var de *DecodeError
		if !errors.As(err, &de) {
			t.Errorf("Decode(%.30q) = %v, want a *DecodeError", c.in, err)
			continue
		}
		if !strings.HasPrefix(de.Reason, c.reason) {
			t.Errorf("Decode(%.30q): reason %q, want %q", c.in, de.Reason, c.reason)
		}
		// The parser's error, or why the number has no canonical spelling.
		withErr := strings.HasPrefix(c.reason, "not JSON") || strings.HasPrefix(c.reason, "number")
		if withErr != (de.Err != nil) {
			t.Errorf("Decode(%.30q): Err %v", c.in, de.Err)
		}
	}
}

func TestDecodeErrorText(t *testing.T) {
	e := &DecodeError{Reason: "not JSON", Err: io.ErrUnexpectedEOF}
	if e.Error() != "not JSON: unexpected EOF" || !errors.Is(e, io.ErrUnexpectedEOF) {
		t.Errorf("%q, unwraps to %v", e.Error(), e.Unwrap())
	}
	if e := (&DecodeError{Reason: "trailing data"}); e.Error() != "trailing data" || e.Unwrap() != nil {
		t.Errorf("%q", e.Error())
	}
}

func TestDecodeObject(t *testing.T) {
	obj, err := DecodeObject([]byte(` {"k":"v","n":{"m":null}} `))
	if err != nil || !reflect.DeepEqual(obj, Object{"k": "v", "n": map[string]any{"m": nil}}) {
		t.Errorf("DecodeObject = %#v, %v", obj, err)
	}
	for in, kind := range map[string]string{
		`[1]`: "array", `"x"`: "string", `4`: "number", `null`: "null", `false`: "boolean",
	} {
		_, err := DecodeObject([]byte(in))
		var de *DecodeError
		if !errors.As(err, &de) || de.Reason != "JSON "+kind+", expected an object" {
			t.Errorf("DecodeObject(%s): %v", in, err)
		}
	}
	if _, err := DecodeObject([]byte(`{"a":1e999}`)); err == nil || !strings.Contains(err.Error(), "cannot be written back") {
		t.Errorf("DecodeObject of an unwritable number: %v", err)
	}
}

// CheckSyntax refuses what Decode refuses, with the same error, except the
// numbers that could not be written back.
func TestCheckSyntax(t *testing.T) {
	for _, c := range refusals {
		_, want := Decode([]byte(c.in))
		got := CheckSyntax([]byte(c.in))
		if strings.HasPrefix(c.reason, "number") {
			if got != nil {
				t.Errorf("CheckSyntax(%.30q): %v; numbers are not its business", c.in, got)
			}
			continue
		}
		if got == nil || got.Error() != want.Error() {
			t.Errorf("CheckSyntax(%.30q) = %v, Decode says %v", c.in, got, want)
		}
	}
	for _, ok := range []string{`{}`, ` [1, "\ud83d\ude00"] `, `"x"`, `1E400`} {
		if err := CheckSyntax([]byte(ok)); err != nil {
			t.Errorf("CheckSyntax(%s): %v", ok, err)
		}
	}
}

func TestFirstInvalidUTF8(t *testing.T) {
	for in, want := range map[string]int{
		"": -1, "ok é 😀": -1, "\xff": 0, "ab\xc3": 2, "é\xe2\x82x": 2, "\xed\xa0\x80": 0,
	} {
		if got := FirstInvalidUTF8([]byte(in)); got != want {
			t.Errorf("FirstInvalidUTF8(%q) = %d, want %d", in, got, want)
		}
	}
}

func TestKind(t *testing.T) {
	for want, v := range map[string]any{
		"null": nil, "boolean": false, "string": "", "number": json.Number("1"), "array": []any{},
		"object": map[string]any{}, "int": 1, "[]string": []string{},
	} {
		if got := Kind(v); got != want {
			t.Errorf("Kind(%#v) = %q, want %q", v, got, want)
		}
	}
	if got := Kind(Object{}); got != "object" {
		t.Errorf("Kind(Object{}) = %q", got)
	}
}
