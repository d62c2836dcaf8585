package secret

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"sync"
	"testing"
)

// Fixed test keys: bytes 0..31 and 32..63.
var (
	keyA = seq(0)
	keyB = seq(32)
)

func seq(from byte) []byte {
	b := make([]byte, KeySize)
	for i := range b {
		b[i] = from + byte(i)
	}
	return b
}

// testKeyring holds kid "a" (keyA, primary) and, when two is set, kid "b".
func testKeyring(t testing.TB, two bool) *Keyring {
	t.Helper()
	kr, err := (&Keyring{}).AddKey("a", keyA)
	if err != nil {
		t.Fatal(err)
	}
	if two {
		if kr, err = kr.AddKey("b", keyB); err != nil {
			t.Fatal(err)
		}
	}
	return kr
}

// handToken assembles a token with an arbitrary protected header straight on
// AES-GCM, independent of Keyring.Encrypt: the oracle for acceptance-rule and
// interop tests.
func handToken(t testing.TB, key []byte, header string, payload []byte) string {
	t.Helper()
	enc := base64.RawURLEncoding
	protected := enc.EncodeToString([]byte(header))
	iv := make([]byte, 12)
	rand.Read(iv)
	block, err := aes.NewCipher(key)
	if err != nil {
		t.Fatal(err)
	}
	gcm, _ := cipher.NewGCM(block)
	sealed := gcm.Seal(nil, iv, payload, []byte(protected))
	ct, tag := sealed[:len(sealed)-16], sealed[len(sealed)-16:]
	return Prefix + protected + ".." + enc.EncodeToString(iv) + "." + enc.EncodeToString(ct) + "." + enc.EncodeToString(tag)
}

// countOpens counts AEAD opens for the duration of the test.
func countOpens(t *testing.T) *int {
	t.Helper()
	n := new(int)
	var mu sync.Mutex
	beforeOpen = func() { mu.Lock(); *n++; mu.Unlock() }
	t.Cleanup(func() { beforeOpen = nil })
	return n
}

// withProcess installs kr and obs as the process runtime for one test and
// restores the previous state afterwards.
func withProcess(t *testing.T, kr *Keyring, obs Observer) {
	t.Helper()
	process.mu.Lock()
	prevK, prevO := process.keyring, process.observer
	process.keyring, process.observer = kr, obs
	process.mu.Unlock()
	t.Cleanup(func() {
		process.mu.Lock()
		process.keyring, process.observer = prevK, prevO
		process.mu.Unlock()
	})
}

type recorder struct {
	mu        sync.Mutex
	plaintext []string
	decrypted [][2]string
	verified  [][2]string
	unsigned  []string
}

func (r *recorder) Verified(scope, kid string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.verified = append(r.verified, [2]string{scope, kid})
}

func (r *recorder) UnsignedRead(scope string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.unsigned = append(r.unsigned, scope)
}

func (r *recorder) PlaintextRead(scope string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.plaintext = append(r.plaintext, scope)
}

func (r *recorder) Decrypted(scope, kid string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.decrypted = append(r.decrypted, [2]string{scope, kid})
}
