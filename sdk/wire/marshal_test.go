package wire

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
)

func mustMarshal(t *testing.T, v any) string {
	t.Helper()
	b, err := Marshal(v)
	if err != nil {
		t.Fatalf("Marshal(%#v): %v", v, err)
	}
	return string(b)
}

// Python's json.dumps(sort_keys=True, separators=(",", ":"),
// ensure_ascii=False): keys in code point order, no whitespace, and only
// the quote, the backslash and control characters escaped.
func TestMarshalWritesWhatPythonWrites(t *testing.T) {
	v := map[string]any{
		"b": json.Number("1"),
		"a": "é<>&\u2028\x01\x7f\"\\ \n\r\t\b\f\x1f",
		"c": []any{true, false, nil, map[string]any{}, []any{}},
		"é": "non-ASCII keys sort after ASCII ones",
		"B": "upper case before lower case",
		"😀": "astral after the BMP",
		"":  "the empty key first",
	}
	want := `{"":"the empty key first","B":"upper case before lower case",` +
		`"a":"é<>&` + "\u2028" + `\u0001` + "\x7f" + `\"\\ \n\r\t\b\f\u001f",` +
		`"b":1,"c":[true,false,null,{},[]],"é":"non-ASCII keys sort after ASCII ones","😀":"astral after the BMP"}`
	if got := mustMarshal(t, v); got != want {
		t.Errorf("Marshal:\n got %s\nwant %s", got, want)
	}
}

// A json.Number is written as Python writes the int or float json.loads
// makes of it.
func TestMarshalNumbers(t *testing.T) {
	for in, want := range map[string]string{
		"12345678901234567890": "12345678901234567890",
		"1.50":                 "1.5",
		"2.5E-3":               "0.0025",
		"-0":                   "0",
		"-0.0":                 "-0.0",
		"1e16":                 "1e+16",
		"1e2":                  "100.0",
		"1E+2":                 "100.0",
		"0.00001":              "1e-05",
		"123.456e+7":           "1234560000.0",
	} {
		if got := mustMarshal(t, json.Number(in)); got != want {
			t.Errorf("json.Number(%s) written %s, want %s", in, got, want)
		}
	}
}

// The Go conveniences: integers exactly, floats always as floats.
func TestMarshalGoValues(t *testing.T) {
	for _, c := range []struct {
		v    any
		want string
	}{
		{true, `true`},
		{"x", `"x"`},
		{int(-1), `-1`},
		{int8(math.MinInt8), `-128`},
		{int16(math.MaxInt16), `32767`},
		{int32(math.MinInt32), `-2147483648`},
		{int64(math.MinInt64), `-9223372036854775808`},
		{uint(7), `7`},
		{uint8(255), `255`},
		{uint16(65535), `65535`},
		{uint32(math.MaxUint32), `4294967295`},
		{uint64(math.MaxUint64), `18446744073709551615`},
		{float64(1), `1.0`},
		{float32(0.1), `0.10000000149011612`},
		{math.Copysign(0, -1), `-0.0`},
		{[]string{"b", "a"}, `["b","a"]`},
		{[]string(nil), `[]`},
		{[]any(nil), `[]`},
		{map[string]any(nil), `{}`},
		{Object(nil), `{}`},
		{map[string]string{"z": "1", "a": "2"}, `{"a":"2","z":"1"}`},
		{Object{"n": Object{"m": map[string]string{"k": "v"}}, "l": []any{1, 2.5, []string{"s"}}}, `{"l":[1,2.5,["s"]],"n":{"m":{"k":"v"}}}`},
		{json.RawMessage(` {"b": 1.50, "a": [1e2]} `), `{"a":[100.0],"b":1.5}`},
		{[]any{json.RawMessage(`"\u00e9"`)}, `["é"]`},
	} {
		if got := mustMarshal(t, c.v); got != c.want {
			t.Errorf("Marshal(%#v) = %s, want %s", c.v, got, c.want)
		}
	}
}

func TestMarshalRefuses(t *testing.T) {
	type named string
	cyclic := []any{nil}
	cyclic[0] = cyclic
	for name, v := range map[string]any{
		"not a number":       json.Number("0x10"),
		"empty number":       json.Number(""),
		"number beyond f64":  json.Number("1e400"),
		"4301 digits":        json.Number(strings.Repeat("9", 4301)),
		"bytes":              []byte("x"),
		"NaN":                math.NaN(),
		"+Inf":               float32(math.Inf(1)),
		"struct":             struct{}{},
		"pointer":            new(int),
		"named string":       named("x"),
		"int keys":           map[int]string{1: "a"},
		"[]int":              []int{1},
		"bad UTF-8":          "\xff",
		"bad UTF-8 key":      map[string]any{"\xff": 1},
		"bad UTF-8 in list":  []string{"ok", "a\xc3"},
		"nested bad value":   map[string]any{"a": []any{1, func() {}}},
		"invalid raw":        json.RawMessage(`{"a":1,}`),
		"empty raw":          json.RawMessage(nil),
		"raw lone surrogate": json.RawMessage(`"\ud800"`),
		"cycle":              cyclic,
	} {
		if b, err := Marshal(v); err == nil {
			t.Errorf("%s: Marshal wrote %s", name, b)
		}
	}
	var de *DecodeError
	if _, err := Marshal(json.RawMessage(`[1] 2`)); !errors.As(err, &de) {
		t.Errorf("a RawMessage that does not decode: %v, want a *DecodeError", err)
	}
}

// The error says where in the value the problem is.
func TestMarshalErrorNamesThePath(t *testing.T) {
	_, err := Marshal(map[string]any{"a": []any{json.Number("1"), map[string]any{"b": math.Inf(-1)}}})
	if err == nil || !strings.HasPrefix(err.Error(), `"a": [1]: "b": `) {
		t.Errorf("error %v does not lead with the path", err)
	}
}

// 10000 levels are written, 10001 are not: the same bound the decoder has.
func TestMarshalDepth(t *testing.T) {
	nest := func(n int, leaf any) any {
		v := leaf
		for range n {
			v = []any{v}
		}
		return v
	}
	if _, err := Marshal(nest(10000, nil)); err != nil {
		t.Errorf("10000 levels: %v", err)
	}
	if _, err := Marshal(nest(10001, nil)); err == nil {
		t.Error("10001 levels written")
	}
	if _, err := Marshal(nest(10000, []string{"x"})); err == nil {
		t.Error("a string 10001 levels down written from a []string")
	}
	if _, err := Marshal(nest(10000, []string{})); err != nil {
		t.Errorf("an empty []string at the limit: %v", err)
	}
	// A RawMessage's content counts afresh: it is bounded by the decoder.
	deep := json.RawMessage(strings.Repeat("[", 9999) + strings.Repeat("]", 9999))
	if _, err := Marshal(nest(100, deep)); err != nil {
		t.Errorf("a deep RawMessage inside a value: %v", err)
	}
}

func TestAppendMarshal(t *testing.T) {
	dst := []byte("prefix:")
	out, err := AppendMarshal(dst, map[string]any{"k": []string{"v"}})
	if err != nil || string(out) != `prefix:{"k":["v"]}` {
		t.Errorf("AppendMarshal = %s, %v", out, err)
	}
	dst = make([]byte, 3, 64)
	out, err = AppendMarshal(dst, []any{"ok", math.NaN()})
	if err == nil || len(out) != 3 {
		t.Errorf("on an error AppendMarshal returned %q, %v; want dst as it was", out, err)
	}
}

func TestAppendString(t *testing.T) {
	for in, want := range map[string]string{
		"":                `""`,
		"plain":           `"plain"`,
		"\"\\/":           `"\"\\/"`,
		"\x00\x1f\x7f":    `"\u0000\u001f` + "\x7f" + `"`,
		"\b\f\n\r\t":      `"\b\f\n\r\t"`,
		"é\u2028😀<>&":     `"é` + "\u2028" + `😀<>&"`,
		"a\xffb":          `"a\ufffdb"`,
		"\xe2\x82":        `"\ufffd\ufffd"`,
		"\ufffd":          "\"\ufffd\"",
		"\xed\xa0\x80 hi": `"\ufffd\ufffd\ufffd hi"`, // an encoded surrogate is not UTF-8
	} {
		if got := string(AppendString([]byte("x"), in)); got != "x"+want {
			t.Errorf("AppendString(%q) = %s, want x%s", in, got, want)
		}
	}
}
