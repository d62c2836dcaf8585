package jsonspan

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// FuzzSpans: on any bytes nothing panics and no span leaves the input. On
// an object or array that json.Valid accepts, every container in it (nested
// ones too) scans, each span holds one valid JSON value, spans come in
// order without overlap, and an object's keys are the ones encoding/json
// reads.
func FuzzSpans(f *testing.F) {
	for _, s := range []string{
		`{}`, `[]`, `{"a":1}`, `[1,"x",null]`, " { \"a\" :\t[ 1 , {\"b\":\"}\"} ] ,\n\"c\":{} } ",
		`{"caf\u00e9":"\"]","a\\b":[[[]]]}`, `{"a":1,"a":2}`, `[{"x":-1.5e3},true,false]`,
		`{"a":"\ud800"}`, "{\"\xff\":1}", `{"a":1`, `[1,]`, `{"a" 1}`, `"x"`, `12`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		// Nothing panics, from any offset; what is found stays inside.
		for at := -1; at <= len(in) && at < 64; at++ {
			if end := ValueEnd(in, at); end > len(in) || (end >= 0 && end <= at) {
				t.Fatalf("ValueEnd(%d) = %d of %d", at, end, len(in))
			}
			if end := StringEnd(in, at); end > len(in) || (end >= 0 && end < at+2) {
				t.Fatalf("StringEnd(%d) = %d of %d", at, end, len(in))
			} else if want := stringEndByteByByte(in, at); end != want {
				t.Fatalf("StringEnd(%d) = %d, the byte-by-byte scan says %d: %q", at, end, want, in)
			}
			if s := SkipSpace(in, at); at >= 0 && (s < at || s > len(in)) {
				t.Fatalf("SkipSpace(%d) = %d of %d", at, s, len(in))
			}
			ms, _ := Members(in, at)
			checkInside(t, in, at, memberSpans(ms))
			es, _ := Elems(in, at)
			checkInside(t, in, at, es)
		}

		if !json.Valid(in) {
			return
		}
		start := SkipSpace(in, 0)
		if end := ValueEnd(in, start); end != len(bytes.TrimRight(in, " \t\r\n")) {
			t.Fatalf("ValueEnd of the whole value = %d, want %d", end, len(bytes.TrimRight(in, " \t\r\n")))
		}
		// Walk every container with a work list, not recursion.
		todo := []int{start}
		for len(todo) > 0 {
			at := todo[len(todo)-1]
			todo = todo[:len(todo)-1]
			var spans []Span
			switch in[at] {
			case '{':
				ms, err := Members(in, at)
				if err != nil {
					t.Fatalf("Members(%d) on valid JSON: %v", at, err)
				}
				checkKeys(t, in, at, ms)
				spans = memberSpans(ms)
			case '[':
				es, err := Elems(in, at)
				if err != nil {
					t.Fatalf("Elems(%d) on valid JSON: %v", at, err)
				}
				spans = es
			default:
				continue
			}
			checkInside(t, in, at, spans)
			for _, s := range spans {
				if !json.Valid(in[s.Start:s.End]) {
					t.Fatalf("span %d:%d is not a JSON value: %q", s.Start, s.End, in[s.Start:s.End])
				}
				todo = append(todo, s.Start)
			}
		}
	})
}

func memberSpans(ms []Member) []Span {
	out := make([]Span, len(ms))
	for i, m := range ms {
		out[i] = m.Span
	}
	return out
}

// checkInside: spans lie after the container's first byte, in order, and
// without overlap.
func checkInside(t *testing.T, in []byte, at int, spans []Span) {
	t.Helper()
	last := at + 1
	for _, s := range spans {
		if s.Start < last || s.End <= s.Start || s.End > len(in) {
			t.Fatalf("span %d:%d out of order or bounds (after %d, input %d)", s.Start, s.End, last, len(in))
		}
		last = s.End
	}
}

// checkKeys compares the keys found at in[at] with encoding/json's.
func checkKeys(t *testing.T, in []byte, at int, ms []Member) {
	t.Helper()
	if !utf8.Valid(in) {
		return // the decoder replaces bad bytes; the scanner keeps them
	}
	dec := json.NewDecoder(bytes.NewReader(in[at:]))
	if _, err := dec.Token(); err != nil { // '{'
		t.Fatal(err)
	}
	var want []string
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, k.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	if len(want) != len(ms) {
		t.Fatalf("encoding/json reads keys %q, scanner %+v", want, ms)
	}
	for i, k := range want {
		if ms[i].Key != k {
			t.Fatalf("key %d: encoding/json reads %q, scanner %q", i, k, ms[i].Key)
		}
	}
}

// stringEndByteByByte is StringEnd as the plain scan: a backslash skips the
// byte after it, the first other quote ends the string.
func stringEndByteByByte(raw []byte, i int) int {
	if i < 0 || i >= len(raw) || raw[i] != '"' {
		return -1
	}
	for j := i + 1; j < len(raw); j++ {
		switch raw[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return -1
}
