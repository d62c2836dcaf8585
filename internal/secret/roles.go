package secret

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/textfmt"
)

// Roles are the roles a new key takes: the primary, the sealing key of
// scopes (flenc_primaries), the signing key of scopes (flenc_signing).
type Roles struct {
	Primary    bool
	PrimaryFor []string
	SigningFor []string
}

// ParseKeyType reads --type.
func ParseKeyType(s string) (KeyType, error) {
	t := KeyType(strings.ToLower(s))
	if !slices.Contains(KeyTypes, t) {
		return "", fmt.Errorf("unknown --type %q: use oct, x25519 or ed25519", s)
	}
	return t, nil
}

// CheckNewKey applies the rules a new key's flags must meet before the
// keyring is touched: an OKP key is bound, an ed25519 key signs and never
// seals, only an ed25519 key signs, and a role's scope lies inside the
// binding. Each message says what to give instead.
func CheckNewKey(typ KeyType, scopes []string, roles Roles) error {
	if typ != TypeOct && len(scopes) == 0 {
		return fmt.Errorf("an %s key must be bound to the scopes it serves: give --scope S (repeatable)", typ)
	}
	if typ == TypeEd25519 && (roles.Primary || len(roles.PrimaryFor) > 0) {
		return errors.New("an ed25519 key signs and cannot seal, so it cannot be --primary or --primary-for; give it --signing-for S, and make an oct or x25519 key the sealing key")
	}
	if typ != TypeEd25519 && len(roles.SigningFor) > 0 {
		return fmt.Errorf("only an ed25519 key signs: --signing-for needs --type ed25519, not %s", typ)
	}
	for _, s := range roles.PrimaryFor {
		if len(scopes) > 0 && !slices.Contains(scopes, s) {
			return fmt.Errorf("--primary-for %q: the key would be bound to %s and could not seal scope %q; add --scope %s", s, textfmt.QuoteList(scopes), s, textfmt.ShellQuote(s))
		}
	}
	for _, s := range roles.SigningFor {
		if !slices.Contains(scopes, s) {
			return fmt.Errorf("--signing-for %q: a signing key must be bound to its scope; add --scope %s", s, textfmt.ShellQuote(s))
		}
	}
	return nil
}

// ApplyRoles gives the key kid the roles asked, checking first that its
// kind, halves and binding can take them: a usage error naming what to do
// (fresh: the key was just made by this verb, so its flags can change).
// The keyring's own validation runs on each step.
func ApplyRoles(kr *Keyring, kid string, roles Roles, fresh bool) (*Keyring, error) {
	e, ok := kr.Entry(kid)
	if !ok {
		return nil, &Error{Kind: KindUnknownKid, Kid: kid, Detail: "the keyring does not hold this key"}
	}
	rebind := func(s string) string {
		if fresh {
			return "add --scope " + textfmt.ShellQuote(s)
		}
		return fmt.Sprintf("a key's binding never changes: add a key bound to it ('flecht keys add --kid NEW --type %s --scope %s') and use that", e.Type, textfmt.ShellQuote(s))
	}
	if (roles.Primary || len(roles.PrimaryFor) > 0) && e.Type == TypeEd25519 {
		return nil, exitcode.UsageError(fmt.Errorf("key %q is an ed25519 signing key and cannot seal, so it cannot be the primary or a scope's sealing key; make it a signing key with 'flecht keys signing --kid %s --scope S'",
			kid, textfmt.ShellQuote(kid)))
	}
	for _, s := range roles.PrimaryFor {
		if len(e.Scopes) > 0 && !slices.Contains(e.Scopes, s) {
			return nil, exitcode.Usagef("key %q is bound to %s and cannot seal scope %q: %s", kid, textfmt.QuoteList(e.Scopes), s, rebind(s))
		}
	}
	for _, s := range roles.SigningFor {
		switch {
		case e.Type != TypeEd25519:
			return nil, exitcode.Usagef("key %q is an %s key; only an ed25519 key signs", kid, e.Type)
		case !e.Private:
			return nil, exitcode.Usagef("the keyring holds only the public half of ed25519 key %q: it verifies, it cannot sign", kid)
		case !slices.Contains(e.Scopes, s):
			return nil, exitcode.Usagef("key %q is bound to %s and cannot sign scope %q: %s", kid, textfmt.QuoteList(e.Scopes), s, rebind(s))
		}
	}
	next := kr
	var err error
	if roles.Primary && next.Primary() != kid {
		if next, err = next.Promote(kid); err != nil {
			return nil, err
		}
	}
	for _, s := range roles.PrimaryFor {
		if next, err = next.SetPrimaryFor(s, kid); err != nil {
			return nil, err
		}
	}
	for _, s := range roles.SigningFor {
		if next, err = next.SetSigningFor(s, kid); err != nil {
			return nil, err
		}
	}
	return next, nil
}

// RoleRefusal refuses (exit 3) the removal of a key that a role names,
// listing each role with the exact command that moves it: nil when none
// does.
func RoleRefusal(kr *Keyring, kid, keyring string) error {
	e, ok := kr.Entry(kid)
	if !ok || (!e.Primary && len(e.PrimaryFor) == 0 && len(e.SigningFor) == 0) {
		return nil
	}
	cmd := func(verb, rest string) string {
		return "      flecht keys " + verb + " --keyring " + textfmt.ShellQuote(keyring) + " " + rest
	}
	entries := kr.Entries()
	// candidates are the other keys that could take a role.
	candidates := func(ok func(Entry) bool) []string {
		var out []string
		for _, o := range entries {
			if o.Kid != kid && ok(o) {
				out = append(out, o.Kid)
			}
		}
		return out
	}
	sealing := func(o Entry) bool { return o.Type != TypeEd25519 }
	covers := func(o Entry, s string) bool { return len(o.Scopes) == 0 || slices.Contains(o.Scopes, s) }
	// pick names the first candidate; the others go on a line of their
	// own, so the command line copies as it is.
	pick := func(c []string) string {
		if len(c) == 0 {
			return "NEW"
		}
		s := textfmt.ShellQuote(c[0])
		if len(c) > 1 {
			s += fmt.Sprintf("\n      (or another of %s)", textfmt.QuoteList(c[1:]))
		}
		return s
	}
	var b strings.Builder
	fmt.Fprintf(&b, "keyring_conflict: key %q: refusing to remove it while a role names it (Flechtwerk 0.17 stages would refuse the file); move each role first:", kid)
	if e.Primary {
		// An unbound key, since a bound primary seals no unscoped value.
		c := candidates(func(o Entry) bool { return sealing(o) && len(o.Scopes) == 0 })
		b.WriteString("\n  - the primary:\n")
		if len(c) == 0 {
			b.WriteString(cmd("add", "--kid NEW") + "\n")
		}
		b.WriteString(cmd("promote", "--kid "+pick(c)))
	}
	primary, _ := kr.Entry(kr.Primary())
	for _, s := range e.PrimaryFor {
		// Keys bound to the scope first: the natural successor of its
		// sealing key; then unbound ones.
		c := append(candidates(func(o Entry) bool { return sealing(o) && len(o.Scopes) > 0 && covers(o, s) }),
			candidates(func(o Entry) bool { return sealing(o) && len(o.Scopes) == 0 })...)
		fmt.Fprintf(&b, "\n  - the sealing key of scope %q (flenc_primaries):\n", s)
		if len(c) == 0 {
			b.WriteString(cmd("add", "--kid NEW --scope "+textfmt.ShellQuote(s)) + "\n")
		}
		b.WriteString(cmd("promote", "--scope "+textfmt.ShellQuote(s)+" --kid "+pick(c)))
		if primary.Kid != kid && covers(primary, s) {
			fmt.Fprintf(&b, "\n    or seal scope %q under the primary %q again:\n%s", s, primary.Kid, cmd("promote", "--scope "+textfmt.ShellQuote(s)+" --clear"))
		}
	}
	for _, s := range e.SigningFor {
		c := candidates(func(o Entry) bool {
			return o.Type == TypeEd25519 && o.Private && slices.Contains(o.Scopes, s)
		})
		fmt.Fprintf(&b, "\n  - the signing key of scope %q (flenc_signing):\n", s)
		if len(c) == 0 {
			b.WriteString(cmd("add", "--kid NEW --type ed25519 --scope "+textfmt.ShellQuote(s)) + "\n")
		}
		b.WriteString(cmd("signing", "--scope "+textfmt.ShellQuote(s)+" --kid "+pick(c)))
		fmt.Fprintf(&b, "\n    or stop signing scope %q:\n%s", s, cmd("signing", "--scope "+textfmt.ShellQuote(s)+" --clear"))
	}
	return exitcode.RefusedError(errors.New(b.String()))
}
