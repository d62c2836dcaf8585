package secret

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdh"
	"crypto/ed25519"
	"crypto/hkdf"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/flecht-dev/flecht/internal/attr"
)

// KeySize is the length of every key half minted or accepted: an AES-256
// key, an X25519 or Ed25519 half.
const KeySize = 32

// MaxKidLen caps the kids this package creates, in bytes: room for any
// naming scheme, short enough for a table and a metric label.
const MaxKidLen = 128

// KeyType is the kind of a keyring entry. One kid is one kind.
type KeyType string

const (
	// TypeOct is a 32-byte AES-256 key ("kty":"oct", "k"): it seals and
	// opens dir + A256GCM tokens.
	TypeOct KeyType = "oct"
	// TypeX25519 is a recipient ("kty":"OKP", "crv":"X25519"): its public
	// half "x" seals ECDH-ES+A256KW tokens, its private half "d" opens them.
	// Without "d" the entry is seal-only.
	TypeX25519 KeyType = "x25519"
	// TypeEd25519 is a signer ("kty":"OKP", "crv":"Ed25519"): its private
	// half "d" (the 32-byte seed) signs flsig:jws: values, its public half
	// "x" verifies them.
	TypeEd25519 KeyType = "ed25519"
)

// KeyTypes lists the kinds, in the order tools show them.
var KeyTypes = []KeyType{TypeOct, TypeX25519, TypeEd25519}

// Keyring holds named keys of three kinds, which sealing key is primary,
// the per-scope sealing keys (flenc_primaries) and the per-scope signing
// keys (flenc_signing). Its document form is an RFC 7517 JWK Set with those
// extension members, the file Flechtwerk 0.17 and flechtctl 0.17 load.
//
// A Keyring is immutable and safe for concurrent use; every edit returns a
// changed, validated copy. Printing it (String, Format, MarshalJSON) shows
// kids only; key bytes leave the package only through JWKS and Document.
type Keyring struct {
	keys      []*key // document order
	byKid     map[string]*key
	primary   string
	primaries map[string]string          // flenc_primaries: scope → sealing kid
	signing   map[string]string          // flenc_signing: scope → signing kid
	extra     map[string]json.RawMessage // unknown top-level members, kept on save
	protect   *protection                // set when the file is written password-protected
}

// key is one entry. It sits behind a pointer everywhere so that fmt, walking
// any struct that holds a Keyring, prints an address and never the bytes.
// A key is never changed once built.
type key struct {
	kid    string
	typ    KeyType
	secret []byte   // oct: k; OKP: d, nil when only the public half is held
	public []byte   // OKP: x; nil for oct
	scopes []string // flenc_scopes, sorted and unique; nil when unbound
	extra  map[string]json.RawMessage

	// Built by prepare once the keyring validates.
	aead     cipher.AEAD        // oct
	xpub     *ecdh.PublicKey    // X25519
	xpriv    *ecdh.PrivateKey   // X25519 with d
	edpriv   ed25519.PrivateKey // Ed25519 with d
	mismatch bool               // the private half does not belong to the public half
}

func (*key) String() string { return "key(redacted)" }

// Format redacts under every verb, %#v included.
func (k *key) Format(f fmt.State, _ rune) { fmt.Fprint(f, k.String()) }

// private reports whether the entry holds its secret half (always, for oct).
func (k *key) private() bool { return k.secret != nil }

// sealing reports whether the entry can be a sealing key (primary or
// primary-for a scope).
func (k *key) sealing() bool { return k.typ == TypeOct || k.typ == TypeX25519 }

// bound reports whether scope ("" for none) is inside the key's binding; an
// unbound key serves every scope and none.
func (k *key) bound(scope string) bool {
	if k.scopes == nil {
		return true
	}
	_, found := slices.BinarySearch(k.scopes, scope)
	return found && scope != ""
}

// prepare builds the cipher objects of a key whose lengths validated, and
// finds a private half that does not match its public half: upstream loads
// such a keyring and refuses the key at use, and so does this package.
func (k *key) prepare() error {
	switch k.typ {
	case TypeOct:
		block, err := aes.NewCipher(k.secret)
		if err != nil {
			return err
		}
		// One AEAD per key, built once: it holds no per-call state, so
		// concurrent Seal/Open share it.
		k.aead, err = cipher.NewGCM(block)
		return err
	case TypeX25519:
		pub, err := ecdh.X25519().NewPublicKey(k.public)
		if err != nil {
			return err
		}
		k.xpub = pub
		if k.secret != nil {
			priv, err := ecdh.X25519().NewPrivateKey(k.secret)
			if err != nil {
				return err
			}
			k.xpriv = priv
			k.mismatch = !bytes.Equal(priv.PublicKey().Bytes(), k.public)
		}
	case TypeEd25519:
		if k.secret != nil {
			k.edpriv = ed25519.NewKeyFromSeed(k.secret)
			k.mismatch = !bytes.Equal(k.edpriv.Public().(ed25519.PublicKey), k.public)
		}
	}
	return nil
}

// same reports whether two keys are one: kind, halves and binding.
func (k *key) same(o *key) bool {
	if k.typ != o.typ || (k.scopes == nil) != (o.scopes == nil) || !slices.Equal(k.scopes, o.scopes) ||
		!bytes.Equal(k.public, o.public) || (k.secret == nil) != (o.secret == nil) {
		return false
	}
	return k.secret == nil || subtle.ConstantTimeCompare(k.secret, o.secret) == 1
}

// checkSize refuses a key half of the wrong length (KindKeyringInvalid).
func (k *key) checkSize() *Error {
	bad := func(format string, args ...any) *Error {
		return &Error{Kind: KindKeyringInvalid, Kid: k.kid, Detail: fmt.Sprintf(format, args...)}
	}
	if k.typ == TypeOct {
		if len(k.secret) != KeySize {
			return bad("key %q is %d bytes, expected %d (AES-256)", k.kid, len(k.secret), KeySize)
		}
		return nil
	}
	crv := okpCurve(k.typ)
	if len(k.public) != KeySize {
		return bad("%s key %q has a %d-byte public half, expected %d", crv, k.kid, len(k.public), KeySize)
	}
	if k.secret != nil && len(k.secret) != KeySize {
		return bad("%s key %q has a %d-byte private half, expected %d", crv, k.kid, len(k.secret), KeySize)
	}
	return nil
}

// checkNew refuses a key that cannot be one, before it joins a keyring:
// a half of the wrong length, bytes that are no key of its kind, a private
// half that does not belong to its public half (KindKeyringInvalid). A
// file written elsewhere may hold such a key and still loads; no edit
// brings one in.
func (k *key) checkNew() *Error {
	if err := k.checkSize(); err != nil {
		return err
	}
	if err := k.prepare(); err != nil {
		return &Error{Kind: KindKeyringInvalid, Kid: k.kid, Detail: fmt.Sprintf("%s key %q is not usable: %v", k.typ, k.kid, err)}
	}
	if k.mismatch {
		return &Error{Kind: KindKeyringInvalid, Kid: k.kid, Detail: fmt.Sprintf(
			"the %s key's private half does not match its public half: a broken pair is never added", k.typ)}
	}
	return nil
}

// mismatchError is the refusal of a key whose halves do not belong together.
func (k *key) mismatchError() error {
	return &Error{Kind: KindKeyringInvalid, Kid: k.kid, Detail: fmt.Sprintf(
		"the %s key's private half does not match its public half; the keyring holds a broken pair under this kid", k.typ)}
}

// KeyInfo is the short view of a key: its kid and whether it is primary.
type KeyInfo struct {
	Kid     string `json:"kid"`
	Primary bool   `json:"primary"`
}

// Entry is everything that may be shown about one key: never its bytes.
type Entry struct {
	Kid        string   `json:"kid"`
	Type       KeyType  `json:"type"`
	Private    bool     `json:"private"`     // holds the private half (always for oct)
	Scopes     []string `json:"scopes"`      // flenc_scopes, sorted; empty when unbound
	Primary    bool     `json:"primary"`     // the top-level primary
	PrimaryFor []string `json:"primary_for"` // scopes whose sealing key it is (flenc_primaries), sorted
	SigningFor []string `json:"signing_for"` // scopes whose signing key it is (flenc_signing), sorted
	// Mismatch: the private half does not match the public half. The
	// keyring loads (as upstream's does), but sealing, opening or signing
	// with this key fails with KindKeyringInvalid.
	Mismatch bool `json:"mismatch"`
}

// Roles renders the entry's roles as flechtctl's "keyring show" does:
// "primary", "primary-for:S", "signing-for:S".
func (e Entry) Roles() []string {
	var roles []string
	if e.Primary {
		roles = append(roles, "primary")
	}
	for _, s := range e.PrimaryFor {
		roles = append(roles, "primary-for:"+s)
	}
	for _, s := range e.SigningFor {
		roles = append(roles, "signing-for:"+s)
	}
	return roles
}

// ParseKeyring reads and validates a plain JWK Set document exactly as
// upstream's Keyring.from_json does, in its order: the document is a JSON
// object; "keys" (absent = none) is an array whose every JWK is checked for
// object, kty (oct or OKP), kid (a non-empty string), a duplicate kid,
// flenc_scopes (a non-empty array of non-empty strings), then its key
// material (oct "k"; OKP "crv" X25519 or Ed25519, "x", optional "d", each
// base64 of either alphabet, padding optional); "primary" is required;
// "flenc_primaries" and "flenc_signing" are objects of scope → kid strings.
// Then the rules of upstream's Keyring (validate). Unknown members, top
// level and per key, are kept and written back by JWKS.
//
// Errors are KindKeyringInvalid naming the offending kid or scope and never
// holding key material; a password-protected document is
// KindKeyringPassword (see ReadKeyring).
func ParseKeyring(doc []byte) (*Keyring, error) {
	bad := func(kid, format string, args ...any) error {
		return &Error{Kind: KindKeyringInvalid, Kid: kid, Detail: fmt.Sprintf(format, args...)}
	}
	if IsProtectedDocument(doc) {
		return nil, &Error{Kind: KindKeyringPassword, Detail: "the keyring document is password-protected; it opens only with its password"}
	}
	doc = bytes.TrimSpace(doc)
	top, err := attr.Members(doc)
	if err != nil || len(doc) == 0 {
		if cty, jwe := compactJWECty(doc); jwe {
			// Told apart by cty alone, as upstream tells; name what is
			// missing rather than call an encrypted file "not JSON".
			got := "no cty"
			if cty != "" {
				got = fmt.Sprintf("cty %q", Clip(cty))
			}
			return nil, bad("", "a compact JWE, as a password-protected keyring is, but its header has %s where \"cty\":%q is required", got, ProtectedCty)
		}
		return nil, bad("", "not a JSON object")
	}
	kr := &Keyring{byKid: map[string]*key{}}
	var keysRaw, primaryRaw, primariesRaw, signingRaw json.RawMessage
	for _, m := range top {
		switch m.Key {
		case "keys":
			keysRaw = m.Value
		case "primary":
			primaryRaw = m.Value
		case "flenc_primaries":
			primariesRaw = m.Value
		case "flenc_signing":
			signingRaw = m.Value
		default:
			kr.setExtra(m.Key, m.Value)
		}
	}
	var entries []json.RawMessage
	if keysRaw != nil && (keysRaw[0] != '[' || json.Unmarshal(keysRaw, &entries) != nil) {
		return nil, bad("", `"keys" must be a JSON array`)
	}
	for i, entry := range entries {
		k, err := parseJWK(entry, kr.byKid)
		if err != nil {
			err.Detail = fmt.Sprintf("keys[%d]: %s", i, err.Detail)
			return nil, err
		}
		kr.keys = append(kr.keys, k)
		kr.byKid[k.kid] = k
	}
	if primaryRaw == nil {
		return nil, bad("", `no top-level "primary" member`)
	}
	primary, isString := jsonString(primaryRaw)
	if kr.primaries, err = parseScopeMap(primariesRaw, "flenc_primaries"); err != nil {
		return nil, err
	}
	if kr.signing, err = parseScopeMap(signingRaw, "flenc_signing"); err != nil {
		return nil, err
	}
	if !isString {
		return nil, bad("", `"primary" must be a string naming an oct or X25519 key`)
	}
	kr.primary = primary
	if err := kr.validate(); err != nil {
		return nil, err
	}
	return kr, nil
}

// parseJWK parses one JWK in upstream's order: object, kty, kid, a kid
// already held, flenc_scopes, key material. So a duplicate kid with
// malformed material still reports the duplicate.
func parseJWK(entry json.RawMessage, held map[string]*key) (*key, *Error) {
	bad := func(kid, format string, args ...any) *Error {
		return &Error{Kind: KindKeyringInvalid, Kid: kid, Detail: fmt.Sprintf(format, args...)}
	}
	members, err := attr.Members(entry)
	if err != nil {
		return nil, bad("", "each JWK must be a JSON object")
	}
	m := map[string]json.RawMessage{}
	for _, mem := range members {
		m[mem.Key] = mem.Value // a repeated member: the last wins, as in Python
	}
	kty, _ := jsonString(m["kty"])
	if kty != "oct" && kty != "OKP" {
		return nil, bad("", `unsupported key type (kty): only oct (symmetric) and OKP (X25519, Ed25519) keys are used`)
	}
	kid, ok := jsonString(m["kid"])
	if !ok || kid == "" {
		return nil, bad("", `every JWK needs a non-empty string "kid"`)
	}
	if _, dup := held[kid]; dup {
		return nil, bad(kid, "duplicate kid %q in the keyring", kid)
	}
	k := &key{kid: kid}
	known := []string{"kty", "kid", "flenc_scopes"}
	if raw, ok := m["flenc_scopes"]; ok {
		if k.scopes, ok = parseScopes(raw); !ok {
			return nil, bad(kid, `JWK %q: "flenc_scopes" must be a non-empty array of non-empty strings`, kid)
		}
	}
	member := func(name string, required bool) ([]byte, *Error) {
		raw, ok := m[name]
		if !ok {
			if required {
				return nil, bad(kid, "JWK %q has no %q (key material)", kid, name)
			}
			return nil, nil
		}
		b, ok := decodeKeyMember(raw)
		if !ok {
			return nil, bad(kid, "JWK %q has malformed base64url %q", kid, name)
		}
		return b, nil
	}
	var perr *Error
	if kty == "oct" {
		k.typ = TypeOct
		known = append(known, "k")
		if k.secret, perr = member("k", true); perr != nil {
			return nil, perr
		}
	} else {
		crv, _ := jsonString(m["crv"])
		switch crv {
		case "X25519":
			k.typ = TypeX25519
		case "Ed25519":
			k.typ = TypeEd25519
		default:
			return nil, bad(kid, "JWK %q has an unsupported curve (crv): only X25519 and Ed25519 are used", kid)
		}
		known = append(known, "crv", "x", "d")
		if k.public, perr = member("x", true); perr != nil {
			return nil, perr
		}
		if k.secret, perr = member("d", false); perr != nil {
			return nil, perr
		}
	}
	for _, mem := range members {
		if !slices.Contains(known, mem.Key) {
			if k.extra == nil {
				k.extra = map[string]json.RawMessage{}
			}
			k.extra[mem.Key] = mem.Value
		}
	}
	return k, nil
}

// b64Lenient is what upstream's _decode_key accepts once it has mapped
// "-_" to "+/" and padded: the standard alphabet and at most two "=".
var b64Lenient = regexp.MustCompile(`^[A-Za-z0-9+/]*={0,2}$`)

// decodeKeyMember decodes a JWK key member as upstream does: base64 of
// either alphabet (mixed, even), padding optional, non-canonical trailing
// bits tolerated; anything else (whitespace, stray characters, a non-string)
// is refused. Lengths are checked by validate.
func decodeKeyMember(raw json.RawMessage) ([]byte, bool) {
	s, ok := jsonString(raw)
	if !ok {
		return nil, false
	}
	s = strings.NewReplacer("-", "+", "_", "/").Replace(s)
	s += strings.Repeat("=", (4-len(s)%4)%4)
	if !b64Lenient.MatchString(s) {
		return nil, false
	}
	b, err := base64.StdEncoding.DecodeString(s)
	return b, err == nil
}

// parseScopes parses flenc_scopes: a non-empty array of non-empty strings,
// kept as a sorted set.
func parseScopes(raw json.RawMessage) ([]string, bool) {
	var items []json.RawMessage
	if len(raw) == 0 || raw[0] != '[' || json.Unmarshal(raw, &items) != nil || len(items) == 0 {
		return nil, false
	}
	scopes := make([]string, 0, len(items))
	for _, it := range items {
		s, ok := jsonString(it)
		if !ok || s == "" {
			return nil, false
		}
		scopes = append(scopes, s)
	}
	slices.Sort(scopes)
	return slices.Compact(scopes), true
}

// parseScopeMap parses flenc_primaries or flenc_signing: absent = empty,
// else a JSON object of scope → kid strings.
func parseScopeMap(raw json.RawMessage, member string) (map[string]string, error) {
	out := map[string]string{}
	if raw == nil {
		return out, nil
	}
	members, err := attr.Members(raw)
	if err != nil {
		return nil, &Error{Kind: KindKeyringInvalid, Detail: fmt.Sprintf("keyring %q must be a JSON object of scope to kid strings", member)}
	}
	for _, m := range members {
		kid, ok := jsonString(m.Value)
		if !ok {
			return nil, &Error{Kind: KindKeyringInvalid, Detail: fmt.Sprintf("keyring %q must be a JSON object of scope to kid strings", member)}
		}
		out[m.Key] = kid
	}
	return out, nil
}

// validate applies upstream's Keyring rules, in their order, and builds the
// keys' cipher objects:
//
//  1. at least one oct or X25519 key;
//  2. every kid a non-empty string held as one kind only (parse and the
//     edits keep kids unique);
//  3. every oct key 32 bytes, every OKP key a 32-byte public half and a
//     private half that is absent or 32 bytes;
//  4. primary names an oct or X25519 key;
//  5. every binding a non-empty set of non-empty scope names;
//  6. every OKP key bound;
//  7. every flenc_primaries entry maps a non-empty scope to an oct or X25519
//     kid whose binding, if any, covers that scope;
//  8. every flenc_signing entry maps a non-empty scope to an Ed25519 kid
//     holding its private half, bound to that scope.
//
// The *Error is KindKeyringInvalid and names the kid or scope.
func (kr *Keyring) validate() *Error {
	bad := func(kid, format string, args ...any) *Error {
		return &Error{Kind: KindKeyringInvalid, Kid: kid, Detail: fmt.Sprintf(format, args...)}
	}
	if !slices.ContainsFunc(kr.keys, (*key).sealing) {
		return bad("", "a keyring needs at least one key (oct or X25519)")
	}
	for _, k := range kr.keys {
		if k.kid == "" {
			return bad("", "a key id must be a non-empty string")
		}
	}
	for _, k := range kr.keys {
		if err := k.checkSize(); err != nil {
			return err
		}
	}
	if p, ok := kr.byKid[kr.primary]; !ok || !p.sealing() {
		return bad("", "primary %q is not among the sealing keys %q", kr.primary, kr.sealingKids())
	}
	for _, k := range kr.keys {
		if k.scopes != nil && (len(k.scopes) == 0 || slices.Contains(k.scopes, "")) {
			return bad(k.kid, "key %q must be bound to a non-empty set of non-empty scope names", k.kid)
		}
	}
	for _, k := range kr.keys {
		if k.typ != TypeOct && k.scopes == nil {
			return bad(k.kid, "public-key kid %q must be bound to the scopes it serves (flenc_scopes)", k.kid)
		}
	}
	for _, scope := range slices.Sorted(maps.Keys(kr.primaries)) {
		kid := kr.primaries[scope]
		if scope == "" {
			return bad(kid, "flenc_primaries map an empty scope to %q", kid)
		}
		k, ok := kr.byKid[kid]
		if !ok || !k.sealing() {
			return bad(kid, "flenc_primaries map scope %q to %q, which is not a sealing key", scope, kid)
		}
		if !k.bound(scope) {
			return bad(kid, "flenc_primaries map scope %q to %q, which is not bound to it", scope, kid)
		}
	}
	for _, scope := range slices.Sorted(maps.Keys(kr.signing)) {
		kid := kr.signing[scope]
		if scope == "" {
			return bad(kid, "flenc_signing maps an empty scope to %q", kid)
		}
		k, ok := kr.byKid[kid]
		if !ok || k.typ != TypeEd25519 || !k.private() {
			return bad(kid, "flenc_signing maps scope %q to %q, which is not a private signing key", scope, kid)
		}
		if k.scopes == nil || !k.bound(scope) {
			return bad(kid, "flenc_signing maps scope %q to %q, which is not bound to it", scope, kid)
		}
	}
	for _, k := range kr.keys {
		if k.aead != nil || k.xpub != nil || k.edpriv != nil {
			continue // prepared before: keys are shared between copies
		}
		if err := k.prepare(); err != nil {
			return bad(k.kid, "%s key %q is not usable: %v", k.typ, k.kid, err)
		}
	}
	return nil
}

func okpCurve(t KeyType) string {
	if t == TypeX25519 {
		return "X25519"
	}
	return "Ed25519"
}

func (kr *Keyring) sealingKids() []string {
	var kids []string
	for _, k := range kr.keys {
		if k.sealing() {
			kids = append(kids, k.kid)
		}
	}
	slices.Sort(kids)
	return kids
}

// JWKS is the plain keyring document: the key bytes included, so never log
// it. Members sorted, two-space indent, a trailing newline (upstream's
// to_json); keys in document order, new ones appended; flenc_primaries and
// flenc_signing when non-empty; unknown members read from the original
// document kept.
func (kr *Keyring) JWKS() ([]byte, error) {
	doc := map[string]any{}
	for name, v := range kr.extra {
		doc[name] = v
	}
	enc := base64.RawURLEncoding
	keys := make([]map[string]any, len(kr.keys))
	for i, k := range kr.keys {
		m := map[string]any{}
		for name, v := range k.extra {
			m[name] = v
		}
		m["kid"] = k.kid
		if k.typ == TypeOct {
			m["kty"] = "oct"
			m["k"] = enc.EncodeToString(k.secret)
		} else {
			m["kty"] = "OKP"
			m["crv"] = okpCurve(k.typ)
			m["x"] = enc.EncodeToString(k.public)
			if k.secret != nil {
				m["d"] = enc.EncodeToString(k.secret)
			}
		}
		if k.scopes != nil {
			m["flenc_scopes"] = k.scopes
		}
		keys[i] = m
	}
	doc["keys"] = keys
	doc["primary"] = kr.primary
	if len(kr.primaries) > 0 {
		doc["flenc_primaries"] = kr.primaries
	}
	if len(kr.signing) > 0 {
		doc["flenc_signing"] = kr.signing
	}
	var buf bytes.Buffer
	e := json.NewEncoder(&buf)
	e.SetEscapeHTML(false)
	e.SetIndent("", "  ")
	if err := e.Encode(doc); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Primary is the top-level primary: the sealing key of a value whose scope
// has no flenc_primaries entry.
func (kr *Keyring) Primary() string {
	if kr == nil {
		return ""
	}
	return kr.primary
}

// Kids returns every kid of every kind, sorted: the labels of
// flechtwerk_keyring_keys_loaded.
func (kr *Keyring) Kids() []string {
	if kr == nil {
		return nil
	}
	kids := make([]string, 0, len(kr.keys))
	for _, k := range kr.keys {
		kids = append(kids, k.kid)
	}
	slices.Sort(kids)
	return kids
}

// Has reports whether kid is in the keyring, of any kind.
func (kr *Keyring) Has(kid string) bool {
	if kr == nil {
		return false
	}
	_, ok := kr.byKid[kid]
	return ok
}

// Type is the kind of the key under kid, or "" when the keyring holds none.
func (kr *Keyring) Type(kid string) KeyType {
	if k, ok := kr.lookup(kid); ok {
		return k.typ
	}
	return ""
}

func (kr *Keyring) lookup(kid string) (*key, bool) {
	if kr == nil {
		return nil, false
	}
	k, ok := kr.byKid[kid]
	return k, ok
}

// PrimaryFor returns a copy of flenc_primaries (scope → sealing kid).
func (kr *Keyring) PrimaryFor() map[string]string { return maps.Clone(kr.primaries) }

// SigningFor returns a copy of flenc_signing (scope → signing kid).
func (kr *Keyring) SigningFor() map[string]string { return maps.Clone(kr.signing) }

// List describes the keys in document order: kid and primary flag.
func (kr *Keyring) List() []KeyInfo {
	out := make([]KeyInfo, len(kr.keys))
	for i, k := range kr.keys {
		out[i] = KeyInfo{Kid: k.kid, Primary: k.kid == kr.primary}
	}
	return out
}

// Entries describes every key in document order with its kind, halves,
// binding and roles: what `keys list` shows. Never key bytes.
func (kr *Keyring) Entries() []Entry {
	out := make([]Entry, len(kr.keys))
	for i, k := range kr.keys {
		out[i] = kr.entry(k)
	}
	return out
}

// Entry describes the key under kid (see Entries).
func (kr *Keyring) Entry(kid string) (Entry, bool) {
	k, ok := kr.lookup(kid)
	if !ok {
		return Entry{}, false
	}
	return kr.entry(k), true
}

func (kr *Keyring) entry(k *key) Entry {
	e := Entry{Kid: k.kid, Type: k.typ, Private: k.private(), Scopes: slices.Clone(k.scopes),
		Primary: k.kid == kr.primary, PrimaryFor: []string{}, SigningFor: []string{}, Mismatch: k.mismatch}
	if e.Scopes == nil {
		e.Scopes = []string{}
	}
	for _, s := range slices.Sorted(maps.Keys(kr.primaries)) {
		if kr.primaries[s] == k.kid {
			e.PrimaryFor = append(e.PrimaryFor, s)
		}
	}
	for _, s := range slices.Sorted(maps.Keys(kr.signing)) {
		if kr.signing[s] == k.kid {
			e.SigningFor = append(e.SigningFor, s)
		}
	}
	return e
}

// SealingKid is the kid that seals a value of scope ("" for an unscoped
// value): flenc_primaries[scope], else primary. A bound key whose binding
// does not cover the scope refuses with KindKeyBinding (an unscoped value
// is outside every binding), as upstream's sealing_kid does. A rotation
// sweep targets this kid for each value.
func (kr *Keyring) SealingKid(scope string) (string, error) {
	if kr == nil || kr.primary == "" {
		return "", &Error{Kind: KindNoKeyring, Scope: scope, Detail: "no keyring to seal with"}
	}
	kid, ok := kr.primaries[scope]
	if !ok || scope == "" {
		kid = kr.primary
	}
	k := kr.byKid[kid]
	if !k.bound(scope) {
		what := "an unscoped value"
		if scope != "" {
			what = fmt.Sprintf("scope %q", scope)
		}
		return "", &Error{Kind: KindKeyBinding, Kid: kid, Scope: scope, Detail: fmt.Sprintf(
			"key %q is bound to scopes %q and cannot seal %s; map the scope to a key bound to it (flenc_primaries)", kid, k.scopes, what)}
	}
	return kid, nil
}

// SigningKid is the kid that signs a value of scope: flenc_signing[scope],
// or KindNoSigningKey when none is configured.
func (kr *Keyring) SigningKid(scope string) (string, error) {
	if kr == nil {
		return "", &Error{Kind: KindNoKeyring, Scope: scope, Detail: "no keyring to sign with"}
	}
	kid, ok := kr.signing[scope]
	if !ok || scope == "" {
		return "", &Error{Kind: KindNoSigningKey, Scope: scope, Detail: "the keyring names no signing key for this scope (flenc_signing)"}
	}
	return kid, nil
}

// DeriveKey derives a 32-byte key for another purpose from the primary
// key's secret bytes: HKDF-SHA-256 with label as info. The secret bytes are
// an oct primary's key or an X25519 primary's private half; a seal-only
// X25519 primary has none (KindSealOnly), and callers fall back as they do
// without a keyring. The derived key is bound to this keyring (and changes
// with its primary) but cannot seal, open or sign anything.
func (kr *Keyring) DeriveKey(label string) ([]byte, error) {
	if kr == nil || kr.primary == "" {
		return nil, &Error{Kind: KindNoKeyring, Detail: "no keyring to derive a key from"}
	}
	k := kr.byKid[kr.primary]
	if !k.private() {
		return nil, &Error{Kind: KindSealOnly, Kid: k.kid, Detail: "the primary holds only the public half; no secret to derive a key from"}
	}
	return hkdf.Key(sha256.New, k.secret, nil, label, KeySize)
}

// Equal reports whether both keyrings hold the same keys (kind, bytes,
// binding), primary, flenc_primaries and flenc_signing. Unknown members and
// the file's protection are not compared.
func (kr *Keyring) Equal(o *Keyring) bool {
	if kr == nil || o == nil {
		return kr == o
	}
	if kr.primary != o.primary || len(kr.byKid) != len(o.byKid) ||
		!maps.Equal(kr.primaries, o.primaries) || !maps.Equal(kr.signing, o.signing) {
		return false
	}
	for kid, k := range kr.byKid {
		if ok, found := o.byKid[kid]; !found || !k.same(ok) {
			return false
		}
	}
	return true
}

// String shows the kids and the primary, never key bytes.
func (kr *Keyring) String() string {
	if kr == nil {
		return "Keyring(nil)"
	}
	return fmt.Sprintf("Keyring(primary=%q, kids=%q)", kr.primary, kr.Kids())
}

// Format redacts under every verb, %#v and %+v included.
func (kr *Keyring) Format(f fmt.State, _ rune) { fmt.Fprint(f, kr.String()) }

// MarshalJSON is the redacted view ({"primary":…,"keys":[{"kid":…,"primary":…}]}),
// so a keyring printed with -o json by mistake shows no secrets. Use JWKS to
// write the real document, Entries for the full description.
func (kr *Keyring) MarshalJSON() ([]byte, error) {
	if kr == nil {
		return []byte("null"), nil
	}
	return json.Marshal(struct {
		Primary string    `json:"primary"`
		Keys    []KeyInfo `json:"keys"`
	}{kr.primary, kr.List()})
}

func (kr *Keyring) clone() *Keyring {
	out := &Keyring{
		keys:      slices.Clone(kr.keys),
		byKid:     make(map[string]*key, len(kr.byKid)+1),
		primary:   kr.primary,
		primaries: maps.Clone(kr.primaries),
		signing:   maps.Clone(kr.signing),
		extra:     kr.extra, // never mutated after parse
		protect:   kr.protect,
	}
	if out.primaries == nil {
		out.primaries = map[string]string{}
	}
	if out.signing == nil {
		out.signing = map[string]string{}
	}
	for kid, k := range kr.byKid {
		out.byKid[kid] = k
	}
	return out
}

func (kr *Keyring) setExtra(name string, v json.RawMessage) {
	if kr.extra == nil {
		kr.extra = map[string]json.RawMessage{}
	}
	kr.extra[name] = v
}

// RolelessKids are the keyring's keys that serve no role (neither the
// primary nor a scope's sealing or signing key): what a finished sweep
// leaves to remove.
func (kr *Keyring) RolelessKids() []string {
	if kr == nil {
		return nil
	}
	var out []string
	for _, e := range kr.Entries() {
		if !e.Primary && len(e.PrimaryFor) == 0 && len(e.SigningFor) == 0 {
			out = append(out, e.Kid)
		}
	}
	slices.Sort(out)
	return out
}
