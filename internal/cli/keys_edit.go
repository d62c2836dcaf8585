package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/secret"
	"github.com/flecht-dev/flecht/internal/textfmt"
)

// The verbs that create keys or move roles: init, add, promote, signing,
// remove.

// addNewKeyFlags adds the flags of a key being created: --type (not for
// import, whose JWK says), --scope (its binding) and the roles.
func addNewKeyFlags(cmd *cobra.Command, opts *KeysOptions, withType bool, types string) {
	if withType {
		cmd.Flags().StringVar(&opts.Type, "type", string(secret.TypeOct), "the kind of key: "+types)
	}
	cmd.Flags().StringArrayVar(&opts.Scopes, "scope", nil, "bind the key to scope S (repeatable; x25519 and ed25519 keys must be bound)")
	cmd.Flags().BoolVar(&opts.Roles.Primary, "primary", false, "make the key the primary: the sealing key of every scope without its own (oct or x25519)")
	cmd.Flags().StringArrayVar(&opts.Roles.PrimaryFor, "primary-for", nil, "make the key the sealing key of scope S (repeatable; oct or x25519, bound to S if bound)")
	cmd.Flags().StringArrayVar(&opts.Roles.SigningFor, "signing-for", nil, "make the key the signing key of scope S (repeatable; ed25519 bound to S)")
}

// parseKeyType reads --type.
func parseKeyType(s string) (secret.KeyType, error) {
	t := secret.KeyType(strings.ToLower(s))
	if !slices.Contains(secret.KeyTypes, t) {
		return "", fmt.Errorf("unknown --type %q: use oct, x25519 or ed25519", s)
	}
	return t, nil
}

// checkNewKey applies the rules a new key's flags must meet before the
// keyring is touched: an OKP key is bound, an ed25519 key signs and never
// seals, only an ed25519 key signs, and a role's scope lies inside the
// binding. Each message says what to give instead.
func checkNewKey(typ secret.KeyType, scopes []string, roles keyRoles) error {
	if typ != secret.TypeOct && len(scopes) == 0 {
		return fmt.Errorf("an %s key must be bound to the scopes it serves: give --scope S (repeatable)", typ)
	}
	if typ == secret.TypeEd25519 && (roles.Primary || len(roles.PrimaryFor) > 0) {
		return errors.New("an ed25519 key signs and cannot seal, so it cannot be --primary or --primary-for; give it --signing-for S, and make an oct or x25519 key the sealing key")
	}
	if typ != secret.TypeEd25519 && len(roles.SigningFor) > 0 {
		return fmt.Errorf("only an ed25519 key signs: --signing-for needs --type ed25519, not %s", typ)
	}
	for _, s := range roles.PrimaryFor {
		if len(scopes) > 0 && !slices.Contains(scopes, s) {
			return fmt.Errorf("--primary-for %q: the key would be bound to %s and could not seal scope %q; add --scope %s", s, textfmt.QuoteList(scopes), s, shellQuote(s))
		}
	}
	for _, s := range roles.SigningFor {
		if !slices.Contains(scopes, s) {
			return fmt.Errorf("--signing-for %q: a signing key must be bound to its scope; add --scope %s", s, shellQuote(s))
		}
	}
	return nil
}

// applyRoles gives the key kid the roles asked, checking first that its
// kind, halves and binding can take them: a usage error naming what to do
// (fresh: the key was just made by this verb, so its flags can change).
// The keyring's own validation runs on each step.
func applyRoles(kr *secret.Keyring, kid string, roles keyRoles, fresh bool) (*secret.Keyring, error) {
	e, ok := kr.Entry(kid)
	if !ok {
		return nil, &secret.Error{Kind: secret.KindUnknownKid, Kid: kid, Detail: "the keyring does not hold this key"}
	}
	rebind := func(s string) string {
		if fresh {
			return "add --scope " + shellQuote(s)
		}
		return fmt.Sprintf("a key's binding never changes: add a key bound to it ('flecht keys add --kid NEW --type %s --scope %s') and use that", e.Type, shellQuote(s))
	}
	if (roles.Primary || len(roles.PrimaryFor) > 0) && e.Type == secret.TypeEd25519 {
		return nil, exitcode.UsageError(fmt.Errorf("key %q is an ed25519 signing key and cannot seal, so it cannot be the primary or a scope's sealing key; make it a signing key with 'flecht keys signing --kid %s --scope S'",
			kid, shellQuote(kid)))
	}
	for _, s := range roles.PrimaryFor {
		if len(e.Scopes) > 0 && !slices.Contains(e.Scopes, s) {
			return nil, exitcode.UsageError(fmt.Errorf("key %q is bound to %s and cannot seal scope %q: %s", kid, textfmt.QuoteList(e.Scopes), s, rebind(s)))
		}
	}
	for _, s := range roles.SigningFor {
		switch {
		case e.Type != secret.TypeEd25519:
			return nil, exitcode.UsageError(fmt.Errorf("key %q is an %s key; only an ed25519 key signs", kid, e.Type))
		case !e.Private:
			return nil, exitcode.UsageError(fmt.Errorf("the keyring holds only the public half of ed25519 key %q: it verifies, it cannot sign", kid))
		case !slices.Contains(e.Scopes, s):
			return nil, exitcode.UsageError(fmt.Errorf("key %q is bound to %s and cannot sign scope %q: %s", kid, textfmt.QuoteList(e.Scopes), s, rebind(s)))
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

func newCmdKeysInit(f *Factory, runF func(*KeysOptions) error) *cobra.Command {
	cmd, opts := keysCommand(f, &cobra.Command{
		Use:   "init --keyring FILE --kid KID [--type oct|x25519] [--scope S]... [--primary-for S]... [--protect]",
		Short: "Create a new keyring file with one fresh key as primary",
		Long: `Create a keyring file holding one fresh key (from the operating
system's CSPRNG) under KID, as its primary: an AES-256 oct key by default,
or with --type x25519 a recipient key pair, which must be bound to the
scopes it serves (--scope). An ed25519 key signs and cannot seal, so it
cannot be a keyring's first key: init with an oct or x25519 key, then
'flecht keys add --type ed25519 --kid K --scope S --signing-for S'.

--scope binds the key (repeatable); --primary-for S also makes it the
sealing key of scope S (flenc_primaries). A bound primary seals only its
scopes: unscoped values then need another primary.

--protect writes the file password-protected: the password comes from
--password-file FILE or ` + EnvKeyringPasswordFile + `, or is asked twice on a
terminal (at least 14 bytes).

An existing file is never overwritten: init refuses (exit 3) when FILE
exists, even if another process creates it while init runs. To add a key to
an existing keyring, use 'flecht keys add'. The file is written with mode
0600.`,
		Example: `  flecht keys init --keyring /etc/flecht/keyring.json --kid prod-2026-01
  FLECHT_KEYRING=./keyring.json flecht keys init --kid dev
  flecht keys init --keyring k.json --kid rcpt-2026 --type x25519 --scope api --scope db
  flecht keys init --keyring k.jwe --kid prod-2026-01 --protect --password-file /run/secrets/keyring-pw`,
	}, true, func(opts *KeysOptions, _ []string) error {
		if err := requireKid(opts, nil); err != nil {
			return err
		}
		typ, err := parseKeyType(opts.Type)
		if err != nil {
			return err
		}
		if typ == secret.TypeEd25519 {
			return errors.New("an ed25519 key signs and cannot seal, so it cannot be the primary a new keyring needs: init with --type oct or x25519, then add the signing key with 'flecht keys add --type ed25519 --kid K --scope S --signing-for S'")
		}
		if len(opts.Roles.SigningFor) > 0 {
			// checkNewKey would ask for --type ed25519, which init refuses.
			return errors.New("init's key is the primary, a sealing key, so it cannot sign: drop --signing-for, then add the signing key with 'flecht keys add --type ed25519 --kid K --scope S --signing-for S'")
		}
		return checkNewKey(typ, opts.Scopes, opts.Roles)
	}, runF, runKeysInit)
	addNewKeyFlags(cmd, opts, true, "oct or x25519 (an ed25519 key cannot be primary)")
	cmd.Flags().Lookup("primary").Usage = "accepted for symmetry with add: init's key is always the primary"
	cmd.Flags().Lookup("signing-for").Usage = "refused: init's key seals and cannot sign (add a signing key with 'keys add --type ed25519')"
	cmd.Flags().BoolVar(&opts.Protect, "protect", false, "write the new file password-protected (--password-file, "+EnvKeyringPasswordFile+", or asked twice on a terminal)")
	return cmd
}

func runKeysInit(opts *KeysOptions) error {
	if _, err := os.Lstat(opts.Keyring); err == nil {
		return errKeyringExists(opts.Keyring)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	typ, err := parseKeyType(opts.Type)
	if err != nil {
		return exitcode.UsageError(err)
	}
	kr, err := (&secret.Keyring{}).Generate(opts.Kid, typ, opts.Scopes)
	if err != nil {
		return keysKidError(err, nil)
	}
	if kr, err = applyRoles(kr, opts.Kid, keyRoles{PrimaryFor: opts.Roles.PrimaryFor}, true); err != nil {
		return keysKidError(err, nil)
	}
	return createKeyring(opts, kr)
}

// createKeyring writes kr as the new keyring file of init, or of an import
// that creates it: password-protected first when --protect asks, never
// over an existing file (not even one another process creates meanwhile),
// and reported as created.
func createKeyring(opts *KeysOptions, kr *secret.Keyring) error {
	if opts.Protect {
		var err error
		if kr, err = protectWithNewPassword(opts, kr); err != nil {
			return err
		}
	}
	if err := kr.Create(opts.Keyring, opts.fileLog()); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return errKeyringExists(opts.Keyring)
		}
		return err
	}
	rep := newKeyringReport(opts.Keyring, kr)
	rep.Action, rep.Kid, rep.Changes = keysCreated, opts.Kid, keyringChanges(nil, kr)
	return printKeyring(opts, rep)
}

func newCmdKeysAdd(f *Factory, runF func(*KeysOptions) error) *cobra.Command {
	cmd, opts := keysCommand(f, &cobra.Command{
		Use:   "add --kid KID [--type oct|x25519|ed25519] [--scope S]... [--primary] [--primary-for S]... [--signing-for S]...",
		Short: "Add a fresh key of any kind to the keyring, with roles if asked",
		Long: `Add a fresh key under KID: an AES-256 oct key by default, an X25519
recipient (--type x25519) or an Ed25519 signer (--type ed25519). X25519 and
Ed25519 keys must be bound to the scopes they serve (--scope, repeatable);
an oct key may be.

Without role flags nothing else changes: rotation is reader-first, so roll
the file out to every reader before a role makes writers use the key. The
roles, when the rollout is not in question (a new scope, a test keyring):
  --primary          the sealing key of every scope without its own
  --primary-for S    the sealing key of scope S (an oct or x25519 key,
                     bound to S if bound)
  --signing-for S    the signing key of scope S (an ed25519 key bound to S)

A kid already in the keyring is refused (exit 3): its key is never replaced.
A kind that cannot take a role (an ed25519 key cannot seal, only an ed25519
key signs) or a role outside the binding is a usage error (exit 2), checked
before the file is read.`,
		Example: `  flecht keys add --keyring keyring.json --kid prod-2026-07
  flecht keys add --keyring keyring.json --kid rcpt-api-2026 --type x25519 --scope api
  flecht keys add --keyring keyring.json --kid sig-api-2026 --type ed25519 --scope api --signing-for api`,
	}, true, func(opts *KeysOptions, _ []string) error {
		if err := requireKid(opts, nil); err != nil {
			return err
		}
		typ, err := parseKeyType(opts.Type)
		if err != nil {
			return err
		}
		return checkNewKey(typ, opts.Scopes, opts.Roles)
	}, runF, runKeysAdd)
	addNewKeyFlags(cmd, opts, true, "oct, x25519 or ed25519")
	return cmd
}

func runKeysAdd(opts *KeysOptions) error {
	typ, err := parseKeyType(opts.Type)
	if err != nil {
		return exitcode.UsageError(err)
	}
	return changeKeyring(opts, keysAdded, func(kr *secret.Keyring) (*secret.Keyring, error) {
		next, err := kr.Generate(opts.Kid, typ, opts.Scopes)
		if err != nil {
			return nil, err
		}
		return applyRoles(next, opts.Kid, opts.Roles, true)
	})
}

// checkRoleVerb is the usage rule of promote and signing: --kid, or
// --clear with a scope.
func checkRoleVerb(verb string, scopeRequired bool) func(*KeysOptions, []string) error {
	return func(opts *KeysOptions, _ []string) error {
		switch {
		case opts.Clear && opts.Kid != "":
			return fmt.Errorf("--clear takes no --kid: it removes the role of --scope S")
		case opts.Clear && opts.Scope == "":
			if verb == "promote" {
				return errors.New("--clear needs --scope S: a scope's sealing key is cleared, the primary never is (promote another key instead)")
			}
			return errors.New("--clear needs --scope S")
		case scopeRequired && opts.Scope == "":
			return errors.New("--scope S is required: a signing key serves one scope")
		case !opts.Clear:
			return requireKid(opts, nil)
		}
		return nil
	}
}

// clearScopeRole is --scope S --clear of promote and signing: it removes
// S's entry from one of the keyring's per-scope role tables (held:
// flenc_primaries or flenc_signing) with clear; a scope without an entry
// leaves the keyring unchanged.
func clearScopeRole(opts *KeysOptions, held func(*secret.Keyring) map[string]string,
	clear func(*secret.Keyring, string) (*secret.Keyring, error)) error {
	return changeKeyring(opts, keysCleared, func(kr *secret.Keyring) (*secret.Keyring, error) {
		if _, ok := held(kr)[opts.Scope]; !ok {
			return kr, nil
		}
		return clear(kr, opts.Scope)
	})
}

func newCmdKeysPromote(f *Factory, runF func(*KeysOptions) error) *cobra.Command {
	cmd, opts := keysCommand(f, &cobra.Command{
		Use:   "promote --kid KID [--scope S] | --scope S --clear",
		Short: "Make a key the primary, or the sealing key of one scope",
		Long: `Make KID the primary key: writers that load this file seal new values
with it, except those of a scope with its own sealing key. With --scope S,
make KID the sealing key of scope S only (flenc_primaries): per-scope
rotation, leaving every other scope as it is. KID must be an oct or x25519
key (an ed25519 key signs, it never seals) whose binding, if any, covers S.

Tokens sealed with the previous key still open as long as it stays in the
keyring. Promote only after every reader holds KID ('flecht keys check').
Promoting the key that already has the role changes nothing.

--scope S --clear removes the scope's own sealing key: its values are
sealed under the primary again.`,
		Example: `  flecht keys promote --keyring keyring.json --kid prod-2026-07
  flecht keys promote --keyring keyring.json --kid rcpt-api-2026 --scope api
  flecht keys promote --keyring keyring.json --scope api --clear`,
	}, true, checkRoleVerb("promote", false), runF, runKeysPromote)
	cmd.Flags().StringVar(&opts.Scope, "scope", "", "the scope whose sealing key KID becomes (flenc_primaries); without it, the primary")
	cmd.Flags().BoolVar(&opts.Clear, "clear", false, "remove the scope's own sealing key (with --scope)")
	return cmd
}

func runKeysPromote(opts *KeysOptions) error {
	if opts.Clear {
		return clearScopeRole(opts, (*secret.Keyring).PrimaryFor, (*secret.Keyring).ClearPrimaryFor)
	}
	return changeKeyring(opts, keysPromoted, func(kr *secret.Keyring) (*secret.Keyring, error) {
		if !kr.Has(opts.Kid) {
			return nil, &secret.Error{Kind: secret.KindUnknownKid, Kid: opts.Kid, Detail: "cannot promote a key the keyring does not hold"}
		}
		if opts.Scope == "" {
			return applyRoles(kr, opts.Kid, keyRoles{Primary: true}, false)
		}
		if kr.PrimaryFor()[opts.Scope] == opts.Kid {
			return kr, nil
		}
		return applyRoles(kr, opts.Kid, keyRoles{PrimaryFor: []string{opts.Scope}}, false)
	})
}

func newCmdKeysSigning(f *Factory, runF func(*KeysOptions) error) *cobra.Command {
	cmd, opts := keysCommand(f, &cobra.Command{
		Use:   "signing --kid KID --scope S | --scope S --clear",
		Short: "Make an ed25519 key the signing key of one scope",
		Long: `Make KID the signing key of scope S (flenc_signing): writers that load
this file sign the values of SIGNED fields of scope S with it. KID must be
an ed25519 key holding its private half and bound to S.

Values signed by the previous key keep verifying while its public half
stays in the readers' keyrings; roll the file out to every reader before
writers sign with a new key, as for a sealing key. Assigning the key that
already signs S changes nothing.

--scope S --clear removes the scope's signing key: writers can no longer
sign its values.`,
		Example: `  flecht keys signing --keyring keyring.json --kid sig-api-2026 --scope api
  flecht keys signing --keyring keyring.json --scope api --clear`,
	}, true, checkRoleVerb("signing", true), runF, runKeysSigning)
	cmd.Flags().StringVar(&opts.Scope, "scope", "", "the scope KID signs (required)")
	cmd.Flags().BoolVar(&opts.Clear, "clear", false, "remove the scope's signing key")
	return cmd
}

func runKeysSigning(opts *KeysOptions) error {
	if opts.Clear {
		return clearScopeRole(opts, (*secret.Keyring).SigningFor, (*secret.Keyring).ClearSigningFor)
	}
	return changeKeyring(opts, keysAssigned, func(kr *secret.Keyring) (*secret.Keyring, error) {
		if !kr.Has(opts.Kid) {
			return nil, &secret.Error{Kind: secret.KindUnknownKid, Kid: opts.Kid, Detail: "cannot make a key the keyring does not hold a signing key"}
		}
		if kr.SigningFor()[opts.Scope] == opts.Kid {
			return kr, nil
		}
		return applyRoles(kr, opts.Kid, keyRoles{SigningFor: []string{opts.Scope}}, false)
	})
}

func newCmdKeysRemove(f *Factory, runF func(*KeysOptions) error) *cobra.Command {
	cmd, opts := keysCommand(f, &cobra.Command{
		Use:   "remove --kid KID",
		Short: "Remove a retired key from the keyring",
		Long: `Remove KID from the keyring. Tokens sealed with it can no longer be
opened, and values it signed no longer verify, so remove a key only after
every stored value has been moved off it and a scan confirms that none
names KID.

A key that a role names is never removed (exit 3): the primary, the
sealing key of a scope (flenc_primaries) or the signing key of a scope
(flenc_signing). The refusal lists every such role with the command that
moves it. (flechtctl refuses only the primary and drops a key's per-scope
roles silently, so a scope's values fall back to the primary, or lose
their signer, unnoticed; and a file whose roles name a missing key is one
Flechtwerk 0.17 stages refuse to load.)`,
		Example: `  flecht keys remove --keyring keyring.json --kid prod-2026-01`,
	}, true, requireKid, runF, runKeysRemove)
	return guardKeysRemove(f, cmd, opts)
}

func runKeysRemove(opts *KeysOptions) error {
	return changeKeyring(opts, keysRemoved, func(kr *secret.Keyring) (*secret.Keyring, error) {
		if !kr.Has(opts.Kid) {
			return nil, &secret.Error{Kind: secret.KindUnknownKid, Kid: opts.Kid, Detail: "no such key"}
		}
		if err := roleRefusal(kr, opts.Kid, opts.Keyring); err != nil {
			return nil, err
		}
		return kr.Remove(opts.Kid)
	})
}

// roleRefusal refuses (exit 3) the removal of a key that a role names,
// listing each role with the exact command that moves it: nil when none
// does.
func roleRefusal(kr *secret.Keyring, kid, keyring string) error {
	e, ok := kr.Entry(kid)
	if !ok || (!e.Primary && len(e.PrimaryFor) == 0 && len(e.SigningFor) == 0) {
		return nil
	}
	cmd := func(verb, rest string) string {
		return "      flecht keys " + verb + " --keyring " + shellQuote(keyring) + " " + rest
	}
	entries := kr.Entries()
	// candidates are the other keys that could take a role.
	candidates := func(ok func(secret.Entry) bool) []string {
		var out []string
		for _, o := range entries {
			if o.Kid != kid && ok(o) {
				out = append(out, o.Kid)
			}
		}
		return out
	}
	sealing := func(o secret.Entry) bool { return o.Type != secret.TypeEd25519 }
	covers := func(o secret.Entry, s string) bool { return len(o.Scopes) == 0 || slices.Contains(o.Scopes, s) }
	// pick names the first candidate; the others go on a line of their
	// own, so the command line copies as it is.
	pick := func(c []string) string {
		if len(c) == 0 {
			return "NEW"
		}
		s := shellQuote(c[0])
		if len(c) > 1 {
			s += fmt.Sprintf("\n      (or another of %s)", textfmt.QuoteList(c[1:]))
		}
		return s
	}
	var b strings.Builder
	fmt.Fprintf(&b, "keyring_conflict: key %q: refusing to remove it while a role names it (Flechtwerk 0.17 stages would refuse the file); move each role first:", kid)
	if e.Primary {
		// An unbound key, since a bound primary seals no unscoped value.
		c := candidates(func(o secret.Entry) bool { return sealing(o) && len(o.Scopes) == 0 })
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
		c := append(candidates(func(o secret.Entry) bool { return sealing(o) && len(o.Scopes) > 0 && covers(o, s) }),
			candidates(func(o secret.Entry) bool { return sealing(o) && len(o.Scopes) == 0 })...)
		fmt.Fprintf(&b, "\n  - the sealing key of scope %q (flenc_primaries):\n", s)
		if len(c) == 0 {
			b.WriteString(cmd("add", "--kid NEW --scope "+shellQuote(s)) + "\n")
		}
		b.WriteString(cmd("promote", "--scope "+shellQuote(s)+" --kid "+pick(c)))
		if primary.Kid != kid && covers(primary, s) {
			fmt.Fprintf(&b, "\n    or seal scope %q under the primary %q again:\n%s", s, primary.Kid, cmd("promote", "--scope "+shellQuote(s)+" --clear"))
		}
	}
	for _, s := range e.SigningFor {
		c := candidates(func(o secret.Entry) bool {
			return o.Type == secret.TypeEd25519 && o.Private && slices.Contains(o.Scopes, s)
		})
		fmt.Fprintf(&b, "\n  - the signing key of scope %q (flenc_signing):\n", s)
		if len(c) == 0 {
			b.WriteString(cmd("add", "--kid NEW --type ed25519 --scope "+shellQuote(s)) + "\n")
		}
		b.WriteString(cmd("signing", "--scope "+shellQuote(s)+" --kid "+pick(c)))
		fmt.Fprintf(&b, "\n    or stop signing scope %q:\n%s", s, cmd("signing", "--scope "+shellQuote(s)+" --clear"))
	}
	return exitcode.RefusedError(errors.New(b.String()))
}
