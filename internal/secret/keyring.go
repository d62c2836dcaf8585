package secret

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/flecht-dev/flecht/internal/attr"
)

// KeySize is the only key length minted or accepted: AES-256.
const KeySize = 32

// MaxKidLen caps the kids AddKey creates, in bytes: room for any naming
// scheme, short enough for a table and a metric label.
const MaxKidLen = 128

// Keyring holds named AES-256 keys and which one is primary (used to
// encrypt). Its document form is an RFC 7517 JWK Set of oct keys plus a
// top-level "primary", the same file the Python library and any JOSE library
// load.
//
// A Keyring is immutable and safe for concurrent use; Add, AddKey, Promote and
// Remove return a changed copy. Printing it (String, Format, MarshalJSON)
// shows kids only; the key bytes leave the package only through JWKS.
type Keyring struct {
	keys    []*key // document order
	byKid   map[string]*key
	primary string
	extra   map[string]json.RawMessage // unknown top-level members, kept on save
}

// key is one named key. It sits behind a pointer everywhere so that fmt,
// walking any struct that holds a Keyring, prints an address and never the
// bytes.
type key struct {
	kid   string
	raw   [KeySize]byte
	aead  cipher.AEAD
	extra map[string]json.RawMessage // unknown JWK members, kept on save
}

func (*key) String() string { return "key(redacted)" }

// Format redacts under every verb, %#v included.
func (k *key) Format(f fmt.State, _ rune) { fmt.Fprint(f, k.String()) }

func newKey(kid string, raw []byte) (*key, error) {
	if len(raw) != KeySize {
		return nil, fmt.Errorf("key %q is %d bytes, want %d (AES-256)", kid, len(raw), KeySize)
	}
	k := &key{kid: kid}
	copy(k.raw[:], raw)
	block, err := aes.NewCipher(k.raw[:])
	if err != nil {
		return nil, err
	}
	// One AEAD per key, built once: it holds no per-call state, so
	// concurrent Seal/Open share it.
	if k.aead, err = cipher.NewGCM(block); err != nil {
		return nil, err
	}
	return k, nil
}

// KeyInfo is what may be shown about a key.
type KeyInfo struct {
	Kid     string `json:"kid"`
	Primary bool   `json:"primary"`
}

// NewKeyring makes a keyring with one fresh random key, which is primary.
func NewKeyring(kid string) (*Keyring, error) {
	return (&Keyring{}).Add(kid)
}

// ParseKeyring reads and validates a JWK Set document: every entry
// {"kty":"oct","kid":<non-empty, unique>,"k":<unpadded base64url of exactly
// 32 bytes>}, at least one key, and a "primary" naming one of them. Unknown
// members are ignored (and kept by JWKS), as JWK says. Errors are
// KindKeyringInvalid and never contain key material.
func ParseKeyring(doc []byte) (*Keyring, error) {
	bad := func(format string, args ...any) error {
		return &Error{Kind: KindKeyringInvalid, Detail: fmt.Sprintf(format, args...)}
	}
	top, err := attr.Members(bytes.TrimSpace(doc))
	if err != nil || len(bytes.TrimSpace(doc)) == 0 {
		return nil, bad("not a JSON object")
	}
	kr := &Keyring{byKid: map[string]*key{}}
	var keysRaw, primaryRaw json.RawMessage
	for _, m := range top {
		switch m.Key {
		case "keys":
			keysRaw = m.Value
		case "primary":
			primaryRaw = m.Value
		default:
			kr.setExtra(m.Key, m.Value)
		}
	}
	var entries []json.RawMessage
	if keysRaw == nil || json.Unmarshal(keysRaw, &entries) != nil {
		return nil, bad(`"keys" must be an array of JWKs`)
	}
	if len(entries) == 0 {
		return nil, bad("a keyring needs at least one key")
	}
	for i, entry := range entries {
		k, err := parseJWK(entry)
		if err != nil {
			return nil, bad("keys[%d]: %v", i, err)
		}
		if _, dup := kr.byKid[k.kid]; dup {
			return nil, bad("duplicate kid %q", k.kid)
		}
		kr.keys = append(kr.keys, k)
		kr.byKid[k.kid] = k
	}
	if primaryRaw == nil {
		return nil, bad(`no top-level "primary"`)
	}
	if json.Unmarshal(primaryRaw, &kr.primary) != nil {
		return nil, bad(`"primary" must be a string`)
	}
	if _, ok := kr.byKid[kr.primary]; !ok {
		return nil, bad("primary %q is not among the keys %q", kr.primary, kr.Kids())
	}
	return kr, nil
}

func parseJWK(entry json.RawMessage) (*key, error) {
	members, err := attr.Members(entry)
	if err != nil {
		return nil, fmt.Errorf("not a JSON object")
	}
	var kty, kid, k *string
	extra := map[string]json.RawMessage{}
	for _, m := range members {
		var s string
		switch m.Key {
		case "kty", "kid", "k":
			if json.Unmarshal(m.Value, &s) != nil {
				return nil, fmt.Errorf("%q must be a string", m.Key)
			}
		}
		switch m.Key {
		case "kty":
			kty = &s
		case "kid":
			kid = &s
		case "k":
			k = &s
		default:
			extra[m.Key] = m.Value
		}
	}
	if kty == nil || *kty != "oct" {
		return nil, fmt.Errorf(`"kty" must be "oct" (symmetric); only oct keys are used`)
	}
	if kid == nil || *kid == "" {
		return nil, fmt.Errorf(`every JWK needs a non-empty "kid"`)
	}
	if k == nil {
		return nil, fmt.Errorf(`JWK %q has no "k"`, *kid)
	}
	// Strict: the unpadded base64url alphabet only, canonical trailing bits.
	// The message gives the length, never the characters.
	raw, err := base64.RawURLEncoding.Strict().DecodeString(*k)
	if err != nil || strings.ContainsAny(*k, "\r\n") {
		return nil, fmt.Errorf(`JWK %q: "k" is not unpadded base64url (%d chars)`, *kid, len(*k))
	}
	key, err := newKey(*kid, raw)
	if err != nil {
		return nil, err
	}
	if len(extra) > 0 {
		key.extra = extra
	}
	return key, nil
}

// JWKS is the keyring document, ready to write to a 0600 file. It contains
// the key bytes: never log it. Members are sorted, as the upstream examples
// show, and unknown members read from the original document are kept.
func (kr *Keyring) JWKS() ([]byte, error) {
	doc := map[string]any{}
	for name, v := range kr.extra {
		doc[name] = v
	}
	keys := make([]map[string]any, len(kr.keys))
	for i, k := range kr.keys {
		m := map[string]any{}
		for name, v := range k.extra {
			m[name] = v
		}
		m["kty"] = "oct"
		m["kid"] = k.kid
		m["k"] = base64.RawURLEncoding.EncodeToString(k.raw[:])
		keys[i] = m
	}
	doc["keys"] = keys
	doc["primary"] = kr.primary
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "    ")
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Primary is the kid that encrypts.
func (kr *Keyring) Primary() string { return kr.primary }

// Kids returns every kid, sorted.
func (kr *Keyring) Kids() []string {
	kids := make([]string, 0, len(kr.keys))
	for _, k := range kr.keys {
		kids = append(kids, k.kid)
	}
	slices.Sort(kids)
	return kids
}

// DeriveKey derives a 32-byte key for another purpose from the primary
// key: HKDF-SHA-256 with label as info. The derived key is bound to this
// keyring (and changes with its primary) but cannot seal or open a token.
func (kr *Keyring) DeriveKey(label string) ([]byte, error) {
	if kr == nil || kr.primary == "" {
		return nil, &Error{Kind: KindNoKeyring, Detail: "no keyring to derive a key from"}
	}
	return hkdf.Key(sha256.New, kr.byKid[kr.primary].raw[:], nil, label, KeySize)
}

// Has reports whether kid is in the keyring.
func (kr *Keyring) Has(kid string) bool {
	if kr == nil {
		return false
	}
	_, ok := kr.byKid[kid]
	return ok
}

// List describes the keys in document order, without key bytes.
func (kr *Keyring) List() []KeyInfo {
	out := make([]KeyInfo, len(kr.keys))
	for i, k := range kr.keys {
		out[i] = KeyInfo{Kid: k.kid, Primary: k.kid == kr.primary}
	}
	return out
}

// Add returns a copy with a fresh random key under kid (crypto/rand). The
// primary does not change, except in an empty keyring, where the new key
// becomes primary. Rotation is reader-first: add everywhere, then Promote.
func (kr *Keyring) Add(kid string) (*Keyring, error) {
	raw := make([]byte, KeySize)
	if _, err := rand.Read(raw); err != nil {
		return nil, err
	}
	return kr.AddKey(kid, raw)
}

// AddKey is Add with given key bytes (importing a key, test vectors). The
// kid must pass checkNewKid.
func (kr *Keyring) AddKey(kid string, raw []byte) (*Keyring, error) {
	if err := checkNewKid(kid); err != nil {
		return nil, err
	}
	if kr.Has(kid) {
		return nil, &Error{Kind: KindKeyringConflict, Kid: kid, Detail: "kid already in the keyring"}
	}
	k, err := newKey(kid, raw)
	if err != nil {
		return nil, &Error{Kind: KindKeyringInvalid, Kid: kid, Detail: err.Error()}
	}
	out := kr.clone()
	out.keys = append(out.keys, k)
	out.byKid[kid] = k
	if out.primary == "" {
		out.primary = kid
	}
	return out, nil
}

// checkNewKid is the rule for kids this package creates: printable text
// that shows in one piece in a table, a log line and a metric label. No
// control or other non-printable characters, no surrounding whitespace, at
// most MaxKidLen bytes. Loading is as lenient as upstream (any non-empty
// string), so a keyring written elsewhere still loads: only creation is
// refused. The kid is not quoted back: it may hold what breaks a line.
func checkNewKid(kid string) error {
	bad := func(detail string) error { return &Error{Kind: KindKeyringInvalid, Detail: detail} }
	switch {
	case kid == "" || !utf8.ValidString(kid):
		return bad("a kid must be non-empty UTF-8 text")
	case len(kid) > MaxKidLen:
		return bad(fmt.Sprintf("a kid is at most %d bytes; this one has %d", MaxKidLen, len(kid)))
	case strings.TrimSpace(kid) != kid:
		return bad("a kid must not start or end with whitespace")
	case strings.IndexFunc(kid, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0:
		return bad("a kid must be printable: no control, format or line-breaking characters")
	}
	return nil
}

// Promote returns a copy in which kid is primary.
func (kr *Keyring) Promote(kid string) (*Keyring, error) {
	if !kr.Has(kid) {
		return nil, &Error{Kind: KindUnknownKid, Kid: kid, Detail: "cannot promote a key the keyring does not hold"}
	}
	out := kr.clone()
	out.primary = kid
	return out, nil
}

// Remove returns a copy without kid. Removing the primary is refused:
// promote another key first.
func (kr *Keyring) Remove(kid string) (*Keyring, error) {
	if !kr.Has(kid) {
		return nil, &Error{Kind: KindUnknownKid, Kid: kid, Detail: "no such key"}
	}
	if kid == kr.primary {
		return nil, &Error{Kind: KindKeyringConflict, Kid: kid, Detail: "refusing to remove the primary key; promote another key first"}
	}
	out := kr.clone()
	out.keys = slices.DeleteFunc(out.keys, func(k *key) bool { return k.kid == kid })
	delete(out.byKid, kid)
	return out, nil
}

// Equal reports whether both keyrings hold the same kids, bytes and primary.
func (kr *Keyring) Equal(o *Keyring) bool {
	if kr == nil || o == nil {
		return kr == o
	}
	if kr.primary != o.primary || len(kr.byKid) != len(o.byKid) {
		return false
	}
	for kid, k := range kr.byKid {
		ok, found := o.byKid[kid]
		if !found || subtle.ConstantTimeCompare(k.raw[:], ok.raw[:]) != 1 {
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
// write the real document.
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
		keys:    slices.Clone(kr.keys),
		byKid:   make(map[string]*key, len(kr.byKid)+1),
		primary: kr.primary,
		extra:   kr.extra, // never mutated after parse
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
