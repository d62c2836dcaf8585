package jose

import (
	"encoding/base64"
	"errors"
	"strings"
)

// ErrSegment: a compact-serialization segment is not unpadded base64url.
var ErrSegment = errors.New("jose: segment is not unpadded base64url")

var rawURL = base64.RawURLEncoding.Strict()

// DecodeSegment decodes one compact-serialization segment strictly: the
// unpadded base64url alphabet only, canonical trailing bits, and no line
// breaks (encoding/base64 skips '\r' and '\n' silently, which would let two
// texts decode to one value).
func DecodeSegment(s string) ([]byte, error) {
	if strings.ContainsAny(s, "\r\n") {
		return nil, ErrSegment
	}
	b, err := rawURL.DecodeString(s)
	if err != nil {
		return nil, ErrSegment
	}
	return b, nil
}

// EncodeSegment encodes b as an unpadded base64url segment.
func EncodeSegment(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// SplitCompact splits a compact serialization into exactly n dot-separated
// segments (5 for a JWE, 3 for a JWS). It cuts at most n+1 pieces, so a
// value made of dots costs no more than a short one.
func SplitCompact(s string, n int) ([]string, bool) {
	if n < 1 {
		return nil, false
	}
	segs := strings.SplitN(s, ".", n+1)
	if len(segs) != n {
		return nil, false
	}
	return segs, true
}
