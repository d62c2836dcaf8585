package secret

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/textfmt"
)

// KeyringReport is what every keys verb that reads or edits the keyring
// prints: the keyring as it is after the verb and what the verb changed.
// Key bytes never appear.
type KeyringReport struct {
	Keyring   string `json:"keyring"`
	Protected bool   `json:"protected"` // the file is password-protected
	// Action is what the verb did: created, added, imported, promoted,
	// assigned (signing), cleared, removed, protected, unprotected, copied
	// (unprotect --out), unchanged; empty for list.
	Action  string          `json:"action,omitempty"`
	Kid     string          `json:"kid,omitempty"`   // the key the action was about
	Scope   string          `json:"scope,omitempty"` // the scope whose role changed (promote, signing)
	File    string          `json:"file,omitempty"`  // the plain copy unprotect --out wrote
	Changes []KeyringChange `json:"changes,omitempty"`
	Primary string          `json:"primary"`
	// PrimaryFor and SigningFor are the per-scope roles: flenc_primaries
	// and flenc_signing, scope → kid.
	PrimaryFor map[string]string `json:"primary_for"`
	SigningFor map[string]string `json:"signing_for"`
	Keys       []KeyRow          `json:"keys"`
	Warnings   []string          `json:"warnings,omitempty"`
}

// KeyRow describes one key: never its bytes.
type KeyRow struct {
	Kid     string   `json:"kid"`
	Type    KeyType  `json:"type"`    // oct, x25519, ed25519
	Private bool     `json:"private"` // holds its private half (always for oct)
	Scopes  []string `json:"scopes"`  // its binding (flenc_scopes); empty when unbound
	// Roles are "primary", "primary-for:S" and "signing-for:S", as
	// flechtctl's keyring show writes them; Primary, PrimaryFor and
	// SigningFor say the same as fields.
	Roles      []string `json:"roles"`
	Primary    bool     `json:"primary"`
	PrimaryFor []string `json:"primary_for"`
	SigningFor []string `json:"signing_for"`
	// Mismatch: the private half does not belong to the public half; the
	// keyring loads, but sealing, opening or signing with the key fails.
	Mismatch bool `json:"mismatch"`
}

// KeyringChange is one difference between the keyring before and after a
// verb.
type KeyringChange struct {
	// Change is key_added, key_removed, primary, primary_for, signing_for,
	// protected or unprotected.
	Change string  `json:"change"`
	Kid    string  `json:"kid,omitempty"`   // the key added or removed, or the role's new holder ("" when cleared)
	Type   KeyType `json:"type,omitempty"`  // key_added: its kind
	Scope  string  `json:"scope,omitempty"` // primary_for, signing_for: the scope
	From   string  `json:"from,omitempty"`  // a role's previous holder ("" when there was none)
}

// Actions reported by the keys verbs.
const (
	ActionCreated     = "created"
	ActionAdded       = "added"
	ActionImported    = "imported"
	ActionPromoted    = "promoted"
	ActionAssigned    = "assigned"
	ActionCleared     = "cleared"
	ActionRemoved     = "removed"
	ActionProtected   = "protected"
	ActionUnprotected = "unprotected"
	ActionCopied      = "copied"
	ActionExported    = "exported"
	ActionUnchanged   = "unchanged"
)

// Changes listed in a KeyringChange.
const (
	ChangeKeyAdded    = "key_added"
	ChangeKeyRemoved  = "key_removed"
	ChangePrimary     = "primary"
	ChangePrimaryFor  = "primary_for"
	ChangeSigningFor  = "signing_for"
	ChangeProtected   = "protected"
	ChangeUnprotected = "unprotected"
)

// NewKeyringReport describes kr, the keyring at path.
func NewKeyringReport(path string, kr *Keyring) KeyringReport {
	rep := KeyringReport{Keyring: path, Protected: kr.Protected(), Primary: kr.Primary(),
		PrimaryFor: kr.PrimaryFor(), SigningFor: kr.SigningFor(), Keys: []KeyRow{}}
	for _, e := range kr.Entries() {
		roles := e.Roles()
		if roles == nil {
			roles = []string{}
		}
		rep.Keys = append(rep.Keys, KeyRow{Kid: e.Kid, Type: e.Type, Private: e.Private, Scopes: e.Scopes, Roles: roles,
			Primary: e.Primary, PrimaryFor: e.PrimaryFor, SigningFor: e.SigningFor, Mismatch: e.Mismatch})
		if e.Mismatch {
			rep.Warnings = append(rep.Warnings, fmt.Sprintf(
				"key %q: its private half does not match its public half; sealing, opening or signing with it fails", e.Kid))
		}
		if e.Primary && len(e.Scopes) > 0 {
			rep.Warnings = append(rep.Warnings, fmt.Sprintf(
				"the primary %q is bound to %s: it cannot seal unscoped values, nor a scope outside its binding that has no sealing key of its own",
				e.Kid, textfmt.QuoteList(e.Scopes)))
		}
	}
	return rep
}

// KeyringChanges lists what differs between before (nil: no keyring yet)
// and after: keys added and removed, the primary, each scope's sealing and
// signing key, the file's protection.
func KeyringChanges(before, after *Keyring) []KeyringChange {
	var out []KeyringChange
	var beforePrimary string
	beforeFor, beforeSigning := map[string]string{}, map[string]string{}
	if before != nil {
		beforePrimary, beforeFor, beforeSigning = before.Primary(), before.PrimaryFor(), before.SigningFor()
	}
	for _, e := range after.Entries() {
		if !before.Has(e.Kid) {
			out = append(out, KeyringChange{Change: ChangeKeyAdded, Kid: e.Kid, Type: e.Type})
		}
	}
	if after.Primary() != beforePrimary {
		out = append(out, KeyringChange{Change: ChangePrimary, Kid: after.Primary(), From: beforePrimary})
	}
	roleChanges := func(change string, old, cur map[string]string) {
		scopes := slices.Sorted(maps.Keys(cur))
		for s := range old {
			if _, ok := cur[s]; !ok {
				scopes = append(scopes, s)
			}
		}
		slices.Sort(scopes)
		for _, s := range scopes {
			if old[s] != cur[s] {
				out = append(out, KeyringChange{Change: change, Scope: s, Kid: cur[s], From: old[s]})
			}
		}
	}
	roleChanges(ChangePrimaryFor, beforeFor, after.PrimaryFor())
	roleChanges(ChangeSigningFor, beforeSigning, after.SigningFor())
	if before != nil {
		for _, kid := range before.Kids() {
			if !after.Has(kid) {
				out = append(out, KeyringChange{Change: ChangeKeyRemoved, Kid: kid})
			}
		}
	}
	switch {
	case after.Protected() && (before == nil || !before.Protected()):
		out = append(out, KeyringChange{Change: ChangeProtected})
	case !after.Protected() && before != nil && before.Protected():
		out = append(out, KeyringChange{Change: ChangeUnprotected})
	}
	return out
}

// DescribeChange is one change as a line for people.
func DescribeChange(c KeyringChange, rows []KeyRow) string {
	holder := func(kid, none string) string {
		if kid == "" {
			return none
		}
		return fmt.Sprintf("%q", kid)
	}
	switch c.Change {
	case ChangeKeyAdded:
		desc := string(c.Type)
		for _, k := range rows {
			if k.Kid == c.Kid {
				desc = DescribeKey(k)
			}
		}
		return fmt.Sprintf("+ key %q: %s", c.Kid, desc)
	case ChangeKeyRemoved:
		return fmt.Sprintf("- key %q", c.Kid)
	case ChangePrimary:
		return fmt.Sprintf("primary: %s → %q", holder(c.From, "(none)"), c.Kid)
	case ChangePrimaryFor:
		return fmt.Sprintf("sealing key of scope %q: %s → %s", c.Scope, holder(c.From, "(the primary)"), holder(c.Kid, "(the primary)"))
	case ChangeSigningFor:
		return fmt.Sprintf("signing key of scope %q: %s → %s", c.Scope, holder(c.From, "(none)"), holder(c.Kid, "(none)"))
	case ChangeProtected:
		return "the file is now password-protected"
	case ChangeUnprotected:
		return "the file is now a plain JWK Set: its key bytes are unencrypted on disk"
	}
	return c.Change
}

// DescribeKey says what a key is and can do, for one line.
func DescribeKey(e KeyRow) string {
	var what string
	switch {
	case e.Type == TypeOct:
		what = "oct (AES-256), seals and opens"
	case e.Type == TypeX25519 && e.Private:
		what = "x25519 recipient with its private half, seals and opens"
	case e.Type == TypeX25519:
		what = "x25519 recipient, public half only: seals, cannot open"
	case e.Private:
		what = "ed25519 signer with its private half, signs and verifies"
	default:
		what = "ed25519 signer, public half only: verifies, cannot sign"
	}
	if len(e.Scopes) > 0 {
		what += ", bound to " + strings.Join(e.Scopes, ", ")
	} else {
		what += ", unbound"
	}
	return what
}

// ActionLine is the first line of a verb's human output.
func ActionLine(rep KeyringReport) string {
	switch rep.Action {
	case ActionCreated:
		return fmt.Sprintf("created %s (mode 0600) with key %q as primary", rep.Keyring, rep.Kid)
	case ActionAdded:
		return fmt.Sprintf("added key %q to %s", rep.Kid, rep.Keyring)
	case ActionImported:
		return fmt.Sprintf("imported key %q into %s", rep.Kid, rep.Keyring)
	case ActionPromoted:
		if rep.Scope != "" {
			return fmt.Sprintf("key %q now seals scope %q in %s", rep.Kid, rep.Scope, rep.Keyring)
		}
		return fmt.Sprintf("key %q is now primary in %s; tokens sealed with the other keys still open", rep.Kid, rep.Keyring)
	case ActionAssigned:
		return fmt.Sprintf("key %q now signs scope %q in %s", rep.Kid, rep.Scope, rep.Keyring)
	case ActionCleared:
		return fmt.Sprintf("cleared the role of scope %q in %s", rep.Scope, rep.Keyring)
	case ActionRemoved:
		return fmt.Sprintf("removed key %q from %s", rep.Kid, rep.Keyring)
	case ActionProtected:
		return fmt.Sprintf("password-protected %s in place", rep.Keyring)
	case ActionUnprotected:
		return fmt.Sprintf("wrote %s plain in place", rep.Keyring)
	case ActionCopied:
		return fmt.Sprintf("wrote a plain copy of %s to %s (mode 0600); the keyring itself is unchanged", rep.Keyring, rep.File)
	case ActionUnchanged:
		return fmt.Sprintf("%s already is as asked; nothing changed", rep.Keyring)
	}
	return ""
}

// NextHint says what usually follows a change.
func NextHint(rep KeyringReport) string {
	switch rep.Action {
	case ActionAdded, ActionImported:
		if len(rep.Changes) == 1 {
			return "next: roll the file out to every reader and restart each (a stage reads its keyring when it starts; 'flecht keys check --kid " + textfmt.ShellQuote(rep.Kid) + "'), then give the key a role ('flecht keys promote' or 'flecht keys signing')"
		}
		return "note: writers that load this file use the new roles at once: roll it out to every reader first"
	case ActionPromoted:
		return "next: roll the file out to the writers, re-encrypt stored tokens ('flecht secrets reencrypt'), verify by a scan, then remove the old key"
	case ActionAssigned:
		return "next: roll the file out; values signed by the previous key keep verifying while their key stays in readers' keyrings"
	case ActionUnprotected:
		return "the file now holds its key bytes unencrypted: mind where it is copied"
	}
	return ""
}

// ErrorLine renders a secret error as one line that starts with its kind,
// for "error: <kind>: …". kids, when known, are the keyring's key ids, named
// when a token's kid is missing. The line carries what *Error
// carries: kids, scopes and a safe detail, never key bytes or plaintext.
func ErrorLine(e *Error, kids []string) string {
	// The kid and token scope come from the token's header: clipped.
	kid, tokenScope := Clip(e.Kid), Clip(e.TokenScope)
	var b strings.Builder
	b.WriteString(string(e.Kind))
	b.WriteString(": ")
	switch e.Kind {
	case KindUnknownKid:
		if kids != nil {
			fmt.Fprintf(&b, "token kid %q is not in the keyring (it holds %s)", kid, textfmt.QuoteList(kids))
		} else {
			fmt.Fprintf(&b, "key %q is not in the keyring", kid)
		}
		if e.Detail != "" && strings.Contains(e.Detail, "Ed25519") {
			b.WriteString(": " + e.Detail)
		}
	case KindTagMismatch:
		fmt.Fprintf(&b, "token kid %q is in the keyring, but authentication failed: this keyring's key %q has other bytes than the one that sealed the token, or the token was altered", kid, kid)
	case KindScopeViolation:
		if e.Scope == "" {
			fmt.Fprintf(&b, "token kid %q is bound to scope %q and cannot be read unscoped (a scope is never dropped; pass --scope %s to read it in its scope)", kid, tokenScope, textfmt.ShellQuote(tokenScope))
		} else if strings.Contains(e.Detail, "exactly") {
			fmt.Fprintf(&b, "the value signed by kid %q belongs to scope %q, not to scope %q (a signed value's scope must match exactly)", kid, tokenScope, e.Scope)
		} else {
			fmt.Fprintf(&b, "token kid %q belongs to scope %q, not to scope %q", kid, tokenScope, e.Scope)
		}
	case KindPlaintext:
		b.WriteString("the value is not a flenc: token; in a strict field that is a pasted secret (treat it as compromised). --read-plaintext reads legacy plaintext during a migration")
	default:
		if e.Kid != "" {
			fmt.Fprintf(&b, "kid %q: ", kid)
		}
		if e.Detail != "" {
			b.WriteString(e.Detail)
		} else {
			b.WriteString(e.Error())
		}
	}
	return strings.ReplaceAll(b.String(), "\n", " ")
}

// ErrorInfo is a secret error as a report shows it (a failed encrypt or
// decrypt, a value a scan or sweep could not open); its fields come from
// *Error and never hold key bytes or plaintext.
type ErrorInfo struct {
	Kind       Kind   `json:"kind"`
	Kid        string `json:"kid,omitempty"`
	Scope      string `json:"scope,omitempty"`       // the scope read through, where one was given
	TokenScope string `json:"token_scope,omitempty"` // the scope stamped in the token
	Message    string `json:"message"`
}

// EditError maps the keyring's refusals to exit codes: a kid that is
// already taken, or an edit that would break a keyring rule, is refused for
// safety (3); a kid the keyring does not hold is a failure (1); a kid or
// scope that is not a valid name, or a JWK that does not parse, is a usage
// error (2); a password too short to protect with is a usage error too.
// kids, when known, are the keyring's key ids.
func EditError(err error, kids []string) error {
	var se *Error
	if !errors.As(err, &se) {
		return err
	}
	var b strings.Builder
	b.WriteString(string(se.Kind))
	b.WriteString(": ")
	if se.Kid != "" {
		fmt.Fprintf(&b, "key %q: ", se.Kid)
	}
	b.WriteString(se.Detail)
	if se.Kind == KindUnknownKid && kids != nil {
		fmt.Fprintf(&b, " (the keyring holds %s)", textfmt.QuoteList(kids))
	}
	line := errors.New(b.String())
	switch se.Kind {
	case KindKeyringConflict:
		return exitcode.RefusedError(line)
	case KindKeyringInvalid, KindKeyringPassword:
		return exitcode.UsageError(line)
	}
	return line
}

// Edit is one read-modify-write of the keyring file at path, under its
// lock so that a concurrent edit cannot drop this change (or this one
// theirs): load, change, save, and report what changed (the report's
// Action is the caller's to fill in). A change that leaves the keyring as
// it was writes nothing. The lock is released before Edit returns, so
// nothing printed afterwards holds it: a reader that closes the pipe early
// (| head) kills the process mid-print, and a lock left behind would hold
// the next edit until it turns stale. A missing file matches fs.ErrNotExist.
func Edit(path string, load func() (*Keyring, error), change func(*Keyring) (*Keyring, error), opts ...FileOption) (KeyringReport, error) {
	unlock, err := Lock(path, opts...)
	if err != nil {
		return KeyringReport{}, err
	}
	defer unlock()
	kr, err := load()
	if err != nil {
		return KeyringReport{}, err
	}
	next, err := change(kr)
	if err != nil {
		if exitcode.Code(err) == exitcode.Failure {
			err = EditError(err, kr.Kids())
		}
		return KeyringReport{}, err
	}
	rep := NewKeyringReport(path, next)
	rep.Changes = KeyringChanges(kr, next)
	if len(rep.Changes) > 0 {
		if err := next.Save(path, opts...); err != nil {
			return KeyringReport{}, err
		}
	}
	return rep, nil
}
