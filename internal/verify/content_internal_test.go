package verify

import (
	"strings"
	"testing"
)

func TestValueDiff(t *testing.T) {
	for _, c := range []struct{ got, want, says string }{
		{`{"a":1,"b":{"c":[1,2]}}`, `{"a":1,"b":{"c":[1,3]}}`, "field $.b.c[1] differs"},
		{`{"a":1}`, `{"a":1,"z":2}`, "field $.z differs"},
		{`{"n":9007199254740993}`, `{"n":9007199254740992}`, "field $.n differs"},
		{`{"a":1, "b":2}`, `{"b":2,"a":1}`, "the same JSON, written differently"},
		{"abcX", "abcY", "the bytes differ from byte 3 on"},
	} {
		if got := valueDiff([]byte(c.got), []byte(c.want)); got != c.says {
			t.Errorf("valueDiff(%s, %s) = %q, want %q", c.got, c.want, got, c.says)
		}
	}
}

// FuzzValueDiff: record values are outside input; no pair panics, and a
// value never differs from itself by a field.
func FuzzValueDiff(f *testing.F) {
	f.Add([]byte(`{"a":[1,{"b":null}]}`), []byte(`{"a":[1,{"b":true}]}`))
	f.Add([]byte(`[1,2`), []byte(`"x"`))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		valueDiff(a, b)
		if d := valueDiff(a, a); strings.HasPrefix(d, "field") {
			t.Fatalf("%q differs from itself: %s", a, d)
		}
	})
}
