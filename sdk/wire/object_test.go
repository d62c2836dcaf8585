package wire

import (
	"encoding/json"
	"testing"
)

func TestObjectAccessors(t *testing.T) {
	obj, err := DecodeObject([]byte(`{"i":-42,"big":9223372036854775808,"f":1.5,"fi":2,"e":1e2,` +
		`"s":"x","b":true,"n":null,"o":{"p":{"q":"deep"}},"l":[1]}`))
	if err != nil {
		t.Fatal(err)
	}
	if n, ok := obj.Int("i"); !ok || n != -42 {
		t.Errorf("Int(i) = %d, %v", n, ok)
	}
	for _, name := range []string{"big", "f", "e", "s", "n", "missing"} {
		if n, ok := obj.Int(name); ok {
			t.Errorf("Int(%s) = %d, true", name, n)
		}
	}
	for name, want := range map[string]float64{"i": -42, "f": 1.5, "fi": 2, "e": 100, "big": 9223372036854775808} {
		if f, ok := obj.Float(name); !ok || f != want {
			t.Errorf("Float(%s) = %v, %v", name, f, ok)
		}
	}
	if _, ok := obj.Float("s"); ok {
		t.Error("Float read a string")
	}
	if s, ok := obj.String("s"); !ok || s != "x" {
		t.Errorf("String(s) = %q, %v", s, ok)
	}
	if _, ok := obj.String("n"); ok {
		t.Error("String read a null")
	}
	if b, ok := obj.Bool("b"); !ok || !b {
		t.Errorf("Bool(b) = %v, %v", b, ok)
	}
	if _, ok := obj.Bool("i"); ok {
		t.Error("Bool read a number")
	}
	o, ok := obj.Object("o")
	if !ok || len(o) != 1 {
		t.Fatalf("Object(o) = %v, %v", o, ok)
	}
	if _, ok := obj.Object("l"); ok {
		t.Error("Object read an array")
	}
	if v, ok := obj.Lookup("o", "p", "q"); !ok || v != "deep" {
		t.Errorf("Lookup(o.p.q) = %v, %v", v, ok)
	}
	for _, path := range [][]string{{"o", "x"}, {"s", "x"}, {"l", "0"}, {"missing"}} {
		if v, ok := obj.Lookup(path...); ok {
			t.Errorf("Lookup(%v) = %v, true", path, v)
		}
	}
	if v, ok := obj.Lookup("n"); !ok || v != nil {
		t.Errorf("Lookup(n) = %v, %v; a null is present", v, ok)
	}
	if v, ok := obj.Lookup(); !ok || len(v.(Object)) != len(obj) {
		t.Errorf("Lookup() = %v, %v; want the object itself", v, ok)
	}
}

// An object built in Go holds Go numbers: the accessors read them too,
// as what Marshal would write.
func TestObjectAccessorsReadGoNumbers(t *testing.T) {
	obj := Object{"i": 20, "u": uint8(7), "f": 2.5, "whole": 3.0, "s": "20"}
	if n, ok := obj.Int("i"); !ok || n != 20 {
		t.Errorf("Int(i) = %d, %v", n, ok)
	}
	if n, ok := obj.Int("u"); !ok || n != 7 {
		t.Errorf("Int(u) = %d, %v", n, ok)
	}
	if _, ok := obj.Int("whole"); ok {
		t.Error("Int read the float 3.0: a Python reader sees a float")
	}
	for name, want := range map[string]float64{"i": 20, "f": 2.5, "whole": 3} {
		if f, ok := obj.Float(name); !ok || f != want {
			t.Errorf("Float(%s) = %v, %v", name, f, ok)
		}
	}
	if _, ok := obj.Float("s"); ok {
		t.Error("Float read a string")
	}
}

// Nested objects may be Object as well as map[string]any, as when built in
// Go.
func TestObjectNestedObject(t *testing.T) {
	obj := Object{"a": Object{"b": map[string]any{"c": json.Number("3")}}}
	a, ok := obj.Object("a")
	if !ok {
		t.Fatal("Object(a) refused an Object")
	}
	if b, ok := a.Object("b"); !ok {
		t.Error("Object(b) refused a map[string]any")
	} else if n, ok := b.Int("c"); !ok || n != 3 {
		t.Errorf("Int(c) = %d, %v", n, ok)
	}
	if v, ok := obj.Lookup("a", "b", "c"); !ok || v != json.Number("3") {
		t.Errorf("Lookup = %v, %v", v, ok)
	}
	var empty Object
	if _, ok := empty.Int("x"); ok {
		t.Error("a nil Object has members")
	}
}

func TestObjectBytes(t *testing.T) {
	obj := Object{"z": json.Number("1.50"), "a": []string{"x"}, "m": Object{"k": 1.0}}
	b, err := obj.Bytes()
	if err != nil || string(b) != `{"a":["x"],"m":{"k":1.0},"z":1.5}` {
		t.Errorf("Bytes = %s, %v", b, err)
	}
	if b, err := Object(nil).Bytes(); err != nil || string(b) != `{}` {
		t.Errorf("nil Object: %s, %v", b, err)
	}
}
