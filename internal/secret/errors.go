package secret

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Kind tells secret failures apart. The strings are stable: the CLI prints
// them and emits {"error":{"kind":"unknown_kid","kid":"…"}}, and runbooks
// match on them.
type Kind string

const (
	// KindMalformed: not a well-formed flenc:jwe: or flsig:jws: token
	// (wrong envelope, segment count, base64, header JSON, IV, tag,
	// encrypted key, epk or signature length, missing kid or signed scope,
	// a low-order epk), or an authentic payload that is not the inner
	// codec's JSON.
	KindMalformed Kind = "malformed"
	// KindHeaderRejected: the header fails the acceptance rule: for a flenc
	// token exactly alg dir or ECDH-ES+A256KW with enc A256GCM, and the
	// profile the kid's KEY KIND picks (dir for oct, ECDH-ES+A256KW for
	// X25519); for a flsig token exactly alg Ed25519; zip, crit, apu, apv,
	// b64, key-carrying members (jwk, jku, x5*) and any member outside the
	// profile refused. Checked before any cryptography.
	KindHeaderRejected Kind = "header_rejected"
	// KindUnknownKid: the token's kid is not in the keyring (the key is
	// missing here), or names an Ed25519 signing key, which opens no token
	// (the detail says so).
	KindUnknownKid Kind = "unknown_kid"
	// KindTagMismatch: the kid is known but authentication failed (GCM tag,
	// or for ECDH-ES the key unwrap): the same kid bound to different key
	// bytes, or a tampered token.
	KindTagMismatch Kind = "tag_mismatch"
	// KindScopeViolation: an authentic token read through a field of another
	// scope, or a scoped token through an unscoped field; a signed value
	// whose stamped scope is not exactly the field's (no ratchet), or read
	// with no scope.
	KindScopeViolation Kind = "scope_violation"
	// KindPlaintext: a plaintext value in a strict encrypted field (a pasted
	// secret: treat it as compromised).
	KindPlaintext Kind = "plaintext"
	// KindNoKeyring: an encrypted field was used with no keyring installed.
	KindNoKeyring Kind = "no_keyring"
	// KindKeyringInvalid: a keyring document that does not validate (the
	// detail names the kid or scope), a protected file's header outside
	// its profile, or a key used whose private half does not match its
	// public half.
	KindKeyringInvalid Kind = "keyring_invalid"
	// KindKeyringConflict: a keyring operation that would break the
	// keyring's rules (duplicate kid, removing a key a role names, an edit
	// whose result upstream would refuse to load, exporting the public half
	// of an oct key, a second different process keyring).
	KindKeyringConflict Kind = "keyring_conflict"
	// KindKeyringPassword: a password-protected keyring file that does not
	// open: wrong password or damaged file, a password shorter than 14
	// bytes, or no password given. The password is never echoed.
	KindKeyringPassword Kind = "keyring_password"
	// KindKeyBinding: a key's flenc_scopes binding does not cover the
	// value's scope (or "no scope"): on seal, the scope's sealing key is
	// bound elsewhere; on open, the token's stamped scope is outside its
	// key's binding; on verify, the signer is not bound to the scope.
	KindKeyBinding Kind = "key_binding"
	// KindSealOnly: the token's kid is an X25519 recipient of which the
	// keyring holds only the public half: it can seal, not open.
	KindSealOnly Kind = "seal_only"
	// KindBadSignature: a signed value whose Ed25519 signature does not
	// verify under its signer's public half (tampered, or another key's).
	KindBadSignature Kind = "bad_signature"
	// KindUnknownSigner: a signed value's kid is not an Ed25519 key of the
	// keyring (absent, or a key of another kind).
	KindUnknownSigner Kind = "unknown_signer"
	// KindUnsigned: a value that is not a flsig: token in a SIGNED field
	// that does not read unsigned values.
	KindUnsigned Kind = "unsigned"
	// KindNoSigningKey: signing a value of a scope for which the keyring
	// names no signing key (flenc_signing), or of no scope.
	KindNoSigningKey Kind = "no_signing_key"
)

// Kinds lists every kind, for documentation and exhaustive tests.
var Kinds = []Kind{
	KindMalformed, KindHeaderRejected, KindUnknownKid, KindTagMismatch,
	KindScopeViolation, KindPlaintext, KindNoKeyring, KindKeyringInvalid,
	KindKeyringConflict, KindKeyringPassword, KindKeyBinding, KindSealOnly,
	KindBadSignature, KindUnknownSigner, KindUnsigned, KindNoSigningKey,
}

// Error is every failure of this package. It carries what is known (kid,
// scopes) and never key bytes or plaintext: messages may land in logs and
// dead-letter topics.
type Error struct {
	Kind       Kind
	Kid        string // the token's kid or the kid operated on, when known
	Scope      string // the field's declared scope ("" when unscoped)
	TokenScope string // the scope stamped in the token, when read
	Detail     string // a short human explanation, safe to print (see Echo)
	Err        error  // an underlying cause (never carrying secrets)
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("secret: ")
	b.WriteString(string(e.Kind))
	if e.Kid != "" {
		fmt.Fprintf(&b, " kid=%q", Clip(e.Kid))
	}
	if e.Scope != "" {
		fmt.Fprintf(&b, " scope=%q", e.Scope)
	}
	if e.TokenScope != "" {
		fmt.Fprintf(&b, " token_scope=%q", Clip(e.TokenScope))
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

// refusedBefore adds to a header refusal what it was refused before, once,
// in words that fit a token (decryption) or a signed value (the signature
// check): the CLI prints the detail as it is.
func refusedBefore(err error, what string) error {
	if e, ok := err.(*Error); ok && e.Kind == KindHeaderRejected && !strings.Contains(e.Detail, "(refused before") {
		e.Detail += " (refused before " + what + ")"
	}
	return err
}

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
	ErrKeyringPassword = &Error{Kind: KindKeyringPassword}
	ErrKeyBinding      = &Error{Kind: KindKeyBinding}
	ErrSealOnly        = &Error{Kind: KindSealOnly}
	ErrBadSignature    = &Error{Kind: KindBadSignature}
	ErrUnknownSigner   = &Error{Kind: KindUnknownSigner}
	ErrUnsigned        = &Error{Kind: KindUnsigned}
	ErrNoSigningKey    = &Error{Kind: KindNoSigningKey}
)

// KindOf returns the kind of the first *Error in err's chain, or "".
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return ""
}

// The echo rule, the one rule for text taken from a value into a message.
// Such text (an envelope name, a header's alg, enc or member name) may be a
// secret pasted after a stray "flenc:", and messages reach logs, dead-letter
// topics and CI output. It is named only when it is an identifier the
// message expects, from a fixed list, and short and tame (safeIdent);
// otherwise only its length is given.
var safeIdent = regexp.MustCompile(`^[A-Za-z0-9._+#-]{1,20}$`)

// Known identifiers, by what a message is about.
var (
	// knownEnvelopes are serialisations a future or foreign writer might
	// put after "flenc:"; this reader knows only jwe.
	knownEnvelopes = idents("jwe", "jws", "jwt", "cose", "cbor")
	// knownAlgs are the JOSE "alg" values (RFC 7518 and the registry).
	knownAlgs = idents("none", "dir", "HS256", "HS384", "HS512", "RS256", "RS384", "RS512",
		"ES256", "ES384", "ES512", "ES256K", "PS256", "PS384", "PS512", "EdDSA", "Ed25519", "Ed448",
		"RSA1_5", "RSA-OAEP", "RSA-OAEP-256", "RSA-OAEP-384", "RSA-OAEP-512",
		"A128KW", "A192KW", "A256KW", "A128GCMKW", "A192GCMKW", "A256GCMKW",
		"ECDH-ES", "ECDH-ES+A128KW", "ECDH-ES+A192KW", "ECDH-ES+A256KW",
		"PBES2-HS256+A128KW", "PBES2-HS384+A192KW", "PBES2-HS512+A256KW")
	// knownEncs are the JOSE "enc" values.
	knownEncs = idents("A128CBC-HS256", "A192CBC-HS384", "A256CBC-HS512", "A128GCM", "A192GCM", "A256GCM")
	// knownHeaders are the registered JOSE header parameter names.
	knownHeaders = idents("alg", "enc", "zip", "jku", "jwk", "kid", "x5u", "x5c", "x5t", "x5t#S256",
		"typ", "cty", "crit", "epk", "apu", "apv", "iv", "tag", "p2s", "p2c", "b64", "url", "nonce",
		"ppt", "svt", "iss", "sub", "aud", scopeM)
)

func idents(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// Echo renders s for a message under the echo rule: quoted when known
// holds it and it is a tame identifier, else "(N chars)".
func Echo(s string, known map[string]bool) string {
	if known[s] && safeIdent.MatchString(s) {
		return strconv.Quote(s)
	}
	return fmt.Sprintf("(%d chars)", utf8.RuneCountInString(s))
}

// clipLimit is the longest kid `keys add` creates: a longer one was chosen
// by whoever wrote the token.
const clipLimit = MaxKidLen

// Clip keeps a kid or scope from a token header short in messages, cut at
// a rune boundary and marked with "…". The structured fields (Error.Kid,
// the JSON "kid") keep it whole for machines.
func Clip(s string) string {
	if len(s) <= clipLimit {
		return s
	}
	cut := clipLimit
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
