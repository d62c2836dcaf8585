package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/spf13/cobra"

	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/secret"
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
		typ, err := secret.ParseKeyType(opts.Type)
		if err != nil {
			return err
		}
		if typ == secret.TypeEd25519 {
			return errors.New("an ed25519 key signs and cannot seal, so it cannot be the primary a new keyring needs: init with --type oct or x25519, then add the signing key with 'flecht keys add --type ed25519 --kid K --scope S --signing-for S'")
		}
		if len(opts.Roles.SigningFor) > 0 {
			// secret.CheckNewKey would ask for --type ed25519, which init refuses.
			return errors.New("init's key is the primary, a sealing key, so it cannot sign: drop --signing-for, then add the signing key with 'flecht keys add --type ed25519 --kid K --scope S --signing-for S'")
		}
		return secret.CheckNewKey(typ, opts.Scopes, opts.Roles)
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
	typ, err := secret.ParseKeyType(opts.Type)
	if err != nil {
		return exitcode.UsageError(err)
	}
	kr, err := (&secret.Keyring{}).Generate(opts.Kid, typ, opts.Scopes)
	if err != nil {
		return secret.EditError(err, nil)
	}
	if kr, err = secret.ApplyRoles(kr, opts.Kid, secret.Roles{PrimaryFor: opts.Roles.PrimaryFor}, true); err != nil {
		return secret.EditError(err, nil)
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
	rep := secret.NewKeyringReport(opts.Keyring, kr)
	rep.Action, rep.Kid, rep.Changes = secret.ActionCreated, opts.Kid, secret.KeyringChanges(nil, kr)
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
		typ, err := secret.ParseKeyType(opts.Type)
		if err != nil {
			return err
		}
		return secret.CheckNewKey(typ, opts.Scopes, opts.Roles)
	}, runF, runKeysAdd)
	addNewKeyFlags(cmd, opts, true, "oct, x25519 or ed25519")
	return cmd
}

func runKeysAdd(opts *KeysOptions) error {
	typ, err := secret.ParseKeyType(opts.Type)
	if err != nil {
		return exitcode.UsageError(err)
	}
	return changeKeyring(opts, secret.ActionAdded, func(kr *secret.Keyring) (*secret.Keyring, error) {
		next, err := kr.Generate(opts.Kid, typ, opts.Scopes)
		if err != nil {
			return nil, err
		}
		return secret.ApplyRoles(next, opts.Kid, opts.Roles, true)
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
	return changeKeyring(opts, secret.ActionCleared, func(kr *secret.Keyring) (*secret.Keyring, error) {
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
	return changeKeyring(opts, secret.ActionPromoted, func(kr *secret.Keyring) (*secret.Keyring, error) {
		if !kr.Has(opts.Kid) {
			return nil, &secret.Error{Kind: secret.KindUnknownKid, Kid: opts.Kid, Detail: "cannot promote a key the keyring does not hold"}
		}
		if opts.Scope == "" {
			return secret.ApplyRoles(kr, opts.Kid, secret.Roles{Primary: true}, false)
		}
		if kr.PrimaryFor()[opts.Scope] == opts.Kid {
			return kr, nil
		}
		return secret.ApplyRoles(kr, opts.Kid, secret.Roles{PrimaryFor: []string{opts.Scope}}, false)
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
	return changeKeyring(opts, secret.ActionAssigned, func(kr *secret.Keyring) (*secret.Keyring, error) {
		if !kr.Has(opts.Kid) {
			return nil, &secret.Error{Kind: secret.KindUnknownKid, Kid: opts.Kid, Detail: "cannot make a key the keyring does not hold a signing key"}
		}
		if kr.SigningFor()[opts.Scope] == opts.Kid {
			return kr, nil
		}
		return secret.ApplyRoles(kr, opts.Kid, secret.Roles{SigningFor: []string{opts.Scope}}, false)
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
	return changeKeyring(opts, secret.ActionRemoved, func(kr *secret.Keyring) (*secret.Keyring, error) {
		if !kr.Has(opts.Kid) {
			return nil, &secret.Error{Kind: secret.KindUnknownKid, Kid: opts.Kid, Detail: "no such key"}
		}
		if err := secret.RoleRefusal(kr, opts.Kid, opts.Keyring); err != nil {
			return nil, err
		}
		return kr.Remove(opts.Kid)
	})
}
