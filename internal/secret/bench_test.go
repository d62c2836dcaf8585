package secret

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"strings"
	"testing"
	"time"

	"github.com/flecht-dev/flecht/internal/attr"
)

// The benchmarks measure flecht's token path against the limit, raw
// AES-256-GCM on the same plaintext in the same run, and report the ratio as
// x_raw (1.0 would be no overhead at all). Raw seal includes drawing the
// 12-byte nonce from crypto/rand, which any real use must do too.
//
//	go test -run '^$' -bench . ./internal/secret/

// A typical secret: a 64-character API key.
var benchSecret = "sk-live-" + strings.Repeat("x", 56)

func rawGCM(b *testing.B) cipher.AEAD {
	block, err := aes.NewCipher(keyA)
	if err != nil {
		b.Fatal(err)
	}
	gcm, _ := cipher.NewGCM(block)
	return gcm
}

// timeRaw runs op n times and returns the elapsed time.
func timeRaw(n int, op func()) time.Duration {
	start := time.Now()
	for range n {
		op()
	}
	return time.Since(start)
}

func report(b *testing.B, raw time.Duration) {
	b.ReportMetric(float64(raw.Nanoseconds())/float64(b.N), "raw-ns/op")
	b.ReportMetric(float64(b.Elapsed())/float64(raw), "x_raw")
}

func BenchmarkEncrypt(b *testing.B) {
	kr := testKeyring(b, false)
	payload := []byte(`"` + benchSecret + `"`)
	gcm := rawGCM(b)
	iv := make([]byte, 12)
	dst := make([]byte, 0, len(payload)+16)
	raw := timeRaw(b.N, func() {
		rand.Read(iv)
		dst = gcm.Seal(dst[:0], iv, payload, nil)
	})
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := kr.Encrypt(payload, "api_key"); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	report(b, raw)
}

func BenchmarkDecrypt(b *testing.B) {
	kr := testKeyring(b, false)
	payload := []byte(`"` + benchSecret + `"`)
	tok, _ := kr.Encrypt(payload, "api_key")
	gcm := rawGCM(b)
	iv := make([]byte, 12)
	sealed := gcm.Seal(nil, iv, payload, nil)
	dst := make([]byte, 0, len(payload))
	raw := timeRaw(b.N, func() {
		var err error
		if dst, err = gcm.Open(dst[:0], iv, sealed, nil); err != nil {
			panic(err)
		}
	})
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, _, err := kr.Decrypt(tok, "api_key"); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	report(b, raw)
}

// The field-level path a stage pays: encode/decode through ENCRYPTED(STR),
// JSON included.
func BenchmarkCodecDecode(b *testing.B) {
	kr := testKeyring(b, false)
	field := ENCRYPTED(attr.STR, Scope("api_key"), WithKeyring(kr), WithObserver(nopObserver{}))
	w, _ := field.Encode(benchSecret)
	payload := []byte(`"` + benchSecret + `"`)
	gcm := rawGCM(b)
	iv := make([]byte, 12)
	sealed := gcm.Seal(nil, iv, payload, nil)
	dst := make([]byte, 0, len(payload))
	raw := timeRaw(b.N, func() { dst, _ = gcm.Open(dst[:0], iv, sealed, nil) })
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := field.Decode(w); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	report(b, raw)
}

func BenchmarkCodecEncode(b *testing.B) {
	kr := testKeyring(b, false)
	field := ENCRYPTED(attr.STR, Scope("api_key"), WithKeyring(kr))
	payload := []byte(`"` + benchSecret + `"`)
	gcm := rawGCM(b)
	iv := make([]byte, 12)
	dst := make([]byte, 0, len(payload)+16)
	raw := timeRaw(b.N, func() {
		rand.Read(iv)
		dst = gcm.Seal(dst[:0], iv, payload, nil)
	})
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := field.Encode(benchSecret); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	report(b, raw)
}
