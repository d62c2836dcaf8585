package cli

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/flecht-dev/flecht/internal/secret"
)

// The verbs that change how the keyring file is stored: protect and
// unprotect.

func newCmdKeysProtect(f *Factory, runF func(*KeysOptions) error) *cobra.Command {
	cmd, _ := keysCommand(f, &cobra.Command{
		Use:   "protect",
		Short: "Password-protect the keyring file in place",
		Long: `Rewrite the keyring file in place as a password-protected keyring: a
compact JWE (PBES2-HS512+A256KW, A256GCM, 210000 iterations, a fresh salt)
over the JWK Set, the file 'flechtctl keyring protect' writes and
Flechtwerk 0.17 and flechtctl open.

The password comes from --password-file FILE or ` + EnvKeyringPasswordFile + `
(UTF-8, one trailing line break ignored), or is asked twice on a terminal; it must be
at least 14 bytes. From then on every verb opens the file with it and
writes it back protected, and every reader needs it too: 'flecht run
--password-file', or the Python stage's own.

A file that is already protected is left as it is (the password given must
open it). The edit holds the keyring's lock and replaces the file
atomically.`,
		Example: `  flecht keys protect --keyring keyring.json --password-file /run/secrets/keyring-pw
  FLECHT_KEYRING_PASSWORD_FILE=/run/secrets/keyring-pw flecht keys protect --keyring keyring.json`,
	}, false, nil, runF, runKeysProtect)
	return cmd
}

func runKeysProtect(opts *KeysOptions) error {
	// The new password is asked before the lock is taken: a lock held
	// while someone types would be broken as stale by the next writer.
	var pw []byte
	if plain, err := fileIsPlain(opts.Keyring); err == nil && plain {
		if pw, err = newKeyringPassword(opts.PasswordFile, opts.Prompt); err != nil {
			return err
		}
		warnExposed(opts.IO.ErrOut, opts.PasswordFile)
	}
	return changeKeyring(opts, secret.ActionProtected, func(kr *secret.Keyring) (*secret.Keyring, error) {
		if kr.Protected() {
			return kr, nil
		}
		if pw == nil { // made plain since the look above
			return nil, errors.New("the keyring changed while the password was asked; run protect again")
		}
		return kr.Protect(pw)
	})
}

// protectWithNewPassword returns kr protected with a new password
// (newKeyringPassword).
func protectWithNewPassword(opts *KeysOptions, kr *secret.Keyring) (*secret.Keyring, error) {
	pw, err := newKeyringPassword(opts.PasswordFile, opts.Prompt)
	if err != nil {
		return nil, err
	}
	out, err := kr.Protect(pw)
	if err != nil {
		return nil, secret.EditError(err, nil)
	}
	return out, nil
}

func newCmdKeysUnprotect(f *Factory, runF func(*KeysOptions) error) *cobra.Command {
	cmd, opts := keysCommand(f, &cobra.Command{
		Use:   "unprotect [--out FILE [--force]]",
		Short: "Write a protected keyring plain: in place, or as a copy with --out",
		Long: `Remove the password protection of the keyring, opened with
--password-file FILE, ` + EnvKeyringPasswordFile + ` or a prompt on a terminal.

Without --out the file is rewritten plain IN PLACE (the inverse of
'keys protect'), under the keyring's lock and atomically: its key bytes
are then unencrypted on disk, and readers no longer need a password.

With --out FILE the protected keyring is left exactly as it is and a plain
copy is written to FILE (mode 0600, atomically), as 'flechtctl keyring
unprotect -o OUT' does. An existing FILE is refused (exit 3) unless
--force; the keyring file itself is never the target.

A keyring that is already plain is left as it is.`,
		Example: `  flecht keys unprotect --keyring keyring.jwe --password-file pw --out /tmp/plain-copy.json
  flecht keys unprotect --keyring keyring.json --password-file pw`,
	}, false, func(opts *KeysOptions, _ []string) error {
		if opts.Force && opts.Out == "" {
			return errors.New("--force only applies with --out FILE (in place, the keyring is always replaced)")
		}
		return nil
	}, runF, runKeysUnprotect)
	cmd.Flags().StringVar(&opts.Out, "out", "", "write a plain copy to FILE and leave the protected keyring as it is")
	cmd.Flags().BoolVar(&opts.Force, "force", false, "with --out: replace FILE if it exists")
	_ = cmd.MarkFlagFilename("out", "json")
	return cmd
}

func runKeysUnprotect(opts *KeysOptions) error {
	if opts.Out == "" {
		return changeKeyring(opts, secret.ActionUnprotected, func(kr *secret.Keyring) (*secret.Keyring, error) {
			if !kr.Protected() {
				return kr, nil
			}
			return kr.Unprotect(), nil
		})
	}
	kr, err := loadKeyringForKeys(opts)
	if err != nil {
		return err
	}
	doc, err := kr.Unprotect().JWKS()
	if err != nil {
		return err
	}
	if err := writeOutFile(opts.Out, doc, 0o600, opts.Force, opts.Keyring); err != nil {
		return err
	}
	rep := secret.NewKeyringReport(opts.Keyring, kr)
	rep.Action, rep.File = secret.ActionCopied, opts.Out
	return printKeyring(opts, rep)
}
