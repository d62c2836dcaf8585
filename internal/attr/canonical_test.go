package attr

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// Expected strings below were produced by CPython's json.dumps / repr, the
// form the Python library writes.
func TestPyFloatMatchesPythonRepr(t *testing.T) {
	cases := []struct {
		f    float64
		want string
	}{
		{1.0, "1.0"},
		{0.1, "0.1"},
		{1e16, "1e+16"},
		{1e15, "1000000000000000.0"},
		{123456789012345678.0, "1.2345678901234568e+17"},
		{1.5e-5, "1.5e-05"},
		{0.0001, "0.0001"},
		{0.00012, "0.00012"},
		{-2.5, "-2.5"},
		{1e22, "1e+22"},
		{5e-324, "5e-324"},
		{math.MaxFloat64, "1.7976931348623157e+308"},
		{math.Copysign(0, -1), "-0.0"},
		{0, "0.0"},
		{100.0, "100.0"},
		{12345.678, "12345.678"},
	}
	for _, c := range cases {
		got, err := pyFloat(c.f)
		if err != nil || got != c.want {
			t.Errorf("pyFloat(%v) = %q, %v; want %q", c.f, got, err, c.want)
		}
	}
	for _, bad := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		if _, err := pyFloat(bad); err == nil {
			t.Errorf("pyFloat(%v) accepted a value JSON cannot spell", bad)
		}
	}
}

func TestMarshalIsPythonCanonical(t *testing.T) {
	v := map[string]any{
		"b": json.Number("1"),
		"a": "é<>&\u2028\x01\x7f\"\\ \n",
		"c": []any{true, nil},
	}
	got, err := Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	want := "{\"a\":\"é<>&\u2028\\u0001\x7f\\\"\\\\ \\n\",\"b\":1,\"c\":[true,null]}"
	if string(got) != want {
		t.Errorf("Marshal = %s\nwant      %s", got, want)
	}
}

func TestMarshalWritesNumbersAsPython(t *testing.T) {
	got, err := Marshal(map[string]any{
		"big": json.Number("12345678901234567890"), "p": json.Number("1.50"),
		"e": json.Number("2.5E-3"), "z": json.Number("-0"), "nz": json.Number("-0.0"),
		"i": json.Number("1e16"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != `{"big":12345678901234567890,"e":0.0025,"i":1e+16,"nz":-0.0,"p":1.5,"z":0}` {
		t.Errorf("got %s", got)
	}
}

func TestMarshalRejectsWhatJSONCannotHold(t *testing.T) {
	for name, v := range map[string]any{
		"bad number":  json.Number("0x10"),
		"bytes":       []byte("x"),
		"NaN":         math.NaN(),
		"struct":      struct{}{},
		"func":        func() {},
		"int keys":    map[int]string{1: "a"},
		"bad utf8":    string([]byte{0xff}),
		"inf literal": json.Number("1e400"),
		"long int":    json.Number(strings.Repeat("9", 4301)),
	} {
		if _, err := Marshal(v); err == nil {
			t.Errorf("%s: Marshal accepted it", name)
		}
	}
}

func TestValidNumber(t *testing.T) {
	for _, ok := range []string{"0", "-0", "1", "-12", "1.5", "1e3", "1E+3", "1.0e-3", "12345678901234567890"} {
		if !validNumber(ok) {
			t.Errorf("validNumber(%q) = false", ok)
		}
	}
	for _, bad := range []string{"", "-", "01", "1.", ".5", "1e", "+1", "1e+", "NaN", "0x1", "1 "} {
		if validNumber(bad) {
			t.Errorf("validNumber(%q) = true", bad)
		}
	}
}
