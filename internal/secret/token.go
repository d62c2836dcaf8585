package secret

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdh"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/flecht-dev/flecht/internal/attr"
	"github.com/flecht-dev/flecht/internal/jose"
)

// The token: "flenc:jwe:" + an RFC 7516 compact JWE of five base64url
// segments, protected header . encrypted key . IV . ciphertext . tag, with
// the protected header's ASCII as the AES-GCM additional data. Two
// generations share the prefix:
//
//   - dir + A256GCM under an oct key: the encrypted key segment is empty;
//   - ECDH-ES+A256KW + A256GCM to an X25519 recipient: the header carries
//     the ephemeral public key (epk), the encrypted key is the random CEK
//     wrapped (AES-KW) under the Concat-KDF output of the X25519 agreement.
const (
	Scheme   = "flenc"          // any value under this scheme is ciphertext-form
	Prefix   = Scheme + ":jwe:" // the only envelope this reader understands
	ivSize   = 12               // 96-bit GCM nonce
	tagLen   = 16               // 128-bit GCM tag
	maxHdr   = 4096             // a header segment larger than this is not ours
	scopeM   = "flenc_scope"    // optional protected-header member
	algDir   = "dir"            // the oct generation's alg
	algECDH  = "ECDH-ES+A256KW" // the X25519 generation's alg
	encGCM   = "A256GCM"        // the only accepted enc
	wrapSize = KeySize + 8      // an AES-KW-wrapped 32-byte CEK
	b64Name  = "unpadded base64url"
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

// token is a parsed, accepted, not yet authenticated flenc token.
type token struct {
	TokenInfo
	alg       string // algDir or algECDH: the profile the header matched
	epk       []byte // ECDH-ES: the ephemeral X25519 public key
	protected string // the header segment as sent: the AAD
	wrapped   []byte // ECDH-ES: the wrapped CEK
	iv        []byte
	sealed    []byte // ciphertext || tag, the form cipher.AEAD.Open takes
}

// Inspect parses a token and applies the acceptance rule without a keyring,
// returning its kid and scope. Without a key there is no key kind to pick
// the profile, so a header is accepted when it matches either generation's
// profile exactly. The header is not authenticated until a decrypt: use it
// to classify, never to trust.
func Inspect(tok string) (TokenInfo, error) {
	t, err := parseToken(tok)
	if err != nil {
		return TokenInfo{}, err
	}
	return t.TokenInfo, nil
}

// parseToken does every check that needs no key, in the order that keeps the
// acceptance rule ahead of any cryptographic work: envelope, shape, header
// (members, alg/enc, kid, the profile its alg names), then the binary
// segments. Open runs it first, so its verdicts are Inspect's.
func parseToken(tok string) (*token, error) {
	segs, err := compactSegments(tok, Scheme, "jwe", 5)
	if err != nil {
		return nil, err
	}
	// Strict, as the flsig reader: Go's decoder would skip line breaks, and
	// such a token would fail only at the tag (the segment as sent is the
	// AAD), where upstream calls it malformed before any crypto.
	t, err := headerOf(segs[0])
	if err != nil {
		return nil, err
	}
	bad := func(detail string, args ...any) error {
		return &Error{Kind: KindMalformed, Kid: t.Kid, Detail: fmt.Sprintf(detail, args...)}
	}
	switch t.alg {
	case algDir:
		if segs[1] != "" {
			return nil, bad("alg dir carries no encrypted key, but the segment is not empty")
		}
	case algECDH:
		if t.wrapped, err = jose.DecodeSegment(segs[1]); err != nil || len(t.wrapped) != wrapSize {
			return nil, bad("alg %s needs an encrypted key of %d bytes of %s", algECDH, wrapSize, b64Name)
		}
	}
	t.iv, err = jose.DecodeSegment(segs[2])
	if err != nil || len(t.iv) != ivSize {
		return nil, bad("IV must be %d bytes of %s", ivSize, b64Name)
	}
	// ciphertext || tag in one buffer, the form cipher.AEAD.Open takes.
	if strings.ContainsAny(segs[3], "\r\n") || strings.ContainsAny(segs[4], "\r\n") {
		return nil, bad("ciphertext and tag must be %s", b64Name)
	}
	sealed := make([]byte, b64url.DecodedLen(len(segs[3]))+b64url.DecodedLen(len(segs[4])))
	nct, err := b64url.Decode(sealed, []byte(segs[3]))
	if err != nil {
		return nil, bad("ciphertext is not %s", b64Name)
	}
	ntag, err := b64url.Decode(sealed[nct:], []byte(segs[4]))
	if err != nil || ntag != tagLen {
		return nil, bad("tag must be %d bytes of %s", tagLen, b64Name)
	}
	t.protected, t.sealed = segs[0], sealed[:nct+ntag]
	return t, nil
}

// headerOf decodes and accepts a protected header segment. The verdict is
// a function of the segment's bytes alone, and the oct generation's header
// is the same for every token of one key and scope, so accepted dir
// headers are remembered: a sweep meets the same few thousands of times,
// and parsing each again was a fifth of its CPU. An X25519 header carries
// a fresh ephemeral key in every token, so those are never remembered.
func headerOf(seg string) (*token, error) {
	if h, ok := dirHeaders.Load(seg); ok {
		return &token{TokenInfo: h.(TokenInfo), alg: algDir}, nil
	}
	hdr, err := jose.DecodeSegment(seg)
	if err != nil {
		return nil, &Error{Kind: KindMalformed, Detail: "protected header is not " + b64Name}
	}
	t, err := acceptHeader(hdr)
	if err != nil {
		return nil, refusedBefore(err, "any decryption")
	}
	if t.alg == algDir && dirHeaderCount.Load() < maxDirHeaders {
		if _, loaded := dirHeaders.LoadOrStore(seg, t.TokenInfo); !loaded {
			dirHeaderCount.Add(1)
		}
	}
	return t, nil
}

// dirHeaders maps an accepted dir header segment to what it says; it
// stops growing at maxDirHeaders (a keyring has a few kids and scopes, so
// more distinct headers than that are not the common case).
var (
	dirHeaders     sync.Map
	dirHeaderCount atomic.Int64
)

const maxDirHeaders = 4096

// compactSegments strips scheme:envelope: from tok and splits the compact
// serialization behind it into its n segments, refusing a protected header
// segment too long to be ours: the keyless first checks a flenc token and a
// flsig value share, before either decodes anything.
func compactSegments(tok, scheme, envelope string, n int) ([]string, error) {
	malformed := func(detail string, args ...any) error {
		return &Error{Kind: KindMalformed, Detail: fmt.Sprintf(detail, args...)}
	}
	form := strings.ToUpper(envelope) // JWE, JWS
	if !strings.HasPrefix(tok, scheme+":") {
		return nil, malformed("not a %s: value", scheme)
	}
	got, compact, ok := strings.Cut(tok[len(scheme)+1:], ":")
	if !ok && got == envelope {
		return nil, malformed("no compact %s after %q", form, scheme+":"+envelope)
	}
	if !ok || got != envelope {
		return nil, malformed("unknown %s envelope %s, this reader knows only %s", scheme, Echo(got, knownEnvelopes), envelope)
	}
	segs, ok := jose.SplitCompact(compact, n)
	if !ok {
		return nil, malformed("a compact %s has %d segments", form, n)
	}
	if len(segs[0]) > maxHdr {
		return nil, malformed("protected header longer than %d characters", maxHdr)
	}
	return segs, nil
}

// acceptHeader is the keyless acceptance rule (docs/contract.md §9): the members
// alg, enc, kid, flenc_scope, epk (and typ, cty, tolerated); zip, crit,
// apu, apv and any other member rejected; then alg names the profile the
// rest must match exactly: dir + A256GCM without epk, or ECDH-ES+A256KW +
// A256GCM with an epk of exactly {"kty":"OKP","crv":"X25519","x":…}. It
// runs on the decoded header alone, so a hostile header costs a JSON parse
// and nothing more.
func acceptHeader(hdr []byte) (*token, error) {
	rejected := func(detail string, args ...any) error {
		return &Error{Kind: KindHeaderRejected, Detail: fmt.Sprintf(detail, args...)}
	}
	members, err := attr.Members(hdr)
	if err != nil || len(hdr) == 0 {
		return nil, &Error{Kind: KindMalformed, Detail: "protected header is not a JSON object"}
	}
	t := &token{}
	var enc string
	var kidSet, scopeSet bool
	var epkRaw []byte
	for i, m := range members {
		for _, prev := range members[:i] {
			if prev.Key == m.Key {
				// RFC 7515 §5.2: duplicate header names are rejected, so
				// that two parsers cannot read two different headers.
				return nil, rejected("duplicate header member %s", Echo(m.Key, knownHeaders))
			}
		}
		var dst *string
		switch m.Key {
		case "alg":
			dst = &t.alg
		case "enc":
			dst = &enc
		case "kid":
			dst, kidSet = &t.Kid, true
		case scopeM:
			dst, scopeSet = &t.Scope, true
		case "typ", "cty":
			dst = new(string) // allowed, checked for type, unused
		case "epk":
			epkRaw = m.Value
			continue
		case "zip":
			return nil, rejected("compression (zip) is not accepted")
		case "crit":
			return nil, rejected("critical extensions (crit) are not accepted")
		case "apu", "apv":
			return nil, rejected("agreement party info (apu, apv) is not accepted")
		default:
			return nil, rejected("header member %s is outside the flenc profile", Echo(m.Key, knownHeaders))
		}
		s, err := headerString(m)
		if err != nil {
			return nil, err
		}
		*dst = s
	}
	if t.alg != algDir && t.alg != algECDH {
		return nil, rejected("alg %s is not accepted, only %s (oct keys) or %s (X25519 keys)", Echo(t.alg, knownAlgs), algDir, algECDH)
	}
	if enc != encGCM {
		return nil, rejected("enc %s is not accepted, only %s", Echo(enc, knownEncs), encGCM)
	}
	if !kidSet || t.Kid == "" {
		return nil, &Error{Kind: KindMalformed, Detail: "header has no kid"}
	}
	if scopeSet && t.Scope == "" {
		// No writer stamps an empty scope; a token claiming one is not ours.
		return nil, &Error{Kind: KindMalformed, Kid: t.Kid, Detail: "header has an empty flenc_scope"}
	}
	switch {
	case t.alg == algDir && epkRaw != nil:
		return nil, &Error{Kind: KindHeaderRejected, Kid: t.Kid, Detail: "alg dir carries no epk"}
	case t.alg == algECDH && epkRaw == nil:
		return nil, &Error{Kind: KindHeaderRejected, Kid: t.Kid, Detail: "alg " + algECDH + " needs an epk"}
	case t.alg == algECDH:
		if t.epk, err = acceptEPK(epkRaw); err != nil {
			err.(*Error).Kid = t.Kid
			return nil, err
		}
	}
	return t, nil
}

// headerString is the value of a header member that must be a string, as
// every member the two profiles read is: another type is malformed for the
// kid and the scope (the token names no key or scope at all), and rejected
// for any other member.
func headerString(m attr.RawMember) (string, error) {
	s, ok := jsonString(m.Value)
	if ok {
		return s, nil
	}
	if m.Key == "kid" || m.Key == scopeM {
		return "", &Error{Kind: KindMalformed, Detail: fmt.Sprintf("header %q must be a string", m.Key)}
	}
	return "", &Error{Kind: KindHeaderRejected, Detail: fmt.Sprintf("header %q must be a string", m.Key)}
}

// acceptEPK accepts exactly {"kty":"OKP","crv":"X25519","x":<32 bytes>}, in
// any member order: a private "d", a kid or any other member is refused.
func acceptEPK(raw []byte) ([]byte, error) {
	rejected := &Error{Kind: KindHeaderRejected, Detail: `epk must be exactly {"kty":"OKP","crv":"X25519","x":…}`}
	members, err := attr.Members(raw)
	if err != nil || len(members) != 3 {
		return nil, rejected
	}
	var x []byte
	seen := map[string]bool{}
	for _, m := range members {
		s, ok := jsonString(m.Value)
		if !ok || seen[m.Key] {
			return nil, rejected
		}
		seen[m.Key] = true
		switch {
		case m.Key == "kty" && s == "OKP", m.Key == "crv" && s == "X25519":
		case m.Key == "x":
			if x, err = jose.DecodeSegment(s); err != nil || len(x) != KeySize {
				return nil, &Error{Kind: KindMalformed, Detail: fmt.Sprintf("epk x must be %d bytes of %s", KeySize, b64Name)}
			}
		default:
			return nil, rejected
		}
	}
	return x, nil
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

// beforeOpen, when set by a test, runs just before every cryptographic
// step on outside input (an X25519 agreement, a key unwrap, an AEAD open, a
// signature check, a password derivation): the proof that rejected tokens
// and files never reach the crypto.
var beforeOpen func()

// Encrypt seals payload (the JSON encoding of a field's wire value) under the
// sealing key of scope (SealingKid: flenc_primaries[scope], else primary),
// stamping scope when non-empty: dir + A256GCM for an oct key,
// ECDH-ES+A256KW + A256GCM for an X25519 recipient. A bound sealing key that
// does not cover scope refuses (KindKeyBinding).
func (kr *Keyring) Encrypt(payload []byte, scope string) (string, error) {
	if kr == nil || kr.primary == "" {
		return "", &Error{Kind: KindNoKeyring, Scope: scope, Detail: "no keyring to encrypt with"}
	}
	if !utf8.ValidString(scope) {
		// The header must carry exactly the scope a reader compares with.
		return "", &Error{Kind: KindMalformed, Detail: "scope is not valid UTF-8"}
	}
	kid, err := kr.SealingKid(scope)
	if err != nil {
		return "", err
	}
	k := kr.byKid[kid]
	var hdr []byte
	var wrapped []byte
	aead := k.aead
	if k.typ == TypeX25519 {
		if k.mismatch {
			return "", k.mismatchError()
		}
		eph, err := ecdh.X25519().GenerateKey(rand.Reader)
		if err != nil {
			return "", err
		}
		z, err := eph.ECDH(k.xpub)
		if err != nil {
			return "", &Error{Kind: KindKeyringInvalid, Kid: kid, Detail: "the recipient's public half is a low-order point: no key agreement possible"}
		}
		cek := make([]byte, KeySize)
		rand.Read(cek) // never fails (crypto/rand)
		kek, _ := jose.ConcatKDF(z, algECDH, nil, nil, 8*KeySize)
		if wrapped, err = jose.KeyWrap(kek, cek); err != nil {
			return "", err
		}
		block, _ := aes.NewCipher(cek)
		aead, _ = cipher.NewGCM(block)
		hdr = ecdhHeaderJSON(kid, scope, eph.PublicKey().Bytes())
	} else {
		hdr = headerJSON(kid, scope)
	}
	protected, err := protectedHeader(hdr, kid)
	if err != nil {
		return "", err
	}
	iv := make([]byte, ivSize)
	rand.Read(iv) // never fails (crypto/rand)
	sealed := aead.Seal(nil, iv, payload, []byte(protected))
	ct, tag := sealed[:len(sealed)-tagLen], sealed[len(sealed)-tagLen:]
	var b strings.Builder
	b.Grow(len(Prefix) + len(protected) + 4 + 56 + 16 + len(ct)*4/3 + 4 + 22)
	b.WriteString(Prefix)
	b.WriteString(protected)
	b.WriteByte('.')
	b.WriteString(b64url.EncodeToString(wrapped))
	b.WriteByte('.')
	b.WriteString(b64url.EncodeToString(iv))
	b.WriteByte('.')
	b.WriteString(b64url.EncodeToString(ct))
	b.WriteByte('.')
	b.WriteString(b64url.EncodeToString(tag))
	return b.String(), nil
}

// protectedHeader is the header segment a writer puts in a token or
// signed value. Found by FuzzDecrypt: a header longer than any reader
// accepts (a long kid or scope) is refused, since a value no reader would
// accept must not be written.
func protectedHeader(hdr []byte, kid string) (string, error) {
	protected := b64url.EncodeToString(hdr)
	if len(protected) > maxHdr {
		return "", &Error{Kind: KindMalformed, Kid: kid, Detail: fmt.Sprintf(
			"kid and scope make a protected header of %d characters; readers accept at most %d", len(protected), maxHdr)}
	}
	return protected, nil
}

// Decrypt opens a token read through a field of the given scope ("" for an
// unscoped field) and returns the payload and the kid that opened it.
func (kr *Keyring) Decrypt(tok, scope string) (payload []byte, kid string, err error) {
	payload, info, err := kr.Open(tok, scope)
	return payload, info.Kid, err
}

// Open is Decrypt that also returns what the token's header says (its kid
// and flenc_scope, authenticated when err is nil), from the one parse: a
// scan or sweep needs both for every token. info is empty when the token
// does not parse.
//
// Order: no keyring (no_keyring); every keyless check, Inspect's
// (malformed, header_rejected); the kid (unknown_kid; an Ed25519 kid opens
// no token: unknown_kid too, saying so); the profile THE KEY'S KIND picks,
// never the header: dir for oct, ECDH-ES+A256KW for X25519, any other
// header_rejected before any crypto; an X25519 kid without its private half
// (seal_only) or with a mismatched one (keyring_invalid); the crypto
// (malformed for a low-order epk, tag_mismatch); the scope ratchet on the
// now authentic header (scope_violation): a scoped field accepts its own
// scope and unscoped tokens, an unscoped field only unscoped tokens; last
// the key's binding (key_binding): a bound key opens only tokens stamped
// with a scope of its binding.
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
	return kr.open(t, scope)
}

// Parsed is a flenc token that passed every check that needs no key
// (ParseEncrypted): its header is readable, not yet authenticated.
type Parsed struct{ t *token }

// ParseEncrypted parses a flenc token under the acceptance rule, as Open
// does first, for a caller that reads the header and then opens it
// (OpenParsed) without parsing it twice.
func ParseEncrypted(tok string) (Parsed, error) {
	t, err := parseToken(tok)
	if err != nil {
		return Parsed{}, err
	}
	return Parsed{t}, nil
}

// Header is what the parsed token's header says.
func (p Parsed) Header() Header {
	return Header{Envelope: "flenc:jwe", Alg: p.t.alg, Enc: encGCM, Kid: p.t.Kid, Scope: p.t.Scope}
}

// OpenParsed is Open of a token ParseEncrypted accepted.
func (kr *Keyring) OpenParsed(p Parsed, scope string) (payload []byte, info TokenInfo, err error) {
	if kr == nil {
		return nil, TokenInfo{}, &Error{Kind: KindNoKeyring, Scope: scope, Detail: "no keyring to decrypt with"}
	}
	return kr.open(p.t, scope)
}

// open is Open after the parse: the key, the profile its kind accepts, the
// decryption, and the scope rules.
func (kr *Keyring) open(t *token, scope string) (payload []byte, info TokenInfo, err error) {
	fail := func(kind Kind, detail string) error {
		return &Error{Kind: kind, Kid: t.Kid, Scope: scope, TokenScope: t.Scope, Detail: detail}
	}
	k, ok := kr.byKid[t.Kid]
	if !ok {
		return nil, t.TokenInfo, fail(KindUnknownKid, "the keyring does not hold this kid")
	}
	aead := k.aead
	switch k.typ {
	case TypeEd25519:
		return nil, t.TokenInfo, fail(KindUnknownKid, "the kid names an Ed25519 signing key, which opens no token")
	case TypeOct:
		if t.alg != algDir {
			return nil, t.TokenInfo, fail(KindHeaderRejected, "the kid names an oct key, which accepts only alg dir + enc A256GCM (refused before any decryption)")
		}
		if beforeOpen != nil {
			beforeOpen()
		}
	case TypeX25519:
		if t.alg != algECDH {
			return nil, t.TokenInfo, fail(KindHeaderRejected, "the kid names an X25519 key, which accepts only alg "+algECDH+" + enc A256GCM (refused before any decryption)")
		}
		if !k.private() {
			return nil, t.TokenInfo, fail(KindSealOnly, "the keyring holds only the public half of this X25519 key: it can seal, not open")
		}
		if k.mismatch {
			return nil, t.TokenInfo, k.mismatchError()
		}
		if beforeOpen != nil {
			beforeOpen()
		}
		epk, err := ecdh.X25519().NewPublicKey(t.epk)
		if err != nil {
			return nil, t.TokenInfo, fail(KindMalformed, "epk is not an X25519 public key")
		}
		z, err := k.xpriv.ECDH(epk)
		if err != nil {
			// crypto/ecdh refuses an all-zero shared secret: a low-order epk.
			return nil, t.TokenInfo, fail(KindMalformed, "epk is a low-order point (all-zero shared secret)")
		}
		kek, _ := jose.ConcatKDF(z, algECDH, nil, nil, 8*KeySize)
		cek, err := jose.KeyUnwrap(kek, t.wrapped)
		if err != nil {
			return nil, t.TokenInfo, fail(KindTagMismatch, "key unwrap failed: this keyring's private half is not the one the token was sealed to, or the token was altered")
		}
		block, _ := aes.NewCipher(cek)
		aead, _ = cipher.NewGCM(block)
	}
	payload, err = aead.Open(nil, t.iv, t.sealed, []byte(t.protected))
	if err != nil {
		return nil, t.TokenInfo, fail(KindTagMismatch, "authentication failed: wrong key bytes for this kid, or a tampered token")
	}
	if why := ratchet(scope, t.Scope); why != "" {
		return nil, t.TokenInfo, fail(KindScopeViolation, why)
	}
	if !k.bound(t.Scope) {
		stamped := "no scope"
		if t.Scope != "" {
			stamped = fmt.Sprintf("scope %q", Clip(t.Scope))
		}
		return nil, t.TokenInfo, fail(KindKeyBinding, fmt.Sprintf("key is bound to scopes %q; the token is stamped with %s", k.scopes, stamped))
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
// bytes under the sealing key of scope (SealingKid), stamping scope: the
// step of a rotation sweep. It moves a token between generations when the
// sealing key's kind differs. It also lifts an unscoped token into scope;
// it cannot strip a scope, because an unscoped Decrypt refuses a scoped
// token.
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

// ecdhHeaderJSON writes the ECDH-ES header as joserfc does (upstream's
// member order): {"alg":"ECDH-ES+A256KW","enc":"A256GCM","kid":…
// [,"flenc_scope":…],"epk":{"crv":"X25519","x":…,"kty":"OKP"}}.
func ecdhHeaderJSON(kid, scope string, epk []byte) []byte {
	var b strings.Builder
	b.WriteString(`{"alg":"` + algECDH + `","enc":"A256GCM","kid":`)
	writeASCIIString(&b, kid)
	if scope != "" {
		b.WriteString(`,"flenc_scope":`)
		writeASCIIString(&b, scope)
	}
	b.WriteString(`,"epk":{"crv":"X25519","x":"`)
	b.WriteString(b64url.EncodeToString(epk))
	b.WriteString(`","kty":"OKP"}}`)
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
