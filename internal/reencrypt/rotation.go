package reencrypt

import (
	"slices"

	"github.com/flecht-dev/flecht/internal/secret"
)

// Rotation is what a rotation to one key still has to move, from a scan
// made with the keyring: tokens of every generation under other kids in
// the scopes the key seals, and signatures by other signers in the scopes
// the key signs.
type Rotation struct {
	OldTokens   int            `json:"old_tokens"`
	ByOldKid    map[string]int `json:"by_old_kid"`
	OldSigned   int            `json:"old_signed"` // signed values, and signatures inside tokens
	ByOldSigner map[string]int `json:"by_old_signer"`
}

// Rotation counts, for a rotation to newKid, the values not yet under it
// in the scopes it serves. The scopes follow from the key: an Ed25519 key
// signs the scopes of its binding; a bound oct or X25519 key seals the
// scopes of its binding; an unbound key (or one the keyring does not hold
// yet) becomes the primary and seals every scope that flenc_primaries does
// not give to another key. Tokens in the other scopes belong to their own
// rotations. A corrupt value that names an old kid counts: it would stop
// that kid's removal too. A non-empty scope names the rotated role
// outright (`rotate-plan --scope`: the key becomes flenc_primaries[scope],
// or for an Ed25519 key flenc_signing[scope]): then only that scope's
// values count.
func (r *ScanReport) Rotation(kr *secret.Keyring, newKid, scope string) Rotation {
	rot := Rotation{ByOldKid: map[string]int{}, ByOldSigner: map[string]int{}}
	var binding []string
	typ := secret.KeyType("")
	if kr != nil && kr.Has(newKid) {
		typ = kr.Type(newKid)
		if e, ok := kr.Entry(newKid); ok {
			binding = e.Scopes
		}
	}
	rotatedScope := scope
	seals := func(scope string) bool {
		switch {
		case typ == secret.TypeEd25519:
			return false
		case rotatedScope != "":
			return scope == rotatedScope
		case len(binding) > 0:
			return slices.Contains(binding, scope)
		}
		pinned, ok := "", false
		if kr != nil && scope != "" {
			pinned, ok = kr.PrimaryFor()[scope]
		}
		return !ok || pinned == newKid
	}
	signs := func(scope string) bool {
		return typ == secret.TypeEd25519 && slices.Contains(binding, scope) && (rotatedScope == "" || scope == rotatedScope)
	}
	for _, e := range r.Entries {
		token := e.FieldMode != ModeSigned && e.Kid != "" &&
			(e.Status == secret.StatusEncrypted || (e.Status == secret.StatusCorrupt && e.Alg != "Ed25519"))
		if token && e.Kid != newKid && seals(e.FieldScope) {
			rot.OldTokens++
			rot.ByOldKid[e.Kid]++
		}
		if e.Signer != "" && e.Signer != newKid && signs(e.FieldScope) {
			rot.OldSigned++
			rot.ByOldSigner[e.Signer]++
		}
	}
	return rot
}
