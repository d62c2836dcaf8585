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
// AES-256-GCM on the same plaintext with additional data of the same size
// as a token's (its protected header, which GCM authenticates too), in the
// same run. They report operations per second for both (ops/s, raw-ops/s)
// and the ratio as x_raw (1.0 would be no overhead at all). Raw seal
// includes drawing the 12-byte nonce from crypto/rand, which any real use
// must do too.
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

// benchScope is the scope every benchmark token carries.
const benchScope = "api_key"

// benchAAD is additional data of the length a benchmark token's GCM
// authenticates: the base64url protected header of kid "a" and benchScope.
// Without it the raw baseline skips work every token pays for.
func benchAAD() []byte {
	return []byte(b64url.EncodeToString(headerJSON("a", benchScope)))
}

func report(b *testing.B, raw time.Duration) {
	b.ReportMetric(float64(raw.Nanoseconds())/float64(b.N), "raw-ns/op")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
	b.ReportMetric(float64(b.N)/raw.Seconds(), "raw-ops/s")
	b.ReportMetric(float64(b.Elapsed())/float64(raw), "x_raw")
}

func BenchmarkEncrypt(b *testing.B) {
	kr := testKeyring(b, false)
	payload := []byte(`"` + benchSecret + `"`)
	gcm, aad := rawGCM(b), benchAAD()
	iv := make([]byte, 12)
	dst := make([]byte, 0, len(payload)+16)
	raw := timeRaw(b.N, func() {
		rand.Read(iv)
		dst = gcm.Seal(dst[:0], iv, payload, aad)
	})
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := kr.Encrypt(payload, benchScope); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	report(b, raw)
}

func BenchmarkDecrypt(b *testing.B) {
	kr := testKeyring(b, false)
	payload := []byte(`"` + benchSecret + `"`)
	tok, _ := kr.Encrypt(payload, benchScope)
	gcm, aad := rawGCM(b), benchAAD()
	iv := make([]byte, 12)
	sealed := gcm.Seal(nil, iv, payload, aad)
	dst := make([]byte, 0, len(payload))
	raw := timeRaw(b.N, func() {
		var err error
		if dst, err = gcm.Open(dst[:0], iv, sealed, aad); err != nil {
			panic(err)
		}
	})
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, _, err := kr.Decrypt(tok, benchScope); err != nil {
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
	field := ENCRYPTED(attr.STR, Scope(benchScope), WithKeyring(kr), WithObserver(nopObserver{}))
	w, _ := field.Encode(benchSecret)
	payload := []byte(`"` + benchSecret + `"`)
	gcm, aad := rawGCM(b), benchAAD()
	iv := make([]byte, 12)
	sealed := gcm.Seal(nil, iv, payload, aad)
	dst := make([]byte, 0, len(payload))
	raw := timeRaw(b.N, func() { dst, _ = gcm.Open(dst[:0], iv, sealed, aad) })
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
	field := ENCRYPTED(attr.STR, Scope(benchScope), WithKeyring(kr))
	payload := []byte(`"` + benchSecret + `"`)
	gcm, aad := rawGCM(b), benchAAD()
	iv := make([]byte, 12)
	dst := make([]byte, 0, len(payload)+16)
	raw := timeRaw(b.N, func() {
		rand.Read(iv)
		dst = gcm.Seal(dst[:0], iv, payload, aad)
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

// The raw baseline authenticates as much additional data as a token does,
// or the ratio flatters the raw side.
func TestBenchAADIsATokensHeader(t *testing.T) {
	tok, err := testKeyring(t, false).Encrypt([]byte(`"`+benchSecret+`"`), benchScope)
	if err != nil {
		t.Fatal(err)
	}
	protected, _, _ := strings.Cut(strings.TrimPrefix(tok, Prefix), ".")
	if string(benchAAD()) != protected {
		t.Errorf("baseline AAD %q, a token's %q", benchAAD(), protected)
	}
}

// The 0.17 paths: an ECDH-ES seal and open cost an X25519 agreement each
// (plus a key wrap), a signature check an Ed25519 verify, and opening a
// protected keyring file 210000 PBKDF2-HMAC-SHA512 rounds.
func BenchmarkEncryptECDH(b *testing.B) {
	kr := mustParse(b, fullDoc())
	payload := []byte(`"sk-live-0123456789abcdef"`)
	for b.Loop() {
		if _, err := kr.Encrypt(payload, "api"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecryptECDH(b *testing.B) {
	kr := mustParse(b, fullDoc())
	tok, _ := kr.Encrypt([]byte(`"sk-live-0123456789abcdef"`), "api")
	for b.Loop() {
		if _, _, err := kr.Open(tok, "api"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVerify(b *testing.B) {
	kr := mustParse(b, fullDoc())
	tok, _ := kr.Sign([]byte(`{"endpoint":"https://example.test"}`), "api")
	for b.Loop() {
		if _, _, err := kr.Verify(tok, "api"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkOpenProtectedKeyring(b *testing.B) {
	kr := mustParse(b, fullDoc())
	doc, _ := kr.SealProtected([]byte("fourteen bytes!"))
	for b.Loop() {
		if _, err := OpenProtected(doc, []byte("fourteen bytes!")); err != nil {
			b.Fatal(err)
		}
	}
}
