package jose

import (
	"bytes"
	"testing"
)

// FuzzKeyUnwrap: unwrap never panics; what unwraps wraps back to the input.
func FuzzKeyUnwrap(f *testing.F) {
	f.Add(seq(32), unhex(f, "28C9F404C4B810F4CBCCB35CFB87F8263F5786E2D80ED326CBC7F0E71A99F43BFB988B9B7A02DD21"))
	f.Add(seq(16), seq(24))
	f.Add([]byte{}, []byte{})
	f.Fuzz(func(t *testing.T, kek, wrapped []byte) {
		key, err := KeyUnwrap(kek, wrapped)
		if err != nil {
			return
		}
		again, err := KeyWrap(kek, key)
		if err != nil || !bytes.Equal(again, wrapped) {
			t.Fatalf("rewrap = %x, %v", again, err)
		}
	})
}

// FuzzKeyWrap: whatever wraps unwraps to itself under the same KEK.
func FuzzKeyWrap(f *testing.F) {
	f.Add(seq(32), seq(32))
	f.Add(seq(24), seq(16))
	f.Fuzz(func(t *testing.T, kek, key []byte) {
		w, err := KeyWrap(kek, key)
		if err != nil {
			return
		}
		back, err := KeyUnwrap(kek, w)
		if err != nil || !bytes.Equal(back, key) {
			t.Fatalf("unwrap = %x, %v", back, err)
		}
	})
}

// FuzzDecodeSegment: a segment decodes only when re-encoding gives it back
// unchanged: one text per value.
func FuzzDecodeSegment(f *testing.F) {
	for _, s := range []string{"", "AQ", "AQ==", "-_8", "eyJhbGciOiJkaXIifQ", "A\nQ"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b, err := DecodeSegment(s)
		if err != nil {
			return
		}
		if EncodeSegment(b) != s {
			t.Fatalf("%q decodes but encodes as %q", s, EncodeSegment(b))
		}
	})
}

// FuzzConcatKDF: never panics; deterministic; the output has the asked length.
func FuzzConcatKDF(f *testing.F) {
	f.Add([]byte("z"), "ECDH-ES+A256KW", []byte{}, []byte{}, 256)
	f.Add([]byte{}, "", []byte("Alice"), []byte("Bob"), 8)
	f.Fuzz(func(t *testing.T, z []byte, alg string, apu, apv []byte, bits int) {
		a, err := ConcatKDF(z, alg, apu, apv, bits)
		if err != nil {
			return
		}
		b, _ := ConcatKDF(z, alg, apu, apv, bits)
		if len(a) != bits/8 || !bytes.Equal(a, b) {
			t.Fatalf("len %d for %d bits, or not deterministic", len(a), bits)
		}
	})
}

// FuzzPBES2Key: never panics; small counts only (the cost is linear in p2c).
func FuzzPBES2Key(f *testing.F) {
	f.Add("PBES2-HS512+A256KW", []byte("correct horse battery"), []byte("salt"), 1000)
	f.Add("PBES2-HS256+A128KW", []byte{}, []byte{}, 1)
	f.Fuzz(func(t *testing.T, alg string, pw, salt []byte, p2c int) {
		p2c %= 2000
		k, err := PBES2Key(alg, pw, salt, p2c)
		if err != nil {
			return
		}
		if len(k) != pbes2[alg].keyLen {
			t.Fatalf("key of %d bytes for %s", len(k), alg)
		}
	})
}

// FuzzSplitCompact: the segments join back to the input.
func FuzzSplitCompact(f *testing.F) {
	f.Add("a.b.c", 3)
	f.Add("a..c.d.e", 5)
	f.Fuzz(func(t *testing.T, s string, n int) {
		n %= 8
		segs, ok := SplitCompact(s, n)
		if !ok {
			return
		}
		if len(segs) != n || joinDots(segs) != s {
			t.Fatalf("%q split into %q", s, segs)
		}
	})
}

func joinDots(segs []string) string {
	var b bytes.Buffer
	for i, s := range segs {
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(s)
	}
	return b.String()
}
