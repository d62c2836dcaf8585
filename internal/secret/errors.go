package secret

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Kind tells secret failures apart. The strings are stable: the CLI prints
// them and emits {"error":{"kind":"unknown_kid","kid":"…"}}, and runbooks
// match on them.
type Kind string

const (
	// KindMalformed: not a well-formed flenc:jwe: token (wrong envelope,
	// segment count, base64, header JSON, IV or tag length, missing kid), or
	// an authentic payload that is not the inner codec's JSON.
	KindMalformed Kind = "malformed"
	// KindHeaderRejected: the header fails the acceptance rule (alg other
	// than dir, enc other than A256GCM, zip, crit, or any member outside the
	// profile). Checked before any cryptography.
	KindHeaderRejected Kind = "header_rejected"
	// KindUnknownKid: the token's kid is not in the keyring (the key is
	// missing here).
	KindUnknownKid Kind = "unknown_kid"
	// KindTagMismatch: the kid is known but GCM authentication failed: the
	// same kid bound to different key bytes, or a tampered token.
	KindTagMismatch Kind = "tag_mismatch"
	// KindScopeViolation: an authentic token read through a field of another
	// scope, or a scoped token through an unscoped field.
	KindScopeViolation Kind = "scope_violation"
	// KindPlaintext: a plaintext value in a strict encrypted field (a pasted
	// secret: treat it as compromised).
	KindPlaintext Kind = "plaintext"
	// KindNoKeyring: an encrypted field was used with no keyring installed.
	KindNoKeyring Kind = "no_keyring"
	// KindKeyringInvalid: a keyring document that does not validate.
	KindKeyringInvalid Kind = "keyring_invalid"
	// KindKeyringConflict: a keyring operation that would break the
	// keyring's rules (duplicate kid, removing the primary, a second
	// different process keyring).
	KindKeyringConflict Kind = "keyring_conflict"
)

// Kinds lists every kind, for documentation and exhaustive tests.
var Kinds = []Kind{
	KindMalformed, KindHeaderRejected, KindUnknownKid, KindTagMismatch,
	KindScopeViolation, KindPlaintext, KindNoKeyring, KindKeyringInvalid,
	KindKeyringConflict,
}

// Error is every failure of this package. It carries what is known (kid,
// scopes) and never key bytes or plaintext: messages may land in logs and
// dead-letter topics.
type Error struct {
	Kind       Kind
	Kid        string // the token's kid or the kid operated on, when known
	Scope      string // the field's declared scope ("" when unscoped)
	TokenScope string // the scope stamped in the token, when read
	Detail     string // a short human explanation, safe to print
	Err        error  // an underlying cause (never carrying secrets)
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("secret: ")
	b.WriteString(string(e.Kind))
	if e.Kid != "" {
		fmt.Fprintf(&b, " kid=%q", e.Kid)
	}
	if e.Scope != "" {
		fmt.Fprintf(&b, " scope=%q", e.Scope)
	}
	if e.TokenScope != "" {
		fmt.Fprintf(&b, " token_scope=%q", e.TokenScope)
	}
	if e.Detail != "" {
		b.WriteString(": ")
		b.WriteString(e.Detail)
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// Is makes errors.Is(err, secret.ErrUnknownKid) match any *Error of that
// kind, whatever its kid or scope.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Kind == e.Kind && t.Kid == "" && t.Scope == "" && t.TokenScope == "" && t.Detail == "" && t.Err == nil
}

// MarshalJSON is the machine form the CLI emits under "error".
func (e *Error) MarshalJSON() ([]byte, error) {
	type wire struct {
		Kind       Kind   `json:"kind"`
		Kid        string `json:"kid,omitempty"`
		Scope      string `json:"scope,omitempty"`
		TokenScope string `json:"token_scope,omitempty"`
		Message    string `json:"message"`
	}
	return json.Marshal(wire{e.Kind, e.Kid, e.Scope, e.TokenScope, e.Error()})
}

// Sentinels for errors.Is, one per kind.
var (
	ErrMalformed       = &Error{Kind: KindMalformed}
	ErrHeaderRejected  = &Error{Kind: KindHeaderRejected}
	ErrUnknownKid      = &Error{Kind: KindUnknownKid}
	ErrTagMismatch     = &Error{Kind: KindTagMismatch}
	ErrScopeViolation  = &Error{Kind: KindScopeViolation}
	ErrPlaintext       = &Error{Kind: KindPlaintext}
	ErrNoKeyring       = &Error{Kind: KindNoKeyring}
	ErrKeyringInvalid  = &Error{Kind: KindKeyringInvalid}
	ErrKeyringConflict = &Error{Kind: KindKeyringConflict}
)

// KindOf returns the kind of the first *Error in err's chain, or "".
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return ""
}
