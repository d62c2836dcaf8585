package jsonspan

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// show renders the container at raw[0]: an object's members as key=value,
// an array's elements as values.
func show(raw []byte) (string, error) {
	var parts []string
	if len(raw) > 0 && raw[0] == '[' {
		es, err := Elems(raw, 0)
		for _, e := range es {
			parts = append(parts, string(raw[e.Start:e.End]))
		}
		return strings.Join(parts, " "), err
	}
	err := EachMember(raw, 0, func(m Member) {
		parts = append(parts, m.Key+"="+string(raw[m.Start:m.End]))
	})
	return strings.Join(parts, " "), err
}

func TestSpans(t *testing.T) {
	cases := []struct{ in, want string }{
		{`{}`, ``},
		{"{ \t\r\n}", ``},
		{`{"a":1}`, `a=1`},
		{"{ \"a\" :\t1 ,\n\"b\" : \"x\" }", `a=1 b="x"`},
		{`{"a":1,"a":2}`, `a=1 a=2`}, // duplicates stay, in wire order
		{`{"n":-1.50e+3,"t":true,"f":false,"z":null}`, `n=-1.50e+3 t=true f=false z=null`},
		{`{"o":{"x":[1,{"y":"}"}]},"e":{},"l":[]}`, `o={"x":[1,{"y":"}"}]} e={} l=[]`},
		// Escapes in keys are decoded; in values they are kept as written.
		{`{"caf\u00e9":"\"}","a\\b":"\\","q\"":"]"}`, `café="\"}" a\b="\\" q"="]"`},
		{`{"😀 ü":"Zürich"}`, `😀 ü="Zürich"`},
		{`[]`, ``},
		{"[ \n ]", ``},
		{`[1]`, `1`},
		{"[ 1 ,\t\"a,b\" ,\nnull,true ]", `1 "a,b" null true`},
		{`[[],{},[1,[2]],{"x":"]"}]`, `[] {} [1,[2]] {"x":"]"}`},
		{`["\"]","\\",""]`, `"\"]" "\\" ""`},
	}
	for _, c := range cases {
		got, err := show([]byte(c.in))
		if err != nil || got != c.want {
			t.Errorf("%s:\n got %s (%v)\nwant %s", c.in, got, err, c.want)
		}
	}
}

func TestMembersAtOffset(t *testing.T) {
	raw := []byte(` {"a": {"b" : [1] , "c":2}} `)
	top, err := Members(raw, SkipSpace(raw, 0))
	if err != nil || len(top) != 1 {
		t.Fatalf("top: %v %v", top, err)
	}
	inner, err := Members(raw, top[0].Start)
	if err != nil || len(inner) != 2 || inner[1].Key != "c" || string(raw[inner[1].Start:inner[1].End]) != "2" {
		t.Fatalf("inner: %+v %v", inner, err)
	}
	es, err := Elems(raw, inner[0].Start)
	if err != nil || len(es) != 1 || string(raw[es[0].Start:es[0].End]) != "1" {
		t.Errorf("elems: %+v %v", es, err)
	}
}

func TestValueEnd(t *testing.T) {
	cases := []struct {
		in   string
		at   int
		want int
	}{
		{`"abc"`, 0, 5},
		{`"a\"b"`, 0, 6},
		{`"a\\"x`, 0, 5},
		{`123,`, 0, 3},
		{`true}`, 0, 4},
		{`null `, 0, 4},
		{`1.5e3`, 0, 5}, // a scalar may end with the text
		{`{"a":"}"} x`, 0, 9},
		{`[1,[2,[3]]]]`, 0, 11},
		{` [] `, 1, 3},
		// Malformed or truncated: -1.
		{`"abc`, 0, -1},
		{`"abc\"`, 0, -1},
		{`"abc\`, 0, -1},
		{`{"a":1`, 0, -1},
		{`[[]`, 0, -1},
		{`{"a":"}`, 0, -1},
		{`,`, 0, -1}, // no empty scalar
		{`]`, 0, -1},
		{``, 0, -1},
		{`1`, 1, -1},
		{`1`, -1, -1},
	}
	for _, c := range cases {
		if got := ValueEnd([]byte(c.in), c.at); got != c.want {
			t.Errorf("ValueEnd(%q, %d) = %d, want %d", c.in, c.at, got, c.want)
		}
	}
}

func TestStringEndAndSkipSpace(t *testing.T) {
	if got := StringEnd([]byte(`x"ab"`), 1); got != 5 {
		t.Errorf("StringEnd = %d", got)
	}
	for _, c := range []struct {
		in string
		at int
	}{{`abc`, 0}, {`"`, 0}, {`""`, 2}, {`""`, -3}, {`"\`, 0}} {
		if got := StringEnd([]byte(c.in), c.at); got != -1 {
			t.Errorf("StringEnd(%q, %d) = %d, want -1", c.in, c.at, got)
		}
	}
	for _, c := range []struct {
		in       string
		at, want int
	}{{" \t\r\nx", 0, 4}, {"x ", 0, 0}, {"  ", 0, 2}, {"x  ", 1, 3}, {"", 0, 0}, {"ab", 5, 5}, {"ab", -1, -1}, {"\v", 0, 0}} {
		if got := SkipSpace([]byte(c.in), c.at); got != c.want {
			t.Errorf("SkipSpace(%q, %d) = %d, want %d", c.in, c.at, got, c.want)
		}
	}
}

// Deep nesting is skipped in a loop: no stack to exhaust.
func TestDeepNesting(t *testing.T) {
	const n = 1_000_000
	raw := []byte(`{"a":` + strings.Repeat("[", n) + strings.Repeat("]", n) + `,"b":1}`)
	ms, err := Members(raw, 0)
	if err != nil || len(ms) != 2 || ms[0].End-ms[0].Start != 2*n || ms[1].Key != "b" {
		t.Fatalf("deep: %d members, %v", len(ms), err)
	}
}

// Broken text is an error, never a panic and never a half result.
func TestMalformed(t *testing.T) {
	objects := []string{
		``, `{`, `{"`, `{"a`, `{"a"`, `{"a":`, `{"a": `, `{"a":1`, `{"a":1,`, `{"a":1,}`,
		`{"a" 1}`, `{a:1}`, `{"a":1 "b":2}`, `{"a":}`, `{"a":,"b":1}`, `{"a":"x`, `{"a":[}`,
		`{"a\u":1}`, `[]`, ` {}`, `{"a":1]`,
	}
	for _, in := range objects {
		ms, err := Members([]byte(in), 0)
		if !errors.Is(err, ErrMalformedObject) || ms != nil {
			t.Errorf("Members(%q) = %v, %v; want ErrMalformedObject", in, ms, err)
		}
	}
	arrays := []string{``, `[`, `[1`, `[1,`, `[1,]`, `[,1]`, `[1 2]`, `["a]`, `[{]`, `{}`, ` []`, `[1}`}
	for _, in := range arrays {
		es, err := Elems([]byte(in), 0)
		if !errors.Is(err, ErrMalformedArray) || es != nil {
			t.Errorf("Elems(%q) = %v, %v; want ErrMalformedArray", in, es, err)
		}
	}
	for _, at := range []int{-1, 2, 100} {
		if _, err := Members([]byte(`{}`), at); err == nil {
			t.Errorf("Members at %d accepted", at)
		}
		if _, err := Elems([]byte(`[]`), at); err == nil {
			t.Errorf("Elems at %d accepted", at)
		}
	}
}

// Every prefix of a valid document either scans or is an error.
func TestTruncated(t *testing.T) {
	full := `{"a" : [1, "x\"y", {"b\u00e9": null}] , "c":{"d":[[]]}}`
	for i := range len(full) {
		in := []byte(full[:i])
		if _, err := Members(in, 0); err == nil {
			t.Errorf("truncated %q accepted", in)
		}
		if end := ValueEnd(in, 0); end >= 0 && end > len(in) {
			t.Errorf("ValueEnd past the input: %d", end)
		}
	}
	if _, err := Members([]byte(full), 0); err != nil {
		t.Fatal(err)
	}
}

// Keys without escapes cost only their strings, and EachMember builds no
// slice: three members, three allocations.
func TestMembersAllocs(t *testing.T) {
	raw := []byte(`{"alpha":1,"beta":[2],"gamma":{"d":3}}`)
	n := 0
	allocs := testing.AllocsPerRun(100, func() {
		if err := EachMember(raw, 0, func(Member) { n++ }); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 3 {
		t.Errorf("%v allocations for three members", allocs)
	}
}

func Example() {
	raw := []byte(`{"user": "u",  "api_key": "OLD" }`)
	ms, _ := Members(raw, 0)
	for _, m := range ms {
		if m.Key == "api_key" {
			out := append(append(append([]byte{}, raw[:m.Start]...), `"NEW"`...), raw[m.End:]...)
			fmt.Println(string(out))
		}
	}
	// Output: {"user": "u",  "api_key": "NEW" }
}
