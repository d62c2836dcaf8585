package secret

import (
	"fmt"
	"strings"

	"github.com/flecht-dev/flecht/internal/attr"
)

// Signed is the codec SIGNED returns. On the wire the field is a flsig:jws:
// token whose payload is the canonical JSON of the inner codec's wire
// value, signed by the keyring's signing key for the field's scope.
type Signed[T any] struct {
	inner        attr.Codec[T]
	scope        string
	readUnsigned bool
	fieldRuntime
}

// SIGNED wraps inner so the field is stored as an Ed25519-signed value that
// vouches for who wrote it:
//
//	var Endpoint = attr.New("endpoint", secret.SIGNED(attr.STR, "billing"))
//
// scope is required: a signature names the compartment it vouches for, and
// the field accepts only values signed for exactly that scope by a signer
// bound to it (an empty scope fails every Encode and Decode with
// KindNoSigningKey / KindScopeViolation). Options: ReadUnsigned (migration),
// WithKeyring, WithObserver, WithLogger; Scope and ReadPlaintext do not
// apply. The recommended composition is sign-then-encrypt,
// ENCRYPTED(SIGNED(inner, s), Scope(s)): the signer's kid then stays inside
// the ciphertext.
func SIGNED[T any](inner attr.Codec[T], scope string, opts ...Option) Signed[T] {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	return Signed[T]{inner: inner, scope: scope, readUnsigned: o.readUnsigned, fieldRuntime: o.runtime()}
}

// Encode signs v with the scope's signing key.
func (c Signed[T]) Encode(v T) (any, error) {
	payload, err := wirePayload(c.inner, v, c.scope)
	if err != nil {
		return nil, err
	}
	return c.resolveKeyring().Sign(payload, c.scope)
}

// Decode verifies a signed value, or handles any other value by the
// unsigned rule: an error of KindUnsigned, or, with ReadUnsigned, the inner
// decode plus a warning and an UnsignedRead.
func (c Signed[T]) Decode(w any) (T, error) {
	var zero T
	if s, ok := w.(string); ok && IsSigned(s) {
		payload, info, err := c.resolveKeyring().Verify(s, c.scope)
		if err != nil {
			return zero, err
		}
		inner, err := attr.ParseJSON(payload)
		if err != nil {
			return zero, &Error{Kind: KindMalformed, Kid: info.Kid, Scope: c.scope, Detail: "signed payload is not JSON"}
		}
		v, err := c.inner.Decode(inner)
		if err != nil {
			return zero, &Error{Kind: KindMalformed, Kid: info.Kid, Scope: c.scope, Detail: "signed payload does not fit " + c.inner.String()}
		}
		c.resolveObserver().Verified(c.scope, info.Kid)
		return v, nil
	}
	if !c.readUnsigned {
		return zero, &Error{Kind: KindUnsigned, Scope: c.scope,
			Detail: "unsigned value in a SIGNED field: re-produce the record signed (or read unsigned values during a migration)"}
	}
	c.resolveLogger().Warn("signed field read an unsigned value; migrate this record to a signed one", "scope", c.scope)
	c.resolveObserver().UnsignedRead(c.scope)
	v, err := c.inner.Decode(w)
	if err != nil {
		return zero, &Error{Kind: KindMalformed, Scope: c.scope, Detail: "unsigned value does not fit " + c.inner.String()}
	}
	return v, nil
}

// String prints the declaration, e.g. SIGNED(STR, scope="billing").
func (c Signed[T]) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "SIGNED(%s, scope=%q", c.inner.String(), c.scope)
	if c.readUnsigned {
		b.WriteString(", read_unsigned")
	}
	b.WriteString(")")
	return b.String()
}

// Scope is the declared scope.
func (c Signed[T]) Scope() string { return c.scope }

// ReadsUnsigned reports whether the field is in unsigned migration.
func (c Signed[T]) ReadsUnsigned() bool { return c.readUnsigned }

func (Signed[T]) signed() {}

// SignedField is implemented by every SIGNED codec whatever its T, so tools
// (scan, sweep, --encrypt-plaintext) can find signed fields.
type SignedField interface {
	Scope() string
	ReadsUnsigned() bool
	signed()
}

// SignedOf reports whether codec is a SIGNED codec, or an ENCRYPTED codec
// directly wrapping one (ENCRYPTED(SIGNED(…))), and returns the SIGNED one.
func SignedOf(codec any) (SignedField, bool) {
	if s, ok := codec.(SignedField); ok {
		return s, true
	}
	if e, ok := codec.(Sealed); ok {
		s, ok := e.InnerCodec().(SignedField)
		return s, ok
	}
	return nil, false
}

// SignValue returns the flsig token for v in SIGNED field a: the write-side
// boundary for a producer that builds its JSON without a record. For an
// ENCRYPTED(SIGNED(…)) field use EncryptValue.
func SignValue[T any](a attr.Attribute[T], v T) (string, error) {
	return encodeToken[Signed[T]](a, v, "a signed")
}
