package reencrypt

import (
	"cmp"
	"encoding/json"
	"slices"

	"github.com/flecht-dev/flecht/internal/attr"
	"github.com/flecht-dev/flecht/internal/secret"
)

// Action is what a sweep does with one secret value.
type Action string

const (
	ActNone         Action = ""                  // at its target: a token under its scope's sealing kid, in its scope
	ActRotate       Action = "rotate"            // a token under another kid: re-sealed under its scope's sealing kid
	ActScopeUpgrade Action = "scope_upgrade"     // an unscoped token of a scoped field, already under its sealing kid
	ActEncrypt      Action = "encrypt_plaintext" // a value in the clear sealed (--encrypt-plaintext); a signed one stays signed inside
	ActResign       Action = "resign"            // a verified signature by another signer, signed again by the scope's signing kid (--resign)
	ActPlaintext    Action = "plaintext"         // a value in the clear left alone (no --encrypt-plaintext)
	ActUnsigned     Action = "unsigned"          // a value its field wants signed, left alone: the sweep never signs what nobody signed
	ActBlocked      Action = "blocked"           // corrupt, or a token or signature that does not open or verify
)

// rule is what a sweep may do, with what.
type rule struct {
	kr               *secret.Keyring
	targets          targets
	encryptPlaintext bool // seal values in the clear
	resign           bool // re-sign verified signatures by a signer that is not the scope's signing kid
}

// decide is the sweep's rule for one value judged with the keyring.
//
// What each field mode allows: an encrypted field's values are re-sealed
// and, on request, values in the clear sealed. A signed field's values are
// never wrapped in a token (a SIGNED reader would refuse one), so an
// unsigned value there is left and reported. An encrypted-signed field's
// tokens are re-sealed with their payload, the signature inside, byte for
// byte; a signed value in the clear is sealed on request only when its
// signature verifies; an unsigned plaintext there would need a signature,
// which the sweep never makes: a signature vouches for who wrote the value,
// and the sweep did not write it. A verified signature inside a token of
// an encrypted field is re-signed with --resign like one of an
// encrypted-signed field: its signer is as needed there.
func decide(v Verdict, f *Field, t *ScopeTarget, r rule) Action {
	staleSigner := r.resign && v.Verify == VerifyOK && t.Signing != "" && v.Signer != t.Signing
	switch v.Status {
	case secret.StatusPlaintext:
		switch {
		case f.Signed():
			return ActUnsigned
		case r.encryptPlaintext && t.sealErr == nil:
			return ActEncrypt
		case r.encryptPlaintext:
			return ActBlocked
		}
		return ActPlaintext
	case secret.StatusSigned:
		switch f.Mode {
		case ModeSigned:
			if v.Verify != VerifyOK {
				return ActBlocked
			}
			if staleSigner {
				return ActResign
			}
			return ActNone
		case ModeEncryptedSigned:
			switch {
			case !r.encryptPlaintext:
				return ActPlaintext
			case v.Verify != VerifyOK || t.sealErr != nil:
				return ActBlocked
			}
			return ActEncrypt
		}
		// An encrypted field reads it as a plain string.
		switch {
		case !r.encryptPlaintext:
			return ActPlaintext
		case t.sealErr != nil:
			return ActBlocked
		}
		return ActEncrypt
	case secret.StatusEncrypted:
		switch {
		case f.Mode == ModeSigned:
			return ActUnsigned
		case v.Decrypt != DecryptOK, f.Mode == ModeEncryptedSigned && v.Verify != "" && v.Verify != VerifyOK && v.Verify != secret.KindUnsigned, t.sealErr != nil:
			// An encrypted value that is unsigned inside is a migration's
			// state, swept like any token; a signature that fails is not,
			// where the field reads it. An encrypted field's reader takes
			// the signed value as a string: its token moves whatever the
			// signature inside says.
			return ActBlocked
		case staleSigner:
			return ActResign
		case v.Kid != t.Sealing:
			return ActRotate
		case f.Scope != "" && v.TokenScope == "":
			return ActScopeUpgrade
		}
		return ActNone
	}
	return ActBlocked
}

// transformed is one record value after the sweep's rule.
type transformed struct {
	Value   []byte // the new value; equal to the input when nothing changed
	Changed bool
	Counts  ValueCounts
	Blocked []blockedSlot
	// What the record holds, for the plan's per-record counts.
	NonPrimary   bool // a token whose kid is not its scope's sealing kid
	ScopeUpgrade bool // an unscoped token in a scoped field
	Plaintext    bool // a value in the clear where the field encrypts
	Unsigned     bool // a value that is not signed where the field signs
	OldSigner    bool // a verified signature by a signer that is not its scope's signing kid
}

type blockedSlot struct {
	Label string
	Err   *secret.Error
}

// ValueCounts counts secret values by what the sweep does with them.
type ValueCounts struct {
	Rotate        int `json:"rotate"`
	ScopeUpgrade  int `json:"scope_upgrade"`
	Encrypt       int `json:"encrypt_plaintext"`
	Resign        int `json:"resign"`
	PlaintextLeft int `json:"plaintext_left"`
	UnsignedLeft  int `json:"unsigned_left"`
	OldSignerLeft int `json:"old_signer_left"` // verified signatures by an old signer, left (no --resign)
	Blocked       int `json:"blocked"`
	Unchanged     int `json:"unchanged"`
}

func (c *ValueCounts) add(o ValueCounts) {
	c.Rotate += o.Rotate
	c.ScopeUpgrade += o.ScopeUpgrade
	c.Encrypt += o.Encrypt
	c.Resign += o.Resign
	c.PlaintextLeft += o.PlaintextLeft
	c.UnsignedLeft += o.UnsignedLeft
	c.OldSignerLeft += o.OldSignerLeft
	c.Blocked += o.Blocked
	c.Unchanged += o.Unchanged
}

// transform applies the sweep's rule to one record value: every token not
// under its scope's sealing kid is re-sealed under it with the same payload
// bytes, every unscoped token of a scoped field is lifted into the scope,
// with encryptPlaintext every value in the clear that its field allows is
// sealed, and with resign every verified signature by an old signer is
// signed again. Only those values' bytes change; everything else in the
// record, its member order, whitespace and number spellings included,
// stays byte for byte.
func transform(value []byte, fields []Field, r rule) (transformed, error) {
	out := transformed{Value: value}
	slots, err := Slots(value, fields)
	if err != nil {
		return out, err
	}
	// The replaced values, each over its span in value: declared fields
	// never nest (ParseFields), so the spans never overlap.
	var edits []splice
	for _, s := range slots {
		f := s.Field
		j := judge(s, r.kr)
		t := r.targets.of(f.Scope)
		act := decide(j.Verdict, f, t, r)
		oldSigner := j.Verify == VerifyOK && t.Signing != "" && j.Signer != t.Signing
		out.NonPrimary = out.NonPrimary || (j.Status == secret.StatusEncrypted && f.Encrypted() && j.Kid != t.Sealing)
		out.ScopeUpgrade = out.ScopeUpgrade || (j.Status == secret.StatusEncrypted && f.Encrypted() && f.Scope != "" && j.TokenScope == "")
		out.Plaintext = out.Plaintext || j.Problem == secret.KindPlaintext
		out.Unsigned = out.Unsigned || j.Problem == secret.KindUnsigned || act == ActUnsigned
		out.OldSigner = out.OldSigner || oldSigner
		block := func(e *secret.Error) {
			out.Counts.Blocked++
			if e == nil {
				e = &secret.Error{Kind: secret.KindMalformed, Detail: "value cannot be read"}
			}
			out.Blocked = append(out.Blocked, blockedSlot{Label: s.Label(), Err: e})
		}
		// A signature by an old signer stays unless this value is signed
		// again (--resign), whatever else happens to it.
		if oldSigner && !(act == ActResign || act == ActEncrypt && r.resign && j.Status == secret.StatusSigned) {
			out.Counts.OldSignerLeft++
		}
		var repl []byte
		switch act {
		case ActNone:
			out.Counts.Unchanged++
			continue
		case ActPlaintext:
			out.Counts.PlaintextLeft++
			continue
		case ActUnsigned:
			out.Counts.UnsignedLeft++
			continue
		case ActBlocked:
			e := j.Err
			switch {
			case j.Problem == secret.KindPlaintext && j.verifyErr != nil:
				e = j.verifyErr // a signed value in the clear whose signature fails
			case j.Problem == "" || j.Problem == secret.KindPlaintext:
				e = t.sealErr // fine as it is, but its scope cannot be sealed
			}
			block(e)
			continue
		case ActRotate, ActScopeUpgrade:
			// Keyring.Reencrypt, without opening the token a second time:
			// the payload judge opened through the field's scope (for an
			// encrypted-signed field the signed value, byte for byte),
			// sealed under the scope's sealing kid.
			nt, err := r.kr.Encrypt(j.payload, f.Scope)
			if err != nil {
				block(asSecretError(err, f))
				continue
			}
			repl = jsonString(nt)
			if act == ActRotate {
				out.Counts.Rotate++
			} else {
				out.Counts.ScopeUpgrade++
			}
		case ActEncrypt:
			payload, err := clearPayload(s.Raw, j, f, r)
			if err == nil {
				var nt string
				if nt, err = r.kr.Encrypt(payload, f.Scope); err == nil {
					repl = jsonString(nt)
				}
			}
			if err != nil {
				block(asSecretError(err, f))
				continue
			}
			out.Counts.Encrypt++
			if oldSigner && r.resign {
				out.Counts.Resign++
			}
		case ActResign:
			sig, err := r.kr.Sign(j.signed, f.Scope)
			if err == nil && f.Mode == ModeSigned {
				repl = jsonString(sig)
			} else if err == nil {
				var nt string
				if nt, err = r.kr.Encrypt(jsonString(sig), f.Scope); err == nil {
					repl = jsonString(nt)
					if j.Kid != t.Sealing {
						out.Counts.Rotate++
					}
				}
			}
			if err != nil {
				block(asSecretError(err, f))
				continue
			}
			out.Counts.Resign++
		}
		edits = append(edits, splice{at: s.At, end: s.At + len(s.Raw), with: repl})
	}
	if len(edits) == 0 {
		return out, nil
	}
	out.Value, out.Changed = applySplices(value, edits), true
	return out, nil
}

// splice replaces value[at:end] with with.
type splice struct {
	at, end int
	with    []byte
}

// applySplices rewrites value in one pass: every byte outside the spans
// stays as it was. Parsing the record once per replaced field instead (to
// find the field again) was a third of the sweep's CPU.
func applySplices(value []byte, edits []splice) []byte {
	slices.SortFunc(edits, func(a, b splice) int { return cmp.Compare(a.at, b.at) })
	n := len(value)
	for _, e := range edits {
		n += len(e.with) - (e.end - e.at)
	}
	nv := make([]byte, 0, n)
	last := 0
	for _, e := range edits {
		nv = append(nv, value[last:e.at]...)
		nv = append(nv, e.with...)
		last = e.end
	}
	return append(nv, value[last:]...)
}

// clearPayload is what sealing a value in the clear encrypts: the canonical
// JSON of the value (a signed value's is its flsig string, so it stays
// signed inside), signed anew first when --resign finds an old signer.
func clearPayload(raw []byte, j judged, f *Field, r rule) ([]byte, error) {
	if j.Status == secret.StatusSigned && f.Mode == ModeEncryptedSigned && r.resign {
		if t := r.targets.of(f.Scope); t.Signing != "" && j.Signer != t.Signing {
			sig, err := r.kr.Sign(j.signed, f.Scope)
			if err != nil {
				return nil, err
			}
			return jsonString(sig), nil
		}
	}
	plain, err := attr.ParseJSON(raw)
	if err != nil {
		return nil, &secret.Error{Kind: secret.KindMalformed, Scope: f.Scope, Detail: "the value does not parse"}
	}
	payload, err := attr.Marshal(plain)
	if err != nil {
		return nil, &secret.Error{Kind: secret.KindMalformed, Scope: f.Scope, Detail: "the value has no canonical JSON form"}
	}
	return payload, nil
}

// jsonString quotes a token. Tokens are the prefix plus base64url and dots,
// which need no escape: those are quoted as they are, anything else by
// json.Marshal (whose reflection was a tenth of the sweep's rewrite).
func jsonString(s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			b, _ := json.Marshal(s)
			return b
		}
	}
	b := make([]byte, 0, len(s)+2)
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
