package wire_test

import (
	"encoding/json"
	"fmt"

	"github.com/flecht-dev/flecht/sdk/wire"
)

func Example() {
	in := []byte(`{"device": "sensor-1", "temp": 21.50, "seq": 7, "meta": {"fw": "1.4"}}`)
	obj, err := wire.DecodeObject(in)
	if err != nil {
		fmt.Println(err)
		return
	}
	seq, _ := obj.Int("seq")
	temp, _ := obj.Float("temp")
	fw, _ := obj.Lookup("meta", "fw")
	fmt.Println(seq, temp, fw)

	obj["seq"] = seq + 1
	obj["hot"] = temp > 21
	out, _ := obj.Bytes()
	fmt.Println(string(out))
	// Output:
	// 7 21.5 1.4
	// {"device":"sensor-1","hot":true,"meta":{"fw":"1.4"},"seq":8,"temp":21.5}
}

func ExampleMarshal() {
	b, _ := wire.Marshal(map[string]any{
		"int":    json.Number("-0"),
		"exp":    json.Number("1e2"),
		"frac":   json.Number("1.50"),
		"float":  1.0,
		"html":   "<&>",
		"accent": "é",
	})
	fmt.Println(string(b))
	// Output: {"accent":"é","exp":100.0,"float":1.0,"frac":1.5,"html":"<&>","int":0}
}

func ExampleSetMember() {
	raw := []byte(`{"a":1,"z":2}`)
	out, ok := wire.SetMember(raw, "seq", []byte("42"))
	fmt.Println(string(out), ok)
	_, ok = wire.SetMember([]byte(`{"a": 1}`), "seq", []byte("42"))
	fmt.Println(ok)
	// Output:
	// {"a":1,"seq":42,"z":2} true
	// false
}
