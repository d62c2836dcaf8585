package attr

import "testing"

// A sensor reading as a stage sees it: a few strings, integers and floats,
// one nested object. Decode and write back is what a builtin does per record.
const benchRecord = `{"device":"sensor-0042","site":"berlin-mitte","seq":123456789,"temp":21.375,` +
	`"humidity":0.4375,"pressure":1013.25,"ok":true,"tags":["a","b"],` +
	`"meta":{"fw":"1.4.2","uptime":86400,"rssi":-67,"lat":52.520008,"lon":13.404954}}`

func BenchmarkDecodeAndWrite(b *testing.B) {
	b.SetBytes(int64(len(benchRecord)))
	for b.Loop() {
		ev, _, err := Decode[Event]([]byte(benchRecord))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := ev.Bytes(); err != nil {
			b.Fatal(err)
		}
	}
}

// The three hot paths one at a time: decoding a record value, writing a
// decoded record back, and the splice that sets one member without either.

func BenchmarkDecodeObject(b *testing.B) {
	b.SetBytes(int64(len(benchRecord)))
	for b.Loop() {
		if _, _, err := DecodeObject([]byte(benchRecord)); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMarshal(b *testing.B) {
	m, _, err := DecodeObject([]byte(benchRecord))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(benchRecord)))
	for b.Loop() {
		if _, err := Marshal(m); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSetCanonicalMember(b *testing.B) {
	m, _, err := DecodeObject([]byte(benchRecord))
	if err != nil {
		b.Fatal(err)
	}
	raw, err := Marshal(m)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		if _, ok := SetCanonicalMember(raw, "seq", []byte("123456790")); !ok {
			b.Fatal("refused a canonical record")
		}
	}
}
