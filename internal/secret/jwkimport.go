package secret

import (
	"encoding/json"
	"slices"

	"github.com/flecht-dev/flecht/internal/attr"
	"github.com/flecht-dev/flecht/internal/exitcode"
)

// JWKInfo is what an import needs to know of its JWK before the keyring
// parses it.
type JWKInfo struct {
	HadScopes bool   // it carries its own flenc_scopes
	Crv       string // its crv member, if a string
}

// PrepareJWK checks b, the one JWK an import adds (read from name), and
// applies scopes as its binding when it has none: a usage error for
// anything else (a JWK Set, a protected keyring, not an object, an unbound
// OKP key without scopes, scopes that differ from the JWK's binding). Its
// key material is never quoted.
func PrepareJWK(b []byte, name string, scopes []string) (jwk []byte, info JWKInfo, err error) {
	usage := func(format string, args ...any) ([]byte, JWKInfo, error) {
		return nil, JWKInfo{}, exitcode.Usagef(format, args...)
	}
	if IsProtectedDocument(b) {
		return usage("%s is a password-protected keyring, not one JWK: export one key from it with 'flecht keys export KID'", name)
	}
	members, err := attr.Members(b)
	if err != nil {
		return usage("%s is not one JWK: not a JSON object", name)
	}
	m := map[string]json.RawMessage{}
	for _, mem := range members {
		m[mem.Key] = mem.Value
	}
	if _, ok := m["keys"]; ok {
		return usage("%s is a JWK Set (a keyring), not one JWK: export one key from it with 'flecht keys export KID'", name)
	}
	var kty string
	_ = json.Unmarshal(m["kty"], &kty)
	_ = json.Unmarshal(m["crv"], &info.Crv)
	raw, hadScopes := m["flenc_scopes"]
	info.HadScopes = hadScopes
	switch {
	case hadScopes && len(scopes) > 0:
		var bound []string
		if json.Unmarshal(raw, &bound) != nil || !sameSet(bound, scopes) {
			return usage("the JWK is bound by its own flenc_scopes, which --scope cannot change; drop --scope")
		}
	case !hadScopes && len(scopes) > 0:
		scopes := slices.Clone(scopes)
		slices.Sort(scopes)
		m["flenc_scopes"], _ = json.Marshal(slices.Compact(scopes))
		if b, err = json.Marshal(m); err != nil {
			return nil, JWKInfo{}, err
		}
	case !hadScopes && kty == "OKP":
		return usage("the JWK is an OKP (x25519 or ed25519) key without flenc_scopes: give --scope S to bind it to the scopes it serves")
	}
	return b, info, nil
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}
