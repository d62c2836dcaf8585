package secret

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/flecht-dev/flecht/internal/attr"
)

// ENCRYPTED lives here rather than in attr: attr defines the Codec interface
// and knows nothing of keys; this package implements it. The dependency runs
// one way (secret imports attr), so there is no cycle and no hook to install,
// and attr stays free of crypto.

// Encrypted is the codec ENCRYPTED returns. On the wire the field is a
// flenc:jwe: token whose plaintext is the canonical JSON of the inner
// codec's wire value.
type Encrypted[T any] struct {
	inner         attr.Codec[T]
	scope         string
	readPlaintext bool
	fieldRuntime
}

// Option configures ENCRYPTED.
type Option func(*options)

type options struct {
	scope         string
	readPlaintext bool
	readUnsigned  bool
	keyring       *Keyring
	observer      Observer
	logger        *slog.Logger
}

// Scope binds tokens to a compartment (flenc_scope). A one-way ratchet: the
// field still reads unscoped tokens, so a scope can be added to a live field
// and swept in, but never dropped.
func Scope(s string) Option { return func(o *options) { o.scope = s } }

// ReadPlaintext accepts legacy plaintext during a migration, with a warning
// and a PlaintextRead per read. Remove it when the scan is clean.
func ReadPlaintext() Option { return func(o *options) { o.readPlaintext = true } }

// ReadUnsigned makes a SIGNED field accept an unsigned value during a
// migration, with a warning and an UnsignedRead per read. Remove it when
// every value is signed.
func ReadUnsigned() Option { return func(o *options) { o.readUnsigned = true } }

// WithKeyring binds the codec to kr instead of the process keyring (tools
// that hold a keyring of their own, tests).
func WithKeyring(kr *Keyring) Option { return func(o *options) { o.keyring = kr } }

// WithObserver binds the codec to o instead of the process observer.
func WithObserver(obs Observer) Option { return func(o *options) { o.observer = obs } }

// WithLogger sends the plaintext warning to l instead of slog.Default().
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// ENCRYPTED wraps inner so the field is stored as a token:
//
//	var APIKey = attr.New("api_key", secret.ENCRYPTED(attr.STR, secret.Scope("api_key")))
//
// It composes like any codec: attr.LIST(ENCRYPTED(attr.STR)) encrypts each
// element, ENCRYPTED(attr.RECORD) the whole object.
func ENCRYPTED[T any](inner attr.Codec[T], opts ...Option) Encrypted[T] {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	return Encrypted[T]{inner: inner, scope: o.scope, readPlaintext: o.readPlaintext, fieldRuntime: o.runtime()}
}

// Encode seals v under the sealing key of the field's scope
// (Keyring.SealingKid).
func (c Encrypted[T]) Encode(v T) (any, error) {
	payload, err := wirePayload(c.inner, v, c.scope)
	if err != nil {
		return nil, err
	}
	return c.resolveKeyring().Encrypt(payload, c.scope)
}

// Decode opens a token, or handles a non-token value by the plaintext rule:
// an error of KindPlaintext, or, with ReadPlaintext, the inner decode plus a
// warning and a PlaintextRead.
func (c Encrypted[T]) Decode(w any) (T, error) {
	var zero T
	if s, ok := w.(string); ok && IsEncrypted(s) {
		payload, kid, err := c.resolveKeyring().Decrypt(s, c.scope)
		if err != nil {
			return zero, err
		}
		inner, err := attr.ParseJSON(payload)
		if err != nil {
			return zero, &Error{Kind: KindMalformed, Kid: kid, Scope: c.scope, Detail: "decrypted payload is not JSON"}
		}
		v, err := c.inner.Decode(inner)
		var se *Error
		if errors.As(err, &se) {
			// A secret codec inside (SIGNED): its kind (unsigned,
			// bad_signature, …) is the reason, and an *Error never
			// carries the value.
			return zero, se
		}
		if err != nil {
			// Another codec's message may quote the value; keep its shape.
			return zero, &Error{Kind: KindMalformed, Kid: kid, Scope: c.scope, Detail: "decrypted payload does not fit " + c.inner.String()}
		}
		c.resolveObserver().Decrypted(c.scope, kid)
		return v, nil
	}
	if !c.readPlaintext {
		return zero, &Error{Kind: KindPlaintext, Scope: c.scope,
			Detail: "plaintext in a strict encrypted field: treat the value as compromised, rotate it, re-produce the record encrypted"}
	}
	c.resolveLogger().Warn("secret value read as legacy plaintext; migrate this record to ciphertext", "scope", c.scope)
	c.resolveObserver().PlaintextRead(c.scope)
	v, err := c.inner.Decode(w)
	if err != nil {
		return zero, &Error{Kind: KindMalformed, Scope: c.scope, Detail: "plaintext value does not fit " + c.inner.String()}
	}
	return v, nil
}

// String prints the declaration, e.g. ENCRYPTED(STR, scope="api_key").
func (c Encrypted[T]) String() string {
	var b strings.Builder
	b.WriteString("ENCRYPTED(")
	b.WriteString(c.inner.String())
	if c.scope != "" {
		fmt.Fprintf(&b, ", scope=%q", c.scope)
	}
	if c.readPlaintext {
		b.WriteString(", read_plaintext")
	}
	b.WriteString(")")
	return b.String()
}

// Scope is the declared scope ("" when unscoped).
func (c Encrypted[T]) Scope() string { return c.scope }

// ReadsPlaintext reports whether the field is in plaintext migration.
func (c Encrypted[T]) ReadsPlaintext() bool { return c.readPlaintext }

func (Encrypted[T]) sealed() {}

// InnerCodec is the wrapped codec (as any: its type varies with T), so
// tools can look inside, e.g. SignedOf for ENCRYPTED(SIGNED(…)).
func (c Encrypted[T]) InnerCodec() any { return c.inner }

// Sealed is implemented by every ENCRYPTED codec whatever its T, so tools
// (scan, sweep) can find encrypted fields and their scopes.
type Sealed interface {
	Scope() string
	ReadsPlaintext() bool
	InnerCodec() any
	sealed()
}

// SealedOf reports whether codec is an ENCRYPTED codec, and returns it.
func SealedOf(codec any) (Sealed, bool) {
	s, ok := codec.(Sealed)
	return s, ok
}

// EncryptValue returns the token for v in field a: the write-side boundary
// for a producer that builds its JSON without a record. Never assemble a
// token by hand.
func EncryptValue[T any](a attr.Attribute[T], v T) (string, error) {
	return encodeToken[Encrypted[T]](a, v, "an encrypted")
}

// encodeToken encodes v with a's codec, which must be a C: the token a
// secret codec writes is always a string.
func encodeToken[C attr.Codec[T], T any](a attr.Attribute[T], v T, kind string) (string, error) {
	c, ok := a.Codec().(C)
	if !ok {
		return "", &Error{Kind: KindMalformed, Detail: fmt.Sprintf("%s is not %s attribute", a, kind)}
	}
	w, err := c.Encode(v)
	if err != nil {
		return "", err
	}
	return w.(string), nil
}

// wirePayload is what a secret codec seals or signs for v: the canonical
// JSON of the inner codec's wire value. Its errors never quote v.
func wirePayload[T any](inner attr.Codec[T], v T, scope string) ([]byte, error) {
	w, err := inner.Encode(v)
	if err != nil {
		// The inner codec's message may quote the value; keep only its shape.
		return nil, &Error{Kind: KindMalformed, Scope: scope, Detail: "value does not fit " + inner.String()}
	}
	payload, err := attr.Marshal(w)
	if err != nil {
		return nil, &Error{Kind: KindMalformed, Scope: scope, Detail: "value has no JSON form"}
	}
	return payload, nil
}

// fieldRuntime is what a secret codec works with when it runs: the keyring,
// the observer and the logger its options bound, each nil one standing for
// the process-wide one, looked up at each use so that a codec declared at
// package level sees the keyring the process installs later.
type fieldRuntime struct {
	keyring  *Keyring
	observer Observer
	logger   *slog.Logger
}

func (o options) runtime() fieldRuntime {
	return fieldRuntime{keyring: o.keyring, observer: o.observer, logger: o.logger}
}

func (r fieldRuntime) resolveKeyring() *Keyring {
	if r.keyring != nil {
		return r.keyring
	}
	return Installed()
}

func (r fieldRuntime) resolveObserver() Observer {
	if r.observer != nil {
		return r.observer
	}
	return installedObserver()
}

func (r fieldRuntime) resolveLogger() *slog.Logger {
	if r.logger != nil {
		return r.logger
	}
	return slog.Default()
}
