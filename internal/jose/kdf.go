package jose

import (
	"crypto/pbkdf2"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/binary"
	"errors"
	"hash"
)

// ConcatKDF derives keyBits of key material from the shared secret z as
// RFC 7518 §4.6.2 specifies for ECDH-ES: NIST SP 800-56A's single-step KDF
// over SHA-256, OtherInfo = AlgorithmID || PartyUInfo || PartyVInfo ||
// SuppPubInfo, each of the first three a 32-bit big-endian length and the
// bytes, SuppPubInfo the key length in bits. alg is the "enc" value for
// direct ECDH-ES and the "alg" value (e.g. "ECDH-ES+A256KW") for key
// agreement with key wrapping.
func ConcatKDF(z []byte, alg string, apu, apv []byte, keyBits int) ([]byte, error) {
	if keyBits <= 0 || keyBits%8 != 0 || keyBits > 8*sha256.Size*64 {
		return nil, errors.New("jose: Concat KDF key length must be a positive multiple of 8 bits")
	}
	var other []byte
	other = appendLenPrefixed(other, []byte(alg))
	other = appendLenPrefixed(other, apu)
	other = appendLenPrefixed(other, apv)
	other = binary.BigEndian.AppendUint32(other, uint32(keyBits))
	out := make([]byte, 0, keyBits/8+sha256.Size)
	h := sha256.New()
	for counter := uint32(1); len(out) < keyBits/8; counter++ {
		h.Reset()
		var c [4]byte
		binary.BigEndian.PutUint32(c[:], counter)
		h.Write(c[:])
		h.Write(z)
		h.Write(other)
		out = h.Sum(out)
	}
	return out[:keyBits/8], nil
}

func appendLenPrefixed(dst, b []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(b)))
	return append(dst, b...)
}

// PBES2 algorithms of RFC 7518 §4.8: the HMAC hash and the wrapping key
// size follow from the name.
var pbes2 = map[string]struct {
	hash   func() hash.Hash
	keyLen int
}{
	"PBES2-HS256+A128KW": {sha256.New, 16},
	"PBES2-HS384+A192KW": {sha512.New384, 24},
	"PBES2-HS512+A256KW": {sha512.New, 32},
}

// PBES2Key derives the key-encryption key of a PBES2 alg (RFC 7518
// §4.8.1.1): PBKDF2 with the alg's HMAC, salt = UTF8(alg) || 0x00 || p2s,
// iterations = p2c. Bounding p2c is the caller's policy: it costs time in
// proportion.
func PBES2Key(alg string, password, p2s []byte, p2c int) ([]byte, error) {
	p, ok := pbes2[alg]
	if !ok {
		return nil, errors.New("jose: not a PBES2 algorithm")
	}
	if p2c < 1 {
		return nil, errors.New("jose: PBES2 count must be positive")
	}
	salt := make([]byte, 0, len(alg)+1+len(p2s))
	salt = append(append(append(salt, alg...), 0), p2s...)
	return pbkdf2.Key(p.hash, string(password), salt, p2c, p.keyLen)
}
