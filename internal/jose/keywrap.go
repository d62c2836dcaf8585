package jose

import (
	"crypto/aes"
	"crypto/subtle"
	"encoding/binary"
	"errors"
)

// ErrUnwrap: AES key unwrap failed its integrity check (wrong key-encryption
// key, or altered wrapped key).
var ErrUnwrap = errors.New("jose: key unwrap failed its integrity check")

// defaultIV is RFC 3394 §2.2.3.1's initial value.
var defaultIV = [8]byte{0xA6, 0xA6, 0xA6, 0xA6, 0xA6, 0xA6, 0xA6, 0xA6}

// KeyWrap wraps key (a multiple of 8 bytes, at least 16) under kek (16, 24
// or 32 bytes) as RFC 3394 §2.2.1 specifies: the A128KW/A192KW/A256KW of
// RFC 7518 §4.4. The result is 8 bytes longer than key.
func KeyWrap(kek, key []byte) ([]byte, error) {
	if len(key) < 16 || len(key)%8 != 0 {
		return nil, errors.New("jose: key to wrap must be a multiple of 8 bytes, at least 16")
	}
	block, err := aes.NewCipher(kek)
	if err != nil {
		return nil, errors.New("jose: key-encryption key must be 16, 24 or 32 bytes")
	}
	n := len(key) / 8
	out := make([]byte, 8+len(key))
	copy(out[8:], key)
	a := defaultIV
	var buf [16]byte
	for j := 0; j < 6; j++ {
		for i := 1; i <= n; i++ {
			copy(buf[:8], a[:])
			copy(buf[8:], out[8*i:8*i+8])
			block.Encrypt(buf[:], buf[:])
			t := uint64(n*j + i)
			binary.BigEndian.PutUint64(a[:], binary.BigEndian.Uint64(buf[:8])^t)
			copy(out[8*i:8*i+8], buf[8:])
		}
	}
	copy(out[:8], a[:])
	return out, nil
}

// KeyUnwrap reverses KeyWrap (RFC 3394 §2.2.2) and checks the integrity
// value in constant time; any mismatch is ErrUnwrap.
func KeyUnwrap(kek, wrapped []byte) ([]byte, error) {
	if len(wrapped) < 24 || len(wrapped)%8 != 0 {
		return nil, errors.New("jose: wrapped key must be a multiple of 8 bytes, at least 24")
	}
	block, err := aes.NewCipher(kek)
	if err != nil {
		return nil, errors.New("jose: key-encryption key must be 16, 24 or 32 bytes")
	}
	n := len(wrapped)/8 - 1
	out := make([]byte, len(wrapped)-8)
	copy(out, wrapped[8:])
	var a [8]byte
	copy(a[:], wrapped[:8])
	var buf [16]byte
	for j := 5; j >= 0; j-- {
		for i := n; i >= 1; i-- {
			t := uint64(n*j + i)
			binary.BigEndian.PutUint64(buf[:8], binary.BigEndian.Uint64(a[:])^t)
			copy(buf[8:], out[8*(i-1):8*i])
			block.Decrypt(buf[:], buf[:])
			copy(a[:], buf[:8])
			copy(out[8*(i-1):8*i], buf[8:])
		}
	}
	if subtle.ConstantTimeCompare(a[:], defaultIV[:]) != 1 {
		return nil, ErrUnwrap
	}
	return out, nil
}
