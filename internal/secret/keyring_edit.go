package secret

import (
	"crypto/ecdh"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The edits. Each returns a changed copy that passed validate, so an edit
// whose result upstream would refuse to load is refused: KindKeyringConflict
// naming the rule (exit 3 in the CLI). A name that is no valid new kid or
// scope is KindKeyringInvalid (a usage error); a kid the keyring does not
// hold is KindUnknownKid.

// NewKeyring makes a keyring with one fresh random oct key, which is primary.
func NewKeyring(kid string) (*Keyring, error) {
	return (&Keyring{}).Add(kid)
}

// Add returns a copy with a fresh random oct key under kid (crypto/rand).
// The primary does not change, except in an empty keyring, where the new
// key becomes primary. Rotation is reader-first: add everywhere, then Promote.
func (kr *Keyring) Add(kid string) (*Keyring, error) {
	return kr.Generate(kid, TypeOct, nil)
}

// AddKey is Add with given oct key bytes (importing a key, test vectors).
func (kr *Keyring) AddKey(kid string, raw []byte) (*Keyring, error) {
	if err := checkNewKid(kid); err != nil {
		return nil, err
	}
	if len(raw) != KeySize {
		return nil, &Error{Kind: KindKeyringInvalid, Kid: kid, Detail: fmt.Sprintf("key %q is %d bytes, want %d (AES-256)", kid, len(raw), KeySize)}
	}
	return kr.withKey(&key{kid: kid, typ: TypeOct, secret: slices.Clone(raw)})
}

// Generate returns a copy with a fresh key of kind typ under kid, bound to
// scopes (nil or empty: unbound, which only an oct key may be). In an empty
// keyring a sealing key becomes primary.
func (kr *Keyring) Generate(kid string, typ KeyType, scopes []string) (*Keyring, error) {
	if err := checkNewKid(kid); err != nil {
		return nil, err
	}
	k := &key{kid: kid, typ: typ}
	var err error
	if k.scopes, err = newScopes(scopes); err != nil {
		return nil, err
	}
	switch typ {
	case TypeOct:
		k.secret = make([]byte, KeySize)
		rand.Read(k.secret) // never fails (crypto/rand)
	case TypeX25519:
		priv, err := ecdh.X25519().GenerateKey(rand.Reader)
		if err != nil {
			return nil, err
		}
		k.secret, k.public = priv.Bytes(), priv.PublicKey().Bytes()
	case TypeEd25519:
		pub, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return nil, err
		}
		k.secret, k.public = priv.Seed(), []byte(pub)
	default:
		return nil, &Error{Kind: KindKeyringInvalid, Kid: kid, Detail: fmt.Sprintf("unknown key type %s; use oct, x25519 or ed25519", Echo(string(typ), knownKeyTypes))}
	}
	return kr.withKey(k)
}

var knownKeyTypes = idents("oct", "x25519", "ed25519", "OKP", "EC", "RSA", "X25519", "Ed25519")

// Import returns a copy with one more entry parsed from a single JWK, as
// upstream's with_jwk: a private half is kept when the JWK carries one, and
// so is its flenc_scopes binding; unknown members are kept too. A kid the
// keyring holds is refused (KindKeyringConflict); the kid must be a valid
// new kid. In an empty keyring a sealing key becomes primary (upstream's
// keyring_from_jwk, for an import that creates the file).
func (kr *Keyring) Import(jwk []byte) (*Keyring, error) {
	var held map[string]*key
	if kr != nil {
		held = kr.byKid
	}
	k, perr := parseJWK(jwk, held)
	if perr != nil {
		if strings.HasPrefix(perr.Detail, "duplicate kid") {
			perr.Kind = KindKeyringConflict
			perr.Detail = "kid already in the keyring; its key is never replaced"
		}
		return nil, perr
	}
	if err := checkNewKid(k.kid); err != nil {
		return nil, err
	}
	if err := k.checkNew(); err != nil {
		return nil, err
	}
	return kr.withKey(k)
}

// withKey appends k (its kid not held) and validates the result.
func (kr *Keyring) withKey(k *key) (*Keyring, error) {
	if kr.Has(k.kid) {
		return nil, &Error{Kind: KindKeyringConflict, Kid: k.kid, Detail: "kid already in the keyring; its key is never replaced"}
	}
	out := kr.cloneOrEmpty()
	out.keys = append(out.keys, k)
	out.byKid[k.kid] = k
	if out.primary == "" && k.sealing() {
		out.primary = k.kid
	}
	return out.validated(k.kid)
}

// PublicJWK is the public half of the entry kid as one JWK document
// ({"crv","kid","kty","x","flenc_scopes"}, sorted, two-space indent): what
// `keys export` prints, for a party that should seal to a recipient or check
// a signer's values. Never the private half; an oct key has no public half
// (KindKeyringConflict).
func (kr *Keyring) PublicJWK(kid string) ([]byte, error) {
	k, ok := kr.lookup(kid)
	if !ok {
		return nil, &Error{Kind: KindUnknownKid, Kid: kid, Detail: "no such key"}
	}
	if k.typ == TypeOct {
		return nil, &Error{Kind: KindKeyringConflict, Kid: kid, Detail: "a symmetric (oct) key has no public half to export"}
	}
	doc := map[string]any{"crv": okpCurve(k.typ), "kid": k.kid, "kty": "OKP",
		"x": b64url.EncodeToString(k.public), "flenc_scopes": k.scopes}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// Promote returns a copy in which kid is the top-level primary. It must be
// an oct or X25519 key (an Ed25519 key cannot seal).
func (kr *Keyring) Promote(kid string) (*Keyring, error) {
	if !kr.Has(kid) {
		return nil, &Error{Kind: KindUnknownKid, Kid: kid, Detail: "cannot promote a key the keyring does not hold"}
	}
	if err := kr.roleUsable(kid); err != nil {
		return nil, err
	}
	out := kr.clone()
	out.primary = kid
	return out.validated(kid)
}

// SetPrimaryFor returns a copy in which kid seals the values of scope
// (flenc_primaries[scope] = kid). kid must be an oct or X25519 key whose
// binding, if any, covers scope.
func (kr *Keyring) SetPrimaryFor(scope, kid string) (*Keyring, error) {
	if err := checkNewScope(scope); err != nil {
		return nil, err
	}
	if !kr.Has(kid) {
		return nil, &Error{Kind: KindUnknownKid, Kid: kid, Scope: scope, Detail: "cannot make a key the keyring does not hold a sealing key"}
	}
	if err := kr.roleUsable(kid); err != nil {
		return nil, err
	}
	out := kr.clone()
	out.primaries[scope] = kid
	return out.validated(kid)
}

// ClearPrimaryFor returns a copy without flenc_primaries[scope]: the scope's
// values are sealed under the top-level primary again.
func (kr *Keyring) ClearPrimaryFor(scope string) (*Keyring, error) {
	out := kr.clone()
	delete(out.primaries, scope)
	return out.validated("")
}

// SetSigningFor returns a copy in which kid signs the values of scope
// (flenc_signing[scope] = kid). kid must be an Ed25519 key holding its
// private half and bound to scope.
func (kr *Keyring) SetSigningFor(scope, kid string) (*Keyring, error) {
	if err := checkNewScope(scope); err != nil {
		return nil, err
	}
	if !kr.Has(kid) {
		return nil, &Error{Kind: KindUnknownKid, Kid: kid, Scope: scope, Detail: "cannot make a key the keyring does not hold a signing key"}
	}
	if err := kr.roleUsable(kid); err != nil {
		return nil, err
	}
	out := kr.clone()
	out.signing[scope] = kid
	return out.validated(kid)
}

// ClearSigningFor returns a copy without flenc_signing[scope].
func (kr *Keyring) ClearSigningFor(scope string) (*Keyring, error) {
	out := kr.clone()
	delete(out.signing, scope)
	return out.validated("")
}

// Remove returns a copy without kid. A kid that a role names is refused
// with KindKeyringConflict, naming the role to move first: the primary,
// any flenc_primaries entry, any flenc_signing entry. (flechtctl drops such
// roles silently, and 0.17 stages then refuse the file.)
func (kr *Keyring) Remove(kid string) (*Keyring, error) {
	if !kr.Has(kid) {
		return nil, &Error{Kind: KindUnknownKid, Kid: kid, Detail: "no such key"}
	}
	if kid == kr.primary {
		return nil, &Error{Kind: KindKeyringConflict, Kid: kid, Detail: "refusing to remove the primary key; promote another key first"}
	}
	for _, scope := range slices.Sorted(maps.Keys(kr.primaries)) {
		if kr.primaries[scope] == kid {
			return nil, &Error{Kind: KindKeyringConflict, Kid: kid, Scope: scope, Detail: fmt.Sprintf(
				"refusing to remove the sealing key of scope %q (flenc_primaries); make another key primary for that scope, or clear it, first", scope)}
		}
	}
	for _, scope := range slices.Sorted(maps.Keys(kr.signing)) {
		if kr.signing[scope] == kid {
			return nil, &Error{Kind: KindKeyringConflict, Kid: kid, Scope: scope, Detail: fmt.Sprintf(
				"refusing to remove the signing key of scope %q (flenc_signing); make another key the signing key for that scope, or clear it, first", scope)}
		}
	}
	out := kr.clone()
	out.keys = slices.DeleteFunc(out.keys, func(k *key) bool { return k.kid == kid })
	delete(out.byKid, kid)
	return out.validated(kid)
}

// roleUsable refuses a role for a broken pair (KindKeyringInvalid): every
// seal, open or signature under the role would fail.
func (kr *Keyring) roleUsable(kid string) error {
	if k, ok := kr.lookup(kid); ok && k.mismatch {
		return &Error{Kind: KindKeyringInvalid, Kid: kid, Detail: fmt.Sprintf(
			"the %s key's private half does not match its public half: a broken pair takes no role (replace the key)", k.typ)}
	}
	return nil
}

// validated runs validate on an edit's result: a failure is the edit's
// refusal (KindKeyringConflict), naming kid when the rule names none.
func (kr *Keyring) validated(kid string) (*Keyring, error) {
	if err := kr.validate(); err != nil {
		err.Kind = KindKeyringConflict
		if err.Kid == "" {
			err.Kid = kid
		}
		err.Detail = "the keyring would break a rule: " + err.Detail
		return nil, err
	}
	return kr, nil
}

func (kr *Keyring) cloneOrEmpty() *Keyring {
	if kr == nil || kr.byKid == nil {
		out := &Keyring{byKid: map[string]*key{}, primaries: map[string]string{}, signing: map[string]string{}}
		if kr != nil {
			out.primary, out.extra, out.protect = kr.primary, kr.extra, kr.protect
		}
		return out
	}
	return kr.clone()
}

// checkNewKid is the rule for kids this package creates: printable text
// that shows in one piece in a table, a log line and a metric label. No
// control or other non-printable characters, no surrounding whitespace, at
// most MaxKidLen bytes. Loading is as lenient as upstream (any non-empty
// string), so a keyring written elsewhere still loads: only creation is
// refused. The kid is not quoted back: it may hold what breaks a line.
func checkNewKid(kid string) error {
	if why := nameProblem(kid); why != "" {
		return &Error{Kind: KindKeyringInvalid, Detail: "a kid " + why}
	}
	return nil
}

// checkNewScope is checkNewKid's rule for the scope names this package
// writes into a keyring (flenc_scopes, flenc_primaries, flenc_signing).
func checkNewScope(scope string) error {
	if why := nameProblem(scope); why != "" {
		return &Error{Kind: KindKeyringInvalid, Detail: "a scope " + why}
	}
	return nil
}

func nameProblem(s string) string {
	switch {
	case s == "" || !utf8.ValidString(s):
		return "must be non-empty UTF-8 text"
	case len(s) > MaxKidLen:
		return fmt.Sprintf("is at most %d bytes; this one has %d", MaxKidLen, len(s))
	case strings.TrimSpace(s) != s:
		return "must not start or end with whitespace"
	case strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0:
		return "must be printable: no control, format or line-breaking characters"
	}
	return ""
}

// newScopes checks and normalizes a binding given to Generate.
func newScopes(scopes []string) ([]string, error) {
	if len(scopes) == 0 {
		return nil, nil
	}
	for _, s := range scopes {
		if err := checkNewScope(s); err != nil {
			return nil, err
		}
	}
	out := slices.Clone(scopes)
	slices.Sort(out)
	return slices.Compact(out), nil
}
