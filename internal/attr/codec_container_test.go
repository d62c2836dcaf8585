package attr

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestLISTValidatesEveryElement(t *testing.T) {
	c := LIST(STR)
	if c.String() != "LIST(STR)" {
		t.Errorf("name %q", c.String())
	}
	w, err := c.Encode([]string{"a", "b"})
	if err != nil || !reflect.DeepEqual(w, []any{"a", "b"}) {
		t.Fatalf("Encode = %#v, %v", w, err)
	}
	if w, _ := c.Encode(nil); !reflect.DeepEqual(w, []any{}) {
		t.Errorf("nil slice wrote %#v, want []", w)
	}
	_, err = c.Decode([]any{"a", json.Number("1")})
	if err == nil || !strings.Contains(err.Error(), "[1]") {
		t.Errorf("bad element: %v", err)
	}
	if _, err := c.Decode(map[string]any{}); err == nil {
		t.Error("LIST read an object")
	}
}

func TestNestedCodecs(t *testing.T) {
	c := DICT(LIST(INT))
	if c.String() != "DICT(LIST(INT))" {
		t.Errorf("name %q", c.String())
	}
	v, err := c.Decode(map[string]any{"a": []any{json.Number("1"), json.Number("2")}})
	if err != nil || !reflect.DeepEqual(v, map[string][]int64{"a": {1, 2}}) {
		t.Fatalf("Decode = %v, %v", v, err)
	}
	_, err = c.Decode(map[string]any{"a": []any{"x"}})
	if err == nil || !strings.Contains(err.Error(), `"a": [0]`) {
		t.Errorf("path in error: %v", err)
	}
	l := LIST(DATETIME)
	w, err := l.Encode([]time.Time{time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)})
	if err != nil || !reflect.DeepEqual(w, []any{"2024-01-01T00:00:00Z"}) {
		t.Errorf("LIST(DATETIME) = %#v, %v", w, err)
	}
}

func TestSETSortsAndDedups(t *testing.T) {
	c := SET(INT)
	w, err := c.Encode(map[int64]struct{}{10: {}, 9: {}, -1: {}})
	if err != nil {
		t.Fatal(err)
	}
	// Numeric order, not text order ("10" < "9").
	if !reflect.DeepEqual(w, []any{json.Number("-1"), json.Number("9"), json.Number("10")}) {
		t.Errorf("Encode = %#v", w)
	}
	v, err := c.Decode([]any{json.Number("1"), json.Number("1"), json.Number("2")})
	if err != nil || len(v) != 2 {
		t.Errorf("Decode = %v, %v", v, err)
	}
	s, _ := SET(STR).Encode(map[string]struct{}{"é": {}, "z": {}, "a": {}})
	if !reflect.DeepEqual(s, []any{"a", "z", "é"}) {
		t.Errorf("strings by code point: %#v", s)
	}
}

func TestCompareWireBigIntegers(t *testing.T) {
	if compareWire(json.Number("12345678901234567891"), json.Number("12345678901234567890")) <= 0 {
		t.Error("big integers compared by float precision")
	}
	if compareWire(json.Number("1.5"), json.Number("1.50")) == 0 {
		t.Error("sort is not total")
	}
	if compareWire(nil, false) >= 0 || compareWire(true, json.Number("0")) >= 0 || compareWire("a", []any{}) >= 0 {
		t.Error("kind order")
	}
}

func TestTUPLEAndDICTEdges(t *testing.T) {
	if w, _ := TUPLE(BOOL).Encode([]bool{true}); !reflect.DeepEqual(w, []any{true}) {
		t.Errorf("TUPLE = %#v", w)
	}
	if _, err := DICT(STR).Encode(map[string]string{string([]byte{0xff}): "x"}); err == nil {
		t.Error("DICT wrote an invalid UTF-8 key")
	}
	if w, _ := DICT(STR).Encode(nil); !reflect.DeepEqual(w, map[string]any{}) {
		t.Errorf("nil map wrote %#v", w)
	}
}

func TestANY(t *testing.T) {
	w, err := ANY.Encode(map[string]any{
		"n":  3,
		"f":  2.0,
		"t":  time.Date(2026, 3, 15, 10, 30, 0, 0, time.UTC),
		"d":  Date{2026, 3, 15},
		"s":  []string{"a"},
		"m":  map[string]int{"x": 1},
		"ok": true,
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"n": json.Number("3"), "f": json.Number("2.0"), "t": "2026-03-15T10:30:00Z",
		"d": "2026-03-15", "s": []any{"a"}, "m": map[string]any{"x": json.Number("1")}, "ok": true,
	}
	if !reflect.DeepEqual(w, want) {
		t.Errorf("ANY.Encode = %#v", w)
	}
	for name, bad := range map[string]any{
		"bytes":    []byte("blob"),
		"duration": time.Second,
		"struct":   struct{ A int }{1},
		"chan":     make(chan int),
		"ptr":      new(int),
	} {
		if _, err := ANY.Encode(bad); err == nil {
			t.Errorf("ANY accepted %s", name)
		}
	}
}

func TestRECORDCodec(t *testing.T) {
	r, err := RECORD.Decode(map[string]any{"user": "u"})
	if err != nil || r.Len() != 1 {
		t.Fatal(r, err)
	}
	if _, err := RECORD.Decode([]any{}); err == nil {
		t.Error("RECORD read an array")
	}
	w, _ := RECORD.Encode(Record{})
	if !reflect.DeepEqual(w, map[string]any{}) {
		t.Errorf("zero record wrote %#v", w)
	}
}
