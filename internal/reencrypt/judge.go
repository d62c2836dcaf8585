package reencrypt

import (
	"cmp"
	"errors"
	"slices"
	"unicode/utf8"

	"github.com/flecht-dev/flecht/internal/attr"
	"github.com/flecht-dev/flecht/internal/jsonspan"
	"github.com/flecht-dev/flecht/internal/secret"
)

// Verdict is what a scan says about one secret value: what it is on the
// wire (Status), what its header names, the outcome of opening and
// verifying it with a keyring, and what is wrong with it for its field.
type Verdict struct {
	// Status is what the value is: encrypted (a flenc token that parses),
	// signed (a flsig value that parses, in the clear), plaintext (neither)
	// or corrupt (a flenc or flsig value that does not parse, or a token
	// whose header the kid's key kind refuses).
	Status secret.Status
	// Kid is the kid the value's header names: the sealing kid of a flenc
	// token, the signer of a flsig value.
	Kid        string
	TokenScope string // the stamped flenc_scope ("" unscoped)
	Alg        string // dir, ECDH-ES+A256KW (a flenc token) or Ed25519 (a flsig value)
	// Decrypt is the outcome of opening a flenc token with a keyring
	// through the field's scope: "ok" or the failing kind; "" when the
	// value is not a token the field opens. Without a keyring it is
	// scope_violation when the header alone breaks the field's scope
	// ratchet, else "".
	Decrypt secret.Kind
	// Verify is the verdict on the value's signature, judged through the
	// field's scope: "verified" or the failing kind (bad_signature,
	// unknown_signer, scope_violation, key_binding), or unsigned when a
	// token of an encrypted-signed field opens to a value that is not
	// signed. It covers a signed value in a signed or encrypted-signed
	// field, and the signed value inside a token of any encrypted field
	// (in an encrypted one a failure is no finding: its reader does not
	// verify). Without a keyring it is scope_violation when a signed
	// value's stamped scope is not the field's, else "".
	Verify secret.Kind
	// Signer is the kid of the signature: a flsig value's own kid, or
	// that of the signed value inside a token of an encrypted or
	// encrypted-signed field (known only once the token opens). Whatever
	// the field's mode, every signature found names its signer: a key is
	// needed by every stored signature it made.
	Signer string
	// Problem is what is wrong with the value for its field, "" when
	// nothing is: plaintext (not encrypted where the field encrypts),
	// unsigned (not signed where the field signs), or the kind that kept
	// it from parsing, opening or verifying.
	Problem secret.Kind
	Err     *secret.Error // the detail of Problem
}

// DecryptOK is Verdict.Decrypt for a token that opened.
const DecryptOK secret.Kind = "ok"

// VerifyOK is Verdict.Verify for a signature that verified.
const VerifyOK secret.Kind = "verified"

// Finding reports whether the verdict is a problem a scan gates on.
func (v Verdict) Finding() bool { return v.Problem != "" }

// judged is a verdict with what opening and verifying yielded, for the
// sweep to reuse without a second decryption.
type judged struct {
	Verdict
	payload   []byte        // the payload of a token that opened
	signed    []byte        // the payload of a signature that verified
	verifyErr *secret.Error // why a signature did not verify (also when Problem is another)
}

// Judge classifies one slot for its field, and with a keyring also opens
// its token and verifies its signature through the field's scope.
func Judge(s Slot, kr *secret.Keyring) Verdict {
	return judge(s, kr).Verdict
}

func judge(s Slot, kr *secret.Keyring) judged {
	f := s.Field
	if s.Problem != "" {
		return problem(judged{Verdict: Verdict{Status: secret.StatusCorrupt}}, &secret.Error{Kind: secret.KindMalformed, Scope: f.Scope, Detail: s.Problem})
	}
	tok, ok := plainString(s.Raw)
	if !ok {
		val, err := attr.ParseJSON(s.Raw)
		if err != nil {
			return problem(judged{Verdict: Verdict{Status: secret.StatusCorrupt}}, &secret.Error{Kind: secret.KindMalformed, Scope: f.Scope, Detail: "field value is not JSON"})
		}
		tok, _ = val.(string)
	}
	if !secret.IsEncrypted(tok) && !secret.IsSigned(tok) {
		if f.Mode == ModeSigned {
			return problem(judged{Verdict: Verdict{Status: secret.StatusPlaintext}}, &secret.Error{Kind: secret.KindUnsigned, Scope: f.Scope,
				Detail: "a value that is not signed in a signed field"})
		}
		return problem(judged{Verdict: Verdict{Status: secret.StatusPlaintext}}, &secret.Error{Kind: secret.KindPlaintext, Scope: f.Scope,
			Detail: "a value that is not encrypted in an encrypted field"})
	}
	if secret.IsSigned(tok) {
		h, err := secret.InspectHeader(tok)
		if err != nil {
			return corrupt(err, f)
		}
		j := judged{Verdict: Verdict{Kid: h.Kid, TokenScope: h.Scope, Alg: h.Alg, Status: secret.StatusSigned}}
		return judgeSigned(j, tok, f, kr)
	}
	// Parsed once: the header for the verdict, the rest for the opening.
	p, err := secret.ParseEncrypted(tok)
	if err != nil {
		return corrupt(err, f)
	}
	h := p.Header()
	j := judged{Verdict: Verdict{Kid: h.Kid, TokenScope: h.Scope, Alg: h.Alg, Status: secret.StatusEncrypted}}
	return judgeToken(j, p, f, kr)
}

// judgeSigned judges a flsig value. Only a signed field reads it as one:
// an encrypted field, or an encrypted-signed one (which wants it inside a
// token), sees a value in the clear, whose payload anyone can read.
func judgeSigned(j judged, tok string, f *Field, kr *secret.Keyring) judged {
	j.Signer = j.Kid
	switch f.Mode {
	case ModeSigned:
	case ModeEncryptedSigned:
		// Still verified: the sweep wraps it only when it verifies.
		j = problem(j, &secret.Error{Kind: secret.KindPlaintext, Kid: j.Kid, Scope: f.Scope, TokenScope: j.TokenScope,
			Detail: "a signed value that is not encrypted in an encrypted-signed field: its payload is readable"})
	default:
		// Upstream's ENCRYPTED reader refuses it (PlaintextSecretError),
		// so it is a finding of that kind; its status stays signed and its
		// signer is recorded. It is not verified: a signature is only read
		// where the field signs, and the sweep cannot re-sign it here.
		return problem(j, &secret.Error{Kind: secret.KindPlaintext, Kid: j.Kid, Scope: f.Scope, TokenScope: j.TokenScope,
			Detail: "a signed value in the clear in an encrypted field: its payload is readable, and an ENCRYPTED reader refuses it " +
				"(declare the field NAME:scope:signed if its stage reads it SIGNED)"})
	}
	if kr == nil {
		if j.TokenScope != f.Scope {
			j.Verify = secret.KindScopeViolation
			j = problem(j, &secret.Error{Kind: secret.KindScopeViolation, Kid: j.Kid, Scope: f.Scope, TokenScope: j.TokenScope,
				Detail: "signed for another scope (a signature's scope must match exactly)"})
		}
		return j
	}
	payload, _, err := kr.Verify(tok, f.Scope)
	if err != nil {
		j.verifyErr = asSecretError(err, f)
		j.Verify = j.verifyErr.Kind
		return problem(j, j.verifyErr)
	}
	j.Verify, j.signed = VerifyOK, payload
	return j
}

// judgeToken judges a flenc token, and the signed value it opens to: in an
// encrypted-signed field one must be there and verify; in an encrypted
// field one that is there is verified all the same, without a finding
// either way (its reader takes the string as it is), so that the signer
// it needs is known and --resign can move it.
func judgeToken(j judged, p secret.Parsed, f *Field, kr *secret.Keyring) judged {
	if f.Mode == ModeSigned {
		return problem(j, &secret.Error{Kind: secret.KindUnsigned, Kid: j.Kid, Scope: f.Scope, TokenScope: j.TokenScope,
			Detail: "an encrypted token in a signed field, which reads only signed values (declare it encrypted-signed if the token holds one)"})
	}
	if kr == nil {
		if e := secret.CheckScope(secret.TokenInfo{Kid: j.Kid, Scope: j.TokenScope}, f.Scope); e != nil {
			j.Decrypt = secret.KindScopeViolation
			return problem(j, e)
		}
		return j
	}
	payload, _, err := kr.OpenParsed(p, f.Scope)
	if err != nil {
		switch kind := secret.KindOf(err); kind {
		case secret.KindMalformed, secret.KindHeaderRejected:
			// Not a token this keyring accepts: corrupt, as a header the
			// kid's key kind refuses is.
			c := corrupt(err, f)
			c.Alg = j.Alg
			return c
		default:
			j.Decrypt = kind
			return problem(j, asSecretError(err, f))
		}
	}
	j.Decrypt, j.payload = DecryptOK, payload
	sig, ok := payloadString(payload)
	if !ok || !secret.IsSigned(sig) {
		if f.Mode != ModeEncryptedSigned {
			return j
		}
		j.Verify = secret.KindUnsigned
		return problem(j, &secret.Error{Kind: secret.KindUnsigned, Kid: j.Kid, Scope: f.Scope, TokenScope: j.TokenScope,
			Detail: "the token opens to a value that is not signed"})
	}
	if h, err := secret.InspectHeader(sig); err == nil {
		j.Signer = h.Kid
	}
	signed, _, err := kr.Verify(sig, f.Scope)
	if err != nil {
		e := asSecretError(err, f)
		if j.Signer == "" {
			j.Signer = e.Kid
		}
		j.Verify, j.verifyErr = e.Kind, e
		if f.Mode != ModeEncryptedSigned {
			return j
		}
		inside := *e
		inside.Detail = "the signed value inside the token: " + e.Detail
		return problem(j, &inside)
	}
	j.Verify, j.signed = VerifyOK, signed
	return j
}

// problem records the first thing wrong with a value.
func problem(j judged, e *secret.Error) judged {
	if j.Problem == "" {
		j.Problem, j.Err = e.Kind, e
	}
	return j
}

// corrupt is the verdict on a flenc or flsig value that does not parse.
func corrupt(err error, f *Field) judged {
	e := asSecretError(err, f)
	return problem(judged{Verdict: Verdict{Status: secret.StatusCorrupt, Kid: e.Kid, TokenScope: e.TokenScope}}, e)
}

func asSecretError(err error, f *Field) *secret.Error {
	var se *secret.Error
	if !errors.As(err, &se) {
		return &secret.Error{Kind: secret.KindMalformed, Scope: f.Scope, Detail: "value cannot be read"}
	}
	return se
}

// ScopeTarget is where a keyring wants the values of one scope: sealed by
// its sealing key (flenc_primaries[scope], else primary) and signed by its
// signing key (flenc_signing[scope]). The sweep moves each value there.
type ScopeTarget struct {
	Scope   string `json:"scope"` // "" for unscoped fields
	Sealing string `json:"sealing_kid,omitempty"`
	Signing string `json:"signing_kid,omitempty"` // none configured: ""
	// Error says why no key can seal this scope (a primary bound to
	// other scopes): its tokens cannot be swept.
	Error   *secret.ErrorInfo `json:"error,omitempty"`
	sealErr *secret.Error
}

// targets are the ScopeTargets of a set of fields, by scope.
type targets map[string]*ScopeTarget

// targetsFor resolves the target of every scope the fields name (nil
// without a keyring).
func targetsFor(kr *secret.Keyring, fields []Field) targets {
	if kr == nil {
		return nil
	}
	out := targets{}
	for _, f := range fields {
		if out[f.Scope] != nil {
			continue
		}
		t := &ScopeTarget{Scope: f.Scope}
		if kid, err := kr.SealingKid(f.Scope); err == nil {
			t.Sealing = kid
		} else {
			t.sealErr = asSecretError(err, &f)
			t.Error = SafeError(t.sealErr)
		}
		if kid, err := kr.SigningKid(f.Scope); err == nil {
			t.Signing = kid
		}
		out[f.Scope] = t
	}
	return out
}

// of returns the target of scope (an empty one when unknown).
func (t targets) of(scope string) *ScopeTarget {
	if st := t[scope]; st != nil {
		return st
	}
	return &ScopeTarget{Scope: scope}
}

// list returns the targets in scope order.
func (t targets) list() []ScopeTarget {
	out := make([]ScopeTarget, 0, len(t))
	for _, st := range t {
		out = append(out, *st)
	}
	slices.SortFunc(out, func(a, b ScopeTarget) int { return cmp.Compare(a.Scope, b.Scope) })
	return out
}

// payloadString is the string a decrypted payload holds, when it is a
// JSON string; anything else (an object, a number, not JSON) is not ok.
// Only a string can be a signed value, so the rest is never parsed.
func payloadString(payload []byte) (string, bool) {
	at := jsonspan.SkipSpace(payload, 0)
	if at >= len(payload) || payload[at] != '"' {
		return "", false
	}
	if s, ok := plainString(payload); ok {
		return s, true
	}
	inner, err := attr.ParseJSON(payload)
	s, ok := inner.(string)
	return s, err == nil && ok
}

// plainString reads a JSON string literal that needs no decoding (no
// escape, no control character, valid UTF-8), as every token is, without
// the general parser; ok is false for anything else, which the parser
// then reads.
func plainString(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	body := raw[1 : len(raw)-1]
	for _, c := range body {
		if c < 0x20 || c == '"' || c == '\\' {
			return "", false
		}
	}
	if !utf8.Valid(body) {
		return "", false
	}
	return string(body), true
}
