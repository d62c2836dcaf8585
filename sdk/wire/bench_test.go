package wire

import "testing"

// A sensor reading as a stage sees it: a few strings, integers and floats,
// one nested object.
var benchInput = []byte(`{"device": "sensor-0042", "site": "berlin-mitte", "seq": 123456789, "temp": 21.375, ` +
	`"humidity": 0.4375, "pressure": 1013.25, "ok": true, "tags": ["a", "b"], ` +
	`"meta": {"fw": "1.4.2", "uptime": 86400, "rssi": -67, "lat": 52.520008, "lon": 13.404954}}`)

func BenchmarkDecodeObject(b *testing.B) {
	b.SetBytes(int64(len(benchInput)))
	for b.Loop() {
		if _, err := DecodeObject(benchInput); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMarshal(b *testing.B) {
	obj, err := DecodeObject(benchInput)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(benchInput)))
	for b.Loop() {
		if _, err := Marshal(obj); err != nil {
			b.Fatal(err)
		}
	}
}

// canonicalInput is benchInput in the canonical form.
func canonicalInput(b *testing.B) []byte {
	obj, err := DecodeObject(benchInput)
	if err != nil {
		b.Fatal(err)
	}
	raw, err := obj.Bytes()
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(raw)))
	return raw
}

func BenchmarkSetMember(b *testing.B) {
	raw := canonicalInput(b)
	for b.Loop() {
		if _, ok := SetMember(raw, "seq", []byte("123456790")); !ok {
			b.Fatal("refused a canonical object")
		}
	}
}

func BenchmarkCanonicalMember(b *testing.B) {
	raw := canonicalInput(b)
	for b.Loop() {
		if _, present, ok := CanonicalMember(raw, "seq"); !ok || !present {
			b.Fatal("refused a canonical object")
		}
	}
}
