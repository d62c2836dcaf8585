package secret

import (
	"crypto/ed25519"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/flecht-dev/flecht/internal/attr"
	"github.com/flecht-dev/flecht/internal/jose"
)

// A signed value: "flsig:jws:" + an RFC 7515 compact JWS of three base64url
// segments, protected header . payload . signature, the payload the
// canonical JSON of the value, the signature Ed25519 (64 bytes) over
// "header.payload". The header is exactly
// {"alg":"Ed25519","flenc_scope":S,"kid":K} (typ and cty tolerated, as for
// tokens): alg is the fully specified "Ed25519" of RFC 9864, never the
// polymorphic "EdDSA", and the scope is required, since a signature always
// names the compartment it vouches for.
const (
	SignedScheme = "flsig"                // any value under this scheme is signed-form
	SignedPrefix = SignedScheme + ":jws:" // the only envelope this reader understands
	algEd25519   = "Ed25519"
	sigSize      = ed25519.SignatureSize
)

// IsSigned reports whether v is signed-form: a string under the flsig:
// scheme (an unknown envelope included: it fails at verify, never passing
// as an unsigned value).
func IsSigned(v string) bool { return strings.HasPrefix(v, SignedScheme+":") }

// signedToken is a parsed, accepted, not yet verified flsig token.
type signedToken struct {
	TokenInfo
	input   string // "header.payload", what the signature covers
	payload []byte
	sig     []byte
}

// InspectSigned parses a signed value and applies its acceptance rule
// without a keyring, returning its signer kid and scope. Unverified: use it
// to classify, never to trust.
func InspectSigned(tok string) (TokenInfo, error) {
	t, err := parseSigned(tok)
	if err != nil {
		return TokenInfo{}, err
	}
	return t.TokenInfo, nil
}

func parseSigned(tok string) (*signedToken, error) {
	segs, err := compactSegments(tok, SignedScheme, "jws", 3)
	if err != nil {
		return nil, err
	}
	hdr, err := jose.DecodeSegment(segs[0])
	if err != nil {
		return nil, &Error{Kind: KindMalformed, Detail: "protected header is not " + b64Name}
	}
	info, err := acceptSignedHeader(hdr)
	if err != nil {
		return nil, refusedBefore(err, "the signature is checked")
	}
	payload, err := jose.DecodeSegment(segs[1])
	if err != nil {
		return nil, &Error{Kind: KindMalformed, Kid: info.Kid, TokenScope: info.Scope, Detail: "payload is not " + b64Name}
	}
	sig, err := jose.DecodeSegment(segs[2])
	if err != nil || len(sig) != sigSize {
		return nil, &Error{Kind: KindMalformed, Kid: info.Kid, TokenScope: info.Scope, Detail: fmt.Sprintf("signature must be %d bytes of %s", sigSize, b64Name)}
	}
	return &signedToken{TokenInfo: info, input: segs[0] + "." + segs[1], payload: payload, sig: sig}, nil
}

// acceptSignedHeader is the signed value's acceptance rule: exactly alg
// Ed25519, a non-empty kid and flenc_scope; typ and cty tolerated; crit,
// b64 (unencoded payloads), key-carrying members (jwk, jku, x5u, x5c, x5t,
// x5t#S256) and any other member refused.
func acceptSignedHeader(hdr []byte) (TokenInfo, error) {
	rejected := func(detail string, args ...any) error {
		return &Error{Kind: KindHeaderRejected, Detail: fmt.Sprintf(detail, args...)}
	}
	members, err := attr.Members(hdr)
	if err != nil || len(hdr) == 0 {
		return TokenInfo{}, &Error{Kind: KindMalformed, Detail: "protected header is not a JSON object"}
	}
	var alg string
	var info TokenInfo
	var kidSet, scopeSet bool
	for i, m := range members {
		for _, prev := range members[:i] {
			if prev.Key == m.Key {
				return TokenInfo{}, rejected("duplicate header member %s", Echo(m.Key, knownHeaders))
			}
		}
		var dst *string
		switch m.Key {
		case "alg":
			dst = &alg
		case "kid":
			dst, kidSet = &info.Kid, true
		case scopeM:
			dst, scopeSet = &info.Scope, true
		case "typ", "cty":
			dst = new(string)
		case "crit":
			return TokenInfo{}, rejected("critical extensions (crit) are not accepted")
		case "b64":
			return TokenInfo{}, rejected("unencoded payloads (b64) are not accepted")
		case "jwk", "jku", "x5u", "x5c", "x5t", "x5t#S256":
			return TokenInfo{}, rejected("header member %s would name a key; the signer is only ever the keyring's kid", Echo(m.Key, knownHeaders))
		default:
			return TokenInfo{}, rejected("header member %s is outside the flsig profile", Echo(m.Key, knownHeaders))
		}
		s, err := headerString(m)
		if err != nil {
			return TokenInfo{}, err
		}
		*dst = s
	}
	if alg != algEd25519 {
		return TokenInfo{}, rejected("alg %s is not accepted, only %s (never the polymorphic EdDSA)", Echo(alg, knownAlgs), algEd25519)
	}
	if !kidSet || info.Kid == "" {
		return TokenInfo{}, &Error{Kind: KindMalformed, Detail: "header has no kid"}
	}
	if !scopeSet || info.Scope == "" {
		return TokenInfo{}, &Error{Kind: KindMalformed, Kid: info.Kid, Detail: "a signed value's header must name its scope (flenc_scope)"}
	}
	return info, nil
}

// signedHeaderJSON writes the header as upstream does (sorted members).
func signedHeaderJSON(kid, scope string) []byte {
	var b strings.Builder
	b.WriteString(`{"alg":"Ed25519","flenc_scope":`)
	writeASCIIString(&b, scope)
	b.WriteString(`,"kid":`)
	writeASCIIString(&b, kid)
	b.WriteString("}")
	return []byte(b.String())
}

// Sign signs payload (the canonical JSON of a field's wire value) with the
// signing key of scope (flenc_signing[scope]) and returns the flsig:jws:
// token. No scope, or no signing key for it: KindNoSigningKey.
func (kr *Keyring) Sign(payload []byte, scope string) (string, error) {
	if kr == nil || kr.primary == "" {
		return "", &Error{Kind: KindNoKeyring, Scope: scope, Detail: "no keyring to sign with"}
	}
	if scope == "" {
		return "", &Error{Kind: KindNoSigningKey, Detail: "a signature always names its scope; none given"}
	}
	if !utf8.ValidString(scope) {
		return "", &Error{Kind: KindMalformed, Detail: "scope is not valid UTF-8"}
	}
	kid, err := kr.SigningKid(scope)
	if err != nil {
		return "", err
	}
	k := kr.byKid[kid]
	if k.mismatch {
		return "", k.mismatchError()
	}
	protected, err := protectedHeader(signedHeaderJSON(kid, scope), kid)
	if err != nil {
		return "", err
	}
	input := protected + "." + b64url.EncodeToString(payload)
	sig := ed25519.Sign(k.edpriv, []byte(input))
	return SignedPrefix + input + "." + b64url.EncodeToString(sig), nil
}

// Verify checks a signed value read through a field of scope and returns
// its payload and what its header says (authentic when err is nil).
//
// Order: no keyring (no_keyring); no scope (scope_violation: a signed value
// is read in a scope); every keyless check, InspectSigned's (malformed,
// header_rejected); the signer: its kid must be an Ed25519 key of the
// keyring (unknown_signer otherwise, saying when it names a key of another
// kind); the signature (bad_signature); the stamped scope must equal scope
// exactly, there is no ratchet (scope_violation); the signer's binding
// must cover scope (key_binding).
func (kr *Keyring) Verify(tok, scope string) (payload []byte, info TokenInfo, err error) {
	if kr == nil {
		return nil, TokenInfo{}, &Error{Kind: KindNoKeyring, Scope: scope, Detail: "no keyring to verify with"}
	}
	if scope == "" {
		return nil, TokenInfo{}, &Error{Kind: KindScopeViolation, Detail: "a signed value is read in a scope; none given"}
	}
	t, err := parseSigned(tok)
	if err != nil {
		if e, ok := err.(*Error); ok {
			e.Scope = scope
		}
		return nil, TokenInfo{}, err
	}
	fail := func(kind Kind, detail string) error {
		return &Error{Kind: kind, Kid: t.Kid, Scope: scope, TokenScope: t.Scope, Detail: detail}
	}
	k, ok := kr.byKid[t.Kid]
	if !ok {
		return nil, t.TokenInfo, fail(KindUnknownSigner, "the keyring holds no signing key under this kid")
	}
	if k.typ != TypeEd25519 {
		return nil, t.TokenInfo, fail(KindUnknownSigner, fmt.Sprintf("the kid names an %s key, not an Ed25519 signer", k.typ))
	}
	if beforeOpen != nil {
		beforeOpen()
	}
	if !ed25519.Verify(ed25519.PublicKey(k.public), []byte(t.input), t.sig) {
		return nil, t.TokenInfo, fail(KindBadSignature, "the signature does not verify under this signer's public half: tampered, or signed by another key")
	}
	if t.Scope != scope {
		return nil, t.TokenInfo, fail(KindScopeViolation, "signed for another scope (a signature's scope must match exactly)")
	}
	if !k.bound(scope) {
		return nil, t.TokenInfo, fail(KindKeyBinding, fmt.Sprintf("signer is bound to scopes %q, not to this one", k.scopes))
	}
	return t.payload, t.TokenInfo, nil
}

// Header is what the protected header of a flenc or flsig token says,
// without a key: UNAUTHENTICATED, for `secrets inspect` and tooling.
type Header struct {
	Envelope string `json:"envelope"`              // "flenc:jwe" or "flsig:jws"
	Alg      string `json:"alg"`                   // dir, ECDH-ES+A256KW or Ed25519
	Enc      string `json:"enc,omitempty"`         // A256GCM for a flenc token
	Kid      string `json:"kid"`                   // the sealing or signing kid
	Scope    string `json:"flenc_scope,omitempty"` // the stamped scope
}

// InspectHeader parses a flenc or flsig token keylessly under its
// acceptance rule (Inspect, InspectSigned) and returns its header. Any other
// value is KindMalformed.
func InspectHeader(tok string) (Header, error) {
	switch {
	case IsEncrypted(tok):
		p, err := ParseEncrypted(tok)
		if err != nil {
			return Header{}, err
		}
		return p.Header(), nil
	case IsSigned(tok):
		info, err := InspectSigned(tok)
		if err != nil {
			return Header{}, err
		}
		return Header{Envelope: "flsig:jws", Alg: algEd25519, Kid: info.Kid, Scope: info.Scope}, nil
	}
	return Header{}, &Error{Kind: KindMalformed, Detail: "not a flenc: or flsig: token"}
}
