package jose

import (
	"bytes"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func seq(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i)
	}
	return b
}

// RFC 3394 §4.6: wrap 256 bits of key data with a 256-bit KEK.
func TestKeyWrapRFC3394(t *testing.T) {
	kek := seq(32)
	key := unhex(t, "00112233445566778899AABBCCDDEEFF000102030405060708090A0B0C0D0E0F")
	want := unhex(t, "28C9F404C4B810F4 CBCCB35CFB87F826 3F5786E2D80ED326 CBC7F0E71A99F43B FB988B9B7A02DD21")
	got, err := KeyWrap(kek, key)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("wrap = %x, %v; want %x", got, err, want)
	}
	back, err := KeyUnwrap(kek, want)
	if err != nil || !bytes.Equal(back, key) {
		t.Fatalf("unwrap = %x, %v", back, err)
	}
	// Any changed bit fails the integrity check, as does another KEK.
	for i := range want {
		bad := bytes.Clone(want)
		bad[i] ^= 0x10
		if _, err := KeyUnwrap(kek, bad); !errors.Is(err, ErrUnwrap) {
			t.Fatalf("byte %d flipped: %v", i, err)
		}
	}
	if _, err := KeyUnwrap(seq(16)[:16], want); !errors.Is(err, ErrUnwrap) {
		t.Fatalf("other KEK: %v", err)
	}
}

// RFC 3394 §4.1: 128-bit key data, 128-bit KEK.
func TestKeyWrapRFC3394Small(t *testing.T) {
	got, err := KeyWrap(seq(16), unhex(t, "00112233445566778899AABBCCDDEEFF"))
	if want := unhex(t, "1FA68B0A8112B447 AEF34BD8FB5A7B82 9D3E862371D2CFE5"); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("wrap = %x, %v", got, err)
	}
}

func TestKeyWrapRefusesBadSizes(t *testing.T) {
	if _, err := KeyWrap(seq(32), seq(12)); err == nil {
		t.Error("wrapped 12 bytes")
	}
	if _, err := KeyWrap(seq(20), seq(16)); err == nil {
		t.Error("20-byte KEK")
	}
	if _, err := KeyUnwrap(seq(32), seq(16)); err == nil {
		t.Error("unwrapped 16 bytes")
	}
	if _, err := KeyUnwrap(seq(32), seq(41)); err == nil {
		t.Error("unwrapped 41 bytes")
	}
}

// RFC 7518 Appendix C: ECDH-ES key agreement, "A128GCM", apu "Alice", apv
// "Bob", 128 bits.
func TestConcatKDFRFC7518(t *testing.T) {
	z := []byte{158, 86, 217, 29, 129, 113, 53, 211, 114, 131, 66, 131, 191, 132, 38, 156,
		251, 49, 110, 163, 218, 128, 106, 72, 246, 218, 167, 121, 140, 254, 144, 196}
	got, err := ConcatKDF(z, "A128GCM", []byte("Alice"), []byte("Bob"), 128)
	if err != nil || EncodeSegment(got) != "VqqN6vgjbSBcIijNcacQGg" {
		t.Fatalf("Concat KDF = %s, %v", EncodeSegment(got), err)
	}
	// More than one hash block: the counter runs, and the first block is the
	// 256-bit result.
	long, _ := ConcatKDF(z, "A128GCM", []byte("Alice"), []byte("Bob"), 512)
	short, _ := ConcatKDF(z, "A128GCM", []byte("Alice"), []byte("Bob"), 256)
	if len(long) != 64 || bytes.Equal(long[:32], long[32:]) || bytes.Equal(long[:32], short) {
		// keydatalen is part of OtherInfo, so the 512-bit prefix differs.
		t.Fatalf("multi-block output looks wrong: %x / %x", long, short)
	}
	if _, err := ConcatKDF(z, "x", nil, nil, 0); err == nil {
		t.Error("zero-length key")
	}
	if _, err := ConcatKDF(z, "x", nil, nil, 12); err == nil {
		t.Error("12-bit key")
	}
}

// RFC 7517 Appendix C: a JWK encrypted with PBES2-HS256+A128KW. Deriving the
// KEK from the password and unwrapping the example's encrypted key yields
// the example's CEK.
func TestPBES2RFC7517(t *testing.T) {
	p2s, err := DecodeSegment("2WCTcJZ1Rvd_CJuJripQ1w")
	if err != nil {
		t.Fatal(err)
	}
	kek, err := PBES2Key("PBES2-HS256+A128KW", []byte("Thus from my lips, by yours, my sin is purged."), p2s, 4096)
	if err != nil {
		t.Fatal(err)
	}
	wrapped, _ := DecodeSegment("TrqXOwuNUfDV9VPTNbyGvEJ9JMjefAVn-TR1uIxR9p6hsRQh9Tk7BA")
	cek, err := KeyUnwrap(kek, wrapped)
	want := []byte{111, 27, 25, 52, 66, 29, 20, 78, 92, 176, 56, 240, 65, 208, 82, 112,
		161, 131, 36, 55, 202, 236, 185, 172, 129, 23, 153, 194, 195, 48, 253, 182}
	if err != nil || !bytes.Equal(cek, want) {
		t.Fatalf("CEK = %v, %v", cek, err)
	}
	// The alg is part of the salt: the same inputs under HS512 give another key.
	k512, err := PBES2Key("PBES2-HS512+A256KW", []byte("Thus from my lips, by yours, my sin is purged."), p2s, 4096)
	if err != nil || len(k512) != 32 || bytes.Equal(k512[:16], kek) {
		t.Fatalf("HS512: %x, %v", k512, err)
	}
	if _, err := PBES2Key("A256KW", []byte("x"), p2s, 1000); err == nil {
		t.Error("derived for a non-PBES2 alg")
	}
	if _, err := PBES2Key("PBES2-HS512+A256KW", []byte("x"), p2s, 0); err == nil {
		t.Error("derived with p2c 0")
	}
}

func TestDecodeSegmentIsStrict(t *testing.T) {
	for _, s := range []string{"AQ==", "AQ=", "A", "AR", "A+", "A/", "AQ\n", "A\rQ", "A Q", "AQ.", "é"} {
		if _, err := DecodeSegment(s); !errors.Is(err, ErrSegment) {
			t.Errorf("%q decoded", s)
		}
	}
	for s, want := range map[string]string{"": "", "AQ": "\x01", "-_8": "\xfb\xff"} {
		if b, err := DecodeSegment(s); err != nil || string(b) != want {
			t.Errorf("%q = %x, %v", s, b, err)
		}
	}
}

func TestSplitCompact(t *testing.T) {
	if segs, ok := SplitCompact("a..c.d.e", 5); !ok || segs[1] != "" || segs[4] != "e" {
		t.Errorf("5 segments: %q %v", segs, ok)
	}
	for _, s := range []string{"a.b.c.d", "a.b.c.d.e.f", strings.Repeat(".", 10000)} {
		if _, ok := SplitCompact(s, 5); ok {
			t.Errorf("%.20q split into 5", s)
		}
	}
	if _, ok := SplitCompact("a.b", 0); ok {
		t.Error("0 segments")
	}
}
