package secret

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/flecht-dev/flecht/internal/attr"
)

// The token: "flenc:jwe:" + an RFC 7516 compact JWE of five base64url
// segments, protected header . (empty) encrypted key . IV . ciphertext . tag,
// under alg=dir + enc=A256GCM with the protected header's ASCII as AAD.
const (
	Scheme  = "flenc"          // any value under this scheme is ciphertext-form
	Prefix  = Scheme + ":jwe:" // the only envelope this reader understands
	ivSize  = 12               // 96-bit GCM nonce
	tagLen  = 16               // 128-bit GCM tag
	maxHdr  = 4096             // a header segment larger than this is not ours
	scopeM  = "flenc_scope"    // optional protected-header member
	algDir  = "dir"            // the only accepted alg
	encGCM  = "A256GCM"        // the only accepted enc
	b64Name = "unpadded base64url"
)

var b64url = base64.RawURLEncoding.Strict()

// IsEncrypted reports whether v is ciphertext-form: a string under the flenc:
// scheme. Classification is by scheme alone; an unknown envelope such as
// flenc:cbor: is still ciphertext-form and fails at decode, never passing as
// plaintext.
func IsEncrypted(v string) bool { return strings.HasPrefix(v, Scheme+":") }

// TokenInfo is what a token's header says, readable without a key.
type TokenInfo struct {
	Kid   string `json:"kid"`
	Scope string `json:"scope,omitempty"` // flenc_scope, "" when unscoped
}

// token is a parsed, accepted, not yet authenticated token.
type token struct {
	TokenInfo
	protected string // the header segment as sent: the AAD
	iv        []byte
	sealed    []byte // ciphertext || tag, the form cipher.AEAD.Open takes
}

// Inspect parses a token and applies the acceptance rule without a keyring,
// returning its kid and scope. The header is not authenticated until a
// decrypt: use it to classify, never to trust.
func Inspect(tok string) (TokenInfo, error) {
	t, err := parseToken(tok)
	if err != nil {
		return TokenInfo{}, err
	}
	return t.TokenInfo, nil
}

// parseToken does every check that needs no key, in the order that keeps the
// acceptance rule ahead of any cryptographic work: envelope, shape, header
// (alg/enc/zip/crit/unknown members), kid, then the binary segments.
func parseToken(tok string) (*token, error) {
	malformed := func(detail string, args ...any) error {
		return &Error{Kind: KindMalformed, Detail: fmt.Sprintf(detail, args...)}
	}
	if !IsEncrypted(tok) {
		return nil, malformed("not a %s: value", Scheme)
	}
	envelope, compact, ok := strings.Cut(tok[len(Scheme)+1:], ":")
	if !ok && envelope == "jwe" {
		return nil, malformed("no compact JWE after %q", Scheme+":jwe")
	}
	if !ok || envelope != "jwe" {
		return nil, malformed("unknown %s envelope %s, this reader knows only jwe", Scheme, Echo(envelope, knownEnvelopes))
	}
	// SplitN bounds the work on a value made of dots.
	segs := strings.SplitN(compact, ".", 6)
	if len(segs) != 5 {
		return nil, malformed("a compact JWE has 5 segments")
	}
	if len(segs[0]) > maxHdr {
		return nil, malformed("protected header longer than %d characters", maxHdr)
	}
	hdr, err := b64url.DecodeString(segs[0])
	if err != nil {
		return nil, malformed("protected header is not %s", b64Name)
	}
	info, err := acceptHeader(hdr)
	if err != nil {
		return nil, err
	}
	if segs[1] != "" {
		return nil, &Error{Kind: KindMalformed, Kid: info.Kid, Detail: "alg dir carries no encrypted key, but the segment is not empty"}
	}
	iv, err := b64url.DecodeString(segs[2])
	if err != nil || len(iv) != ivSize {
		return nil, &Error{Kind: KindMalformed, Kid: info.Kid, Detail: fmt.Sprintf("IV must be %d bytes of %s", ivSize, b64Name)}
	}
	// ciphertext || tag in one buffer, the form cipher.AEAD.Open takes.
	sealed := make([]byte, b64url.DecodedLen(len(segs[3]))+b64url.DecodedLen(len(segs[4])))
	nct, err := b64url.Decode(sealed, []byte(segs[3]))
	if err != nil {
		return nil, &Error{Kind: KindMalformed, Kid: info.Kid, Detail: "ciphertext is not " + b64Name}
	}
	ntag, err := b64url.Decode(sealed[nct:], []byte(segs[4]))
	if err != nil || ntag != tagLen {
		return nil, &Error{Kind: KindMalformed, Kid: info.Kid, Detail: fmt.Sprintf("tag must be %d bytes of %s", tagLen, b64Name)}
	}
	return &token{TokenInfo: info, protected: segs[0], iv: iv, sealed: sealed[:nct+ntag]}, nil
}

// acceptHeader is the acceptance rule (SPEC §9): exactly alg=dir and
// enc=A256GCM; zip, crit and any member outside the profile rejected. It runs
// on the decoded header alone, so a PBES2 header with an enormous p2c costs
// a JSON parse and nothing more.
func acceptHeader(hdr []byte) (TokenInfo, error) {
	rejected := func(detail string, args ...any) error {
		return &Error{Kind: KindHeaderRejected, Detail: fmt.Sprintf(detail, args...)}
	}
	members, err := attr.Members(hdr)
	if err != nil || len(hdr) == 0 {
		return TokenInfo{}, &Error{Kind: KindMalformed, Detail: "protected header is not a JSON object"}
	}
	var alg, enc string
	var info TokenInfo
	var kidSet, scopeSet bool
	for i, m := range members {
		for _, prev := range members[:i] {
			if prev.Key == m.Key {
				// RFC 7515 §5.2: duplicate header names are rejected, so
				// that two parsers cannot read two different headers.
				return TokenInfo{}, rejected("duplicate header member %s", Echo(m.Key, knownHeaders))
			}
		}
		var dst *string
		switch m.Key {
		case "alg":
			dst = &alg
		case "enc":
			dst = &enc
		case "kid":
			dst, kidSet = &info.Kid, true
		case scopeM:
			dst, scopeSet = &info.Scope, true
		case "typ", "cty":
			dst = new(string) // allowed, checked for type, unused
		case "zip":
			return TokenInfo{}, rejected("compression (zip) is not accepted")
		case "crit":
			return TokenInfo{}, rejected("critical extensions (crit) are not accepted")
		default:
			return TokenInfo{}, rejected("header member %s is outside the flenc profile", Echo(m.Key, knownHeaders))
		}
		s, ok := jsonString(m.Value)
		if !ok {
			if m.Key == "kid" || m.Key == scopeM {
				return TokenInfo{}, &Error{Kind: KindMalformed, Detail: fmt.Sprintf("header %q must be a string", m.Key)}
			}
			return TokenInfo{}, rejected("header %q must be a string", m.Key)
		}
		*dst = s
	}
	if alg != algDir {
		return TokenInfo{}, rejected("alg %s is not accepted, only %s", Echo(alg, knownAlgs), algDir)
	}
	if enc != encGCM {
		return TokenInfo{}, rejected("enc %s is not accepted, only %s", Echo(enc, knownEncs), encGCM)
	}
	if !kidSet || info.Kid == "" {
		return TokenInfo{}, &Error{Kind: KindMalformed, Detail: "header has no kid"}
	}
	if scopeSet && info.Scope == "" {
		// No writer stamps an empty scope; a token claiming one is not ours.
		return TokenInfo{}, &Error{Kind: KindMalformed, Kid: info.Kid, Detail: "header has an empty flenc_scope"}
	}
	return info, nil
}

// jsonString decodes a JSON string value; false for any other JSON type.
func jsonString(raw []byte) (string, bool) {
	if len(raw) == 0 || raw[0] != '"' {
		return "", false
	}
	if v, err := attr.ParseJSON(raw); err == nil {
		s, ok := v.(string)
		return s, ok
	}
	return "", false
}

// beforeOpen, when set by a test, runs just before every AEAD open: the
// proof that rejected tokens never reach the cipher.
var beforeOpen func()

// Encrypt seals payload (the JSON encoding of a field's wire value) under the
// primary key, stamping scope when non-empty.
func (kr *Keyring) Encrypt(payload []byte, scope string) (string, error) {
	if kr == nil || kr.primary == "" {
		return "", &Error{Kind: KindNoKeyring, Scope: scope, Detail: "no keyring to encrypt with"}
	}
	if !utf8.ValidString(scope) {
		// The header must carry exactly the scope a reader compares with.
		return "", &Error{Kind: KindMalformed, Detail: "scope is not valid UTF-8"}
	}
	k := kr.byKid[kr.primary]
	protected := b64url.EncodeToString(headerJSON(k.kid, scope))
	if len(protected) > maxHdr {
		// Found by FuzzDecrypt: a token no reader would accept must not be
		// written.
		return "", &Error{Kind: KindMalformed, Kid: k.kid, Detail: fmt.Sprintf(
			"kid and scope make a protected header of %d characters; readers accept at most %d", len(protected), maxHdr)}
	}
	iv := make([]byte, ivSize)
	if _, err := rand.Read(iv); err != nil {
		return "", err
	}
	sealed := k.aead.Seal(nil, iv, payload, []byte(protected))
	ct, tag := sealed[:len(sealed)-tagLen], sealed[len(sealed)-tagLen:]
	var b strings.Builder
	b.Grow(len(Prefix) + len(protected) + 2 + 16 + len(ct)*4/3 + 4 + 22 + 2)
	b.WriteString(Prefix)
	b.WriteString(protected)
	b.WriteString("..")
	b.WriteString(b64url.EncodeToString(iv))
	b.WriteByte('.')
	b.WriteString(b64url.EncodeToString(ct))
	b.WriteByte('.')
	b.WriteString(b64url.EncodeToString(tag))
	return b.String(), nil
}

// Decrypt opens a token read through a field of the given scope ("" for an
// unscoped field) and returns the payload and the kid that opened it.
//
// Order: no keyring, then every keyless check (malformed, header_rejected),
// then the kid (unknown_kid), then GCM (tag_mismatch), then the scope
// ratchet on the now authentic header (scope_violation): a scoped field
// accepts its own scope and unscoped tokens; an unscoped field accepts only
// unscoped tokens.
func (kr *Keyring) Decrypt(tok, scope string) (payload []byte, kid string, err error) {
	payload, info, err := kr.Open(tok, scope)
	return payload, info.Kid, err
}

// Open is Decrypt that also returns what the token's header says (its kid
// and flenc_scope, authenticated when err is nil), from the one parse: a
// scan or sweep needs both for every token. The checks, their order and the
// errors are Decrypt's; info is empty when the token does not parse.
func (kr *Keyring) Open(tok, scope string) (payload []byte, info TokenInfo, err error) {
	if kr == nil {
		return nil, TokenInfo{}, &Error{Kind: KindNoKeyring, Scope: scope, Detail: "no keyring to decrypt with"}
	}
	t, err := parseToken(tok)
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
		return nil, t.TokenInfo, fail(KindUnknownKid, "the keyring does not hold this kid")
	}
	if beforeOpen != nil {
		beforeOpen()
	}
	payload, err = k.aead.Open(nil, t.iv, t.sealed, []byte(t.protected))
	if err != nil {
		return nil, t.TokenInfo, fail(KindTagMismatch, "authentication failed: wrong key bytes for this kid, or a tampered token")
	}
	if why := ratchet(scope, t.Scope); why != "" {
		return nil, t.TokenInfo, fail(KindScopeViolation, why)
	}
	return payload, t.TokenInfo, nil
}

// ratchet is the scope ratchet: why a field of scope field refuses a token
// stamped with scope token, or "" when it accepts it. A scoped field accepts
// its own scope and unscoped tokens (the upgrade path); an unscoped field
// only unscoped tokens.
func ratchet(field, token string) string {
	switch {
	case field != "" && token != "" && token != field:
		return "token belongs to another scope"
	case field == "" && token != "":
		return "scoped token in an unscoped field (a scope cannot be dropped)"
	}
	return ""
}

// CheckScope applies the scope ratchet to what a token's header says, for a
// field of scope fieldScope, without a key: a scan without a keyring still
// sees a token in the wrong field. The header is unauthenticated, so passing
// proves nothing; a refusal is one the field makes with any keyring (an
// authentic token is refused by the ratchet, an inauthentic one earlier).
// It returns the *Error itself (nil when the header passes), for reports
// that keep it as one.
func CheckScope(info TokenInfo, fieldScope string) *Error {
	if why := ratchet(fieldScope, info.Scope); why != "" {
		return &Error{Kind: KindScopeViolation, Kid: info.Kid, Scope: fieldScope, TokenScope: info.Scope,
			Detail: why + " (by its header, unauthenticated without a keyring)"}
	}
	return nil
}

// Reencrypt decrypts with the kid the token names and seals the same payload
// bytes under the primary, stamping scope: the step of a rotation sweep. It
// also lifts an unscoped token into scope; it cannot strip a scope, because
// an unscoped Decrypt refuses a scoped token.
func (kr *Keyring) Reencrypt(tok, scope string) (string, error) {
	payload, _, err := kr.Decrypt(tok, scope)
	if err != nil {
		return "", err
	}
	return kr.Encrypt(payload, scope)
}

// headerJSON writes the protected header exactly as the Python library's
// JOSE encoder does (json.dumps with compact separators, insertion order,
// ASCII-only), so tokens from both look alike:
// {"alg":"dir","enc":"A256GCM","kid":"…"[,"flenc_scope":"…"]}.
func headerJSON(kid, scope string) []byte {
	var b strings.Builder
	b.WriteString(`{"alg":"dir","enc":"A256GCM","kid":`)
	writeASCIIString(&b, kid)
	if scope != "" {
		b.WriteString(`,"flenc_scope":`)
		writeASCIIString(&b, scope)
	}
	b.WriteString("}")
	return []byte(b.String())
}

// writeASCIIString escapes like Python's json with ensure_ascii=True.
func writeASCIIString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\f':
			b.WriteString(`\f`)
		case r < 0x20 || (r >= 0x80 && r < 0x10000):
			fmt.Fprintf(b, `\u%04x`, r)
		case r >= 0x10000:
			r -= 0x10000
			fmt.Fprintf(b, `\u%04x\u%04x`, 0xd800+(r>>10), 0xdc00+(r&0x3ff))
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
}
