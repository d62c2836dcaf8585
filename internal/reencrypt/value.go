package reencrypt

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/flecht-dev/flecht/internal/attr"
	"github.com/flecht-dev/flecht/internal/jsonspan"
	"github.com/flecht-dev/flecht/internal/secret"
)

// Slot is one secret value found in a record: a field's value, or one
// element of a list field.
type Slot struct {
	Field *Field
	Index int    // position in a list field; -1 for the field's own value
	Raw   []byte // the value's exact JSON bytes
	// Problem, when set, says why the value could not be located without
	// ambiguity (a key that appears twice on the path); Raw is then nil.
	Problem string
}

// Label names the slot for a report: "api_key", "tokens[2]".
func (s Slot) Label() string {
	if s.Index < 0 {
		return s.Field.Name()
	}
	return strings.Join(s.Field.Path, ".") + "[" + strconv.Itoa(s.Index) + "]"
}

// errNotObject: the record value is not a JSON object (an invalid message).
var errNotObject = errors.New("record value is not a JSON object")

// Slots returns the secret values of one record value, field by field in
// the order given. Absent fields, JSON null and null list elements are
// skipped: absence is not a leak. A value that is not a JSON object is
// errNotObject.
func Slots(value []byte, fields []Field) ([]Slot, error) {
	if _, err := attr.Members(value); err != nil {
		return nil, errNotObject
	}
	var out []Slot
	for i := range fields {
		f := &fields[i]
		raw, found, problem := lookup(value, f.Path)
		switch {
		case problem != "":
			out = append(out, Slot{Field: f, Index: -1, Problem: problem})
			continue
		case !found || isNull(raw):
			continue
		}
		if !f.List || raw[0] != '[' {
			// A list field holding a single value is judged as that
			// value: a plaintext string there is still a plaintext.
			out = append(out, Slot{Field: f, Index: -1, Raw: raw})
			continue
		}
		elems, err := jsonspan.Elems(raw, 0)
		if err != nil {
			out = append(out, Slot{Field: f, Index: -1, Problem: "list value does not parse"})
			continue
		}
		for j, e := range elems {
			if el := raw[e.Start:e.End]; !isNull(el) {
				out = append(out, Slot{Field: f, Index: j, Raw: el})
			}
		}
	}
	return out, nil
}

// lookup walks path through nested objects. A parent that is not an object
// means the field is absent; a key that appears twice is a problem, since
// readers take the last copy and a rewrite could not tell which to change.
func lookup(raw []byte, path []string) (val []byte, found bool, problem string) {
	cur := raw
	for depth, seg := range path {
		if len(cur) == 0 {
			cur = []byte("{}") // an empty value is {} (SPEC §2)
		}
		if cur[0] != '{' {
			return nil, false, ""
		}
		// cur is part of the record Slots validated: no second validation
		// of the whole record at every path segment.
		var hit []byte
		n := 0
		err := jsonspan.EachMember(cur, 0, func(m jsonspan.Member) {
			if m.Key == seg {
				hit, n = cur[m.Start:m.End], n+1
			}
		})
		if err != nil {
			return nil, false, "value does not parse"
		}
		switch {
		case n == 0:
			return nil, false, ""
		case n > 1:
			return nil, false, fmt.Sprintf("key %q appears %d times at %s", seg, n, strings.Join(path[:depth+1], "."))
		}
		cur = hit
	}
	return cur, true, ""
}

func isNull(raw []byte) bool { return string(raw) == "null" }

// Verdict is what a scan says about one secret value.
type Verdict struct {
	Status     secret.Status
	Kid        string // the token's kid (from its header)
	TokenScope string // the token's flenc_scope ("" unscoped)
	// Decrypt is the outcome of opening the token with a keyring through
	// the field's scope: "ok" or the failing kind; "" when the value is not
	// a token. Without a keyring it is scope_violation when the header alone
	// breaks the field's scope ratchet, else "".
	Decrypt secret.Kind
	Err     *secret.Error // why a value is corrupt or does not open
}

// DecryptOK is Verdict.Decrypt for a token that opened.
const DecryptOK secret.Kind = "ok"

// Judge classifies one slot, and with a keyring also opens its token
// through the field's scope.
func Judge(s Slot, kr *secret.Keyring) Verdict {
	v, _ := judge(s, kr)
	return v
}

// judge is Judge that also returns the payload of a token that opened.
func judge(s Slot, kr *secret.Keyring) (Verdict, []byte) {
	if s.Problem != "" {
		return Verdict{Status: secret.StatusCorrupt, Err: &secret.Error{Kind: secret.KindMalformed, Scope: s.Field.Scope, Detail: s.Problem}}, nil
	}
	tok, isString := "", false
	if v, err := attr.ParseJSON(s.Raw); err == nil {
		tok, isString = v.(string)
	}
	if kr == nil || !isString || !secret.IsEncrypted(tok) {
		c := secret.Classify(s.Raw)
		v := Verdict{Status: c.Status, Kid: c.Kid, TokenScope: c.Scope, Err: c.Err}
		if c.Status == secret.StatusEncrypted {
			if e := secret.CheckScope(secret.TokenInfo{Kid: c.Kid, Scope: c.Scope}, s.Field.Scope); e != nil {
				v.Decrypt, v.Err = secret.KindScopeViolation, e
			}
		}
		return v, nil
	}
	// One parse for both the classification and the opening.
	payload, info, err := kr.Open(tok, s.Field.Scope)
	v := Verdict{Status: secret.StatusEncrypted, Kid: info.Kid, TokenScope: info.Scope, Decrypt: DecryptOK}
	if err == nil {
		return v, payload
	}
	var se *secret.Error
	errors.As(err, &se)
	switch kind := secret.KindOf(err); kind {
	case secret.KindMalformed, secret.KindHeaderRejected:
		// Not a token that parses: corrupt, as Classify says.
		v = Verdict{Status: secret.StatusCorrupt, Err: se}
		if se != nil {
			v.Kid = se.Kid
		}
	default:
		v.Decrypt, v.Err = kind, se
	}
	return v, nil
}

// Finding reports whether the verdict is a problem a scan gates on:
// plaintext, corrupt, or a token the keyring cannot open.
func (v Verdict) Finding() bool {
	return v.Status == secret.StatusPlaintext || v.Status == secret.StatusCorrupt ||
		(v.Decrypt != "" && v.Decrypt != DecryptOK)
}

// PlainInfo describes a plaintext value without showing it: enough to tell
// two values apart, or to see one come back after a fix, and nothing a
// guess can be checked against without the key.
type PlainInfo struct {
	// LengthRange is the length of the value's JSON text in powers of two
	// ("1-8", "9-16", …): an exact length narrows a guess (a 4-digit PIN).
	LengthRange string `json:"length_range"`
	// Fingerprint is the first 12 hex digits of an HMAC-SHA-256 of the JSON
	// text. An unkeyed hash of a PIN or a dictionary password is
	// confirmed by hashing guesses; a keyed one is not.
	Fingerprint string `json:"fingerprint"`
}

// Fingerprint sources, as a report names them.
const (
	FingerprintKeyring = "keyring" // keyed from the keyring: stable across runs with the same primary key
	FingerprintRun     = "run"     // a random key of this run: comparable within the run only
)

// fingerprintLabel binds the derived key to this one use (HKDF info).
const fingerprintLabel = "flecht plaintext fingerprint v1"

// Fingerprinter fingerprints plaintext values under one key.
type Fingerprinter struct {
	key    []byte
	Source string // FingerprintKeyring or FingerprintRun
}

// NewFingerprinter keys fingerprints from the keyring's primary key (HKDF,
// a fixed label), or with no keyring from a random key of this run.
func NewFingerprinter(kr *secret.Keyring) *Fingerprinter {
	if kr != nil {
		if key, err := kr.DeriveKey(fingerprintLabel); err == nil {
			return &Fingerprinter{key: key, Source: FingerprintKeyring}
		}
	}
	key := make([]byte, 32)
	rand.Read(key) // never fails (crypto/rand)
	return &Fingerprinter{key: key, Source: FingerprintRun}
}

// Plain fingerprints a plaintext value's JSON text.
func (f *Fingerprinter) Plain(raw []byte) *PlainInfo {
	m := hmac.New(sha256.New, f.key)
	m.Write(raw)
	return &PlainInfo{LengthRange: lengthRange(len(raw)), Fingerprint: hex.EncodeToString(m.Sum(nil)[:6])}
}

// lengthRange buckets n into powers of two: 1-8, 9-16, 17-32, …
func lengthRange(n int) string {
	hi := 8
	for hi < n {
		hi *= 2
	}
	lo := hi/2 + 1
	if hi == 8 {
		lo = 1
	}
	return strconv.Itoa(lo) + "-" + strconv.Itoa(hi)
}

// ErrorInfo is a secret error as a report shows it.
type ErrorInfo struct {
	Kind       secret.Kind `json:"kind"`
	Kid        string      `json:"kid,omitempty"`
	TokenScope string      `json:"token_scope,omitempty"`
	Message    string      `json:"message"`
}

// SafeError renders e for a report. Its detail is safe as it stands: the
// secret package names text taken from a value only under its echo rule
// (secret.Echo), the one rule for errors, logs and reports alike.
func SafeError(e *secret.Error) *ErrorInfo {
	if e == nil {
		return nil
	}
	msg := string(e.Kind)
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return &ErrorInfo{Kind: e.Kind, Kid: e.Kid, TokenScope: e.TokenScope, Message: msg}
}

// Action is what a sweep does with one secret value.
type Action string

const (
	ActNone         Action = ""                  // a token under the primary, in its scope
	ActRotate       Action = "rotate"            // a token under another kid: re-encrypt under the primary
	ActScopeUpgrade Action = "scope_upgrade"     // an unscoped token of a scoped field, already under the primary
	ActEncrypt      Action = "encrypt_plaintext" // a plaintext value, encrypted (--encrypt-plaintext)
	ActPlaintext    Action = "plaintext"         // a plaintext value left alone (no --encrypt-plaintext)
	ActBlocked      Action = "blocked"           // corrupt, unknown kid, tag mismatch, scope violation
)

// decide is the sweep's rule for one judged value (judged with the keyring).
func decide(v Verdict, fieldScope, primary string, encryptPlaintext bool) Action {
	switch v.Status {
	case secret.StatusPlaintext:
		if encryptPlaintext {
			return ActEncrypt
		}
		return ActPlaintext
	case secret.StatusEncrypted:
		if v.Decrypt != DecryptOK {
			return ActBlocked
		}
		if v.Kid != primary {
			return ActRotate
		}
		if fieldScope != "" && v.TokenScope == "" {
			return ActScopeUpgrade
		}
		return ActNone
	default:
		return ActBlocked
	}
}

// transformed is one record value after the sweep's rule.
type transformed struct {
	Value   []byte // the new value; equal to the input when nothing changed
	Changed bool
	Counts  ValueCounts
	Blocked []blockedSlot
	// What the record holds, for the plan's per-record counts.
	NonPrimary   bool // a token (readable or not) whose kid is not the primary
	ScopeUpgrade bool // an unscoped token in a scoped field
	Plaintext    bool // a plaintext value
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
	PlaintextLeft int `json:"plaintext_left"`
	Blocked       int `json:"blocked"`
	Unchanged     int `json:"unchanged"`
}

func (c *ValueCounts) add(o ValueCounts) {
	c.Rotate += o.Rotate
	c.ScopeUpgrade += o.ScopeUpgrade
	c.Encrypt += o.Encrypt
	c.PlaintextLeft += o.PlaintextLeft
	c.Blocked += o.Blocked
	c.Unchanged += o.Unchanged
}

// transform applies the sweep's rule to one record value: every token under
// a non-primary kid is re-encrypted under the primary, every unscoped token
// of a scoped field is lifted into the scope, and (with encryptPlaintext)
// every plaintext value is encrypted. Only those values' bytes change;
// everything else in the record, its member order, whitespace and number
// spellings included, stays byte for byte.
func transform(value []byte, fields []Field, kr *secret.Keyring, encryptPlaintext bool) (transformed, error) {
	out := transformed{Value: value}
	slots, err := Slots(value, fields)
	if err != nil {
		return out, err
	}
	// New bytes per field: for a scalar the replacement, for a list the
	// replaced elements (index → bytes).
	type edit struct {
		scalar []byte
		elems  map[int][]byte
	}
	edits := map[*Field]*edit{}
	for _, s := range slots {
		v, payload := judge(s, kr)
		// The target is the scope's sealing key (flenc_primaries, else the
		// primary), the key Encrypt seals under.
		target, terr := kr.SealingKid(s.Field.Scope)
		if terr != nil {
			target = kr.Primary()
		}
		act := decide(v, s.Field.Scope, target, encryptPlaintext)
		kid := v.Kid
		if kid == "" && v.Err != nil {
			kid = v.Err.Kid
		}
		out.NonPrimary = out.NonPrimary || (kid != "" && kid != target)
		out.ScopeUpgrade = out.ScopeUpgrade || (v.Status == secret.StatusEncrypted && s.Field.Scope != "" && v.TokenScope == "")
		out.Plaintext = out.Plaintext || v.Status == secret.StatusPlaintext
		var repl []byte
		switch act {
		case ActNone:
			out.Counts.Unchanged++
			continue
		case ActPlaintext:
			out.Counts.PlaintextLeft++
			continue
		case ActBlocked:
			out.Counts.Blocked++
			err := v.Err
			if err == nil {
				err = &secret.Error{Kind: secret.KindMalformed, Detail: "value cannot be read"}
			}
			out.Blocked = append(out.Blocked, blockedSlot{Label: s.Label(), Err: err})
			continue
		case ActRotate, ActScopeUpgrade:
			// Keyring.Reencrypt, without opening the token a second time:
			// the payload judge opened through the field's scope, sealed
			// under the primary in that scope.
			nt, err := kr.Encrypt(payload, s.Field.Scope)
			if err != nil {
				return out, err
			}
			repl = jsonString(nt)
			if act == ActRotate {
				out.Counts.Rotate++
			} else {
				out.Counts.ScopeUpgrade++
			}
		case ActEncrypt:
			plain, err := attr.ParseJSON(s.Raw)
			if err != nil {
				return out, fmt.Errorf("%s: plaintext value does not parse", s.Label())
			}
			payload, err := attr.Marshal(plain)
			if err != nil {
				return out, fmt.Errorf("%s: plaintext value has no canonical JSON form", s.Label())
			}
			nt, err := kr.Encrypt(payload, s.Field.Scope)
			if err != nil {
				return out, err
			}
			repl = jsonString(nt)
			out.Counts.Encrypt++
		}
		e := edits[s.Field]
		if e == nil {
			e = &edit{elems: map[int][]byte{}}
			edits[s.Field] = e
		}
		if s.Index < 0 {
			e.scalar = repl
		} else {
			e.elems[s.Index] = repl
		}
	}
	if len(edits) == 0 {
		return out, nil
	}
	nv := value
	for i := range fields {
		f := &fields[i]
		e := edits[f]
		if e == nil {
			continue
		}
		repl := e.scalar
		if repl == nil {
			arr, _, _ := lookup(nv, f.Path)
			if repl, err = spliceElems(arr, e.elems); err != nil {
				return out, fmt.Errorf("%s: %w", f.Name(), err)
			}
		}
		if nv, err = attr.ReplaceField(nv, f.Path, repl); err != nil {
			return out, fmt.Errorf("%s: %w", f.Name(), err)
		}
	}
	out.Value, out.Changed = nv, true
	return out, nil
}

// spliceElems replaces some elements of a JSON array, keeping every other
// byte of it (whitespace between elements included).
func spliceElems(arr []byte, repl map[int][]byte) ([]byte, error) {
	spans, err := jsonspan.Elems(arr, 0)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	last := 0
	for i, sp := range spans {
		r, ok := repl[i]
		if !ok {
			continue
		}
		b.Write(arr[last:sp.Start])
		b.Write(r)
		last = sp.End
	}
	b.Write(arr[last:])
	return b.Bytes(), nil
}

// jsonString quotes a token. Tokens are the prefix plus base64url and dots,
// so this never escapes anything; json.Marshal keeps it honest regardless.
func jsonString(s string) []byte {
	b, _ := json.Marshal(s)
	return b
}
