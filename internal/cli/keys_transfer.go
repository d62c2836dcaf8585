package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/spf13/cobra"

	"github.com/flecht-dev/flecht/internal/atomicfile"
	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/secret"
	"github.com/flecht-dev/flecht/internal/textfmt"
	"github.com/flecht-dev/flecht/internal/ui"
)

// The verbs that move a key between keyrings: export (the public half of
// an OKP key) and import (one JWK).

// maxJWKInput bounds a JWK file: one key is a few hundred bytes.
const maxJWKInput = 1 << 20

// KeyExportReport is what `keys export --out FILE` prints (without --out
// the JWK itself is the output).
type KeyExportReport struct {
	Keyring string         `json:"keyring"`
	Action  string         `json:"action"` // exported
	Kid     string         `json:"kid"`
	Type    secret.KeyType `json:"type"`
	Scopes  []string       `json:"scopes"`
	File    string         `json:"file"`
}

func newCmdKeysExport(f *Factory, runF func(*KeysOptions) error) *cobra.Command {
	cmd, opts := keysCommand(f, &cobra.Command{
		Use:   "export KID [--out FILE [--force]]",
		Short: "Print the public half of an x25519 or ed25519 key as a JWK",
		Long: `Print the public half of key KID as one JWK, with its binding:
  {"crv": "X25519", "flenc_scopes": ["api"], "kid": KID, "kty": "OKP", "x": "…"}
(members sorted, two-space indent, as flechtctl's keyring export). Hand it
to a party that should seal to an X25519 recipient without being able to
open, or check an Ed25519 signer's values without being able to sign: it
imports it with 'flecht keys import' (or 'flechtctl keyring import').

Never a private half. An oct key has no public half: it is refused (exit 3),
since sharing it would share the power to open and forge. The keyring is
not changed.

The JWK goes to standard output whatever -o says. --out FILE writes it to
FILE instead (atomically, mode 0644: it holds no secret) and prints what
was written; an existing FILE is refused (exit 3) unless --force, and the
keyring file itself is never overwritten. KID may also be given as --kid.`,
		Example: `  flecht keys export --keyring keyring.json rcpt-api-2026 > rcpt-api-2026.jwk
  flecht keys export --keyring keyring.json sig-api-2026 --out sig-api-2026.jwk`,
		Args: usageArgs(cobra.MaximumNArgs(1)),
	}, true, func(opts *KeysOptions, args []string) error {
		if len(args) == 1 {
			if opts.Kid != "" && opts.Kid != args[0] {
				return errors.New("give the key once: as KID or as --kid")
			}
			opts.Kid = args[0]
		}
		if opts.Kid == "" {
			return errors.New("which key? give KID (keys export KID)")
		}
		if opts.Force && opts.Out == "" {
			return errors.New("--force only applies with --out FILE")
		}
		return nil
	}, runF, runKeysExport)
	cmd.Flags().StringVar(&opts.Out, "out", "", "write the JWK to FILE instead of standard output")
	cmd.Flags().BoolVar(&opts.Force, "force", false, "with --out: replace FILE if it exists")
	_ = cmd.MarkFlagFilename("out", "jwk", "json")
	return cmd
}

func runKeysExport(opts *KeysOptions) error {
	kr, err := loadKeyringForKeys(opts)
	if err != nil {
		return err
	}
	e, ok := kr.Entry(opts.Kid)
	if ok && e.Type == secret.TypeOct {
		return exitcode.RefusedError(fmt.Errorf("keyring_conflict: key %q is a symmetric (oct) key: it has no public half, and exporting it would hand over the power to open and forge; "+
			"share an oct key only as the keyring file, through your secret store", opts.Kid))
	}
	jwk, err := kr.PublicJWK(opts.Kid)
	if err != nil {
		return secret.EditError(err, kr.Kids())
	}
	if e.Mismatch {
		fmt.Fprintf(opts.IO.ErrOut, "warning: key %q: its private half does not match its public half; the export is the public half, which the holder of this keyring cannot use\n", opts.Kid)
	}
	if opts.Out == "" {
		_, err := opts.IO.Out.Write(jwk)
		return err
	}
	if err := writeOutFile(opts.Out, jwk, 0o644, opts.Force, opts.Keyring); err != nil {
		return err
	}
	rep := KeyExportReport{Keyring: opts.Keyring, Action: secret.ActionExported, Kid: opts.Kid, Type: e.Type, Scopes: e.Scopes, File: opts.Out}
	return opts.Printer().Print(rep, func(h *ui.Human) error {
		h.Printf("wrote the public half of %s key %q (bound to %s) to %s\n", rep.Type, rep.Kid, textfmt.QuoteList(rep.Scopes), rep.File)
		return nil
	})
}

func newCmdKeysImport(f *Factory, runF func(*KeysOptions) error) *cobra.Command {
	cmd, opts := keysCommand(f, &cobra.Command{
		Use:   "import FILE|- [--scope S]... [--primary] [--primary-for S]... [--signing-for S]... [--protect]",
		Short: "Add one JWK (typically an export) to the keyring",
		Long: `Add the single JWK in FILE ("-": standard input) as a new key: an oct
key, an X25519 recipient or an Ed25519 signer, typically what 'keys export'
(or 'flechtctl keyring export') wrote. Its private half is kept when the
JWK carries one, and so is its binding (flenc_scopes); an X25519 or Ed25519
JWK without a binding needs --scope S (repeatable), which cannot rebind a
JWK that has one. Unknown members are kept.

A kid the keyring already holds is refused (exit 3): its key is never
replaced. FILE must hold one JWK, not a JWK Set. The roles are add's:
--primary, --primary-for S, --signing-for S.

When the keyring file does not exist, import creates it, as flechtctl
does, only with --primary: the imported key must be a sealing key (oct or
x25519) to be the new keyring's primary. --protect then writes the new file
password-protected (--password-file, ` + EnvKeyringPasswordFile + `, or
asked twice on a terminal); an existing keyring keeps its protection, and
is protected with 'flecht keys protect'.`,
		Example: `  flecht keys import --keyring keyring.json rcpt-api-2026.jwk
  flecht keys import --keyring writer.json rcpt-api-2026.jwk --primary-for api
  flecht keys export --keyring a.json sig-api-2026 | flecht keys import --keyring b.json -
  flecht keys import --keyring new.json prod.jwk --primary --protect --password-file pw`,
		Args: usageArgs(cobra.ExactArgs(1)),
	}, false, func(opts *KeysOptions, args []string) error {
		opts.Input = args[0]
		return nil
	}, runF, runKeysImport)
	addNewKeyFlags(cmd, opts, false, "")
	cmd.Flags().Lookup("scope").Usage = "bind the key to scope S (repeatable) when the JWK has no flenc_scopes"
	cmd.Flags().BoolVar(&opts.Protect, "protect", false, "when import creates the keyring: write it password-protected")
	return cmd
}

func runKeysImport(opts *KeysOptions) error {
	jwk, info, err := readJWK(opts)
	if err != nil {
		return err
	}
	_, statErr := os.Lstat(opts.Keyring)
	exists := statErr == nil
	if statErr != nil && !errors.Is(statErr, fs.ErrNotExist) {
		return statErr
	}
	importAndRole := func(kr *secret.Keyring) (*secret.Keyring, error) {
		next, err := kr.Import(jwk)
		if err != nil {
			return nil, err
		}
		for _, kid := range next.Kids() {
			if !kr.Has(kid) {
				opts.Kid = kid
			}
		}
		return secret.ApplyRoles(next, opts.Kid, opts.Roles, !info.HadScopes)
	}
	if exists {
		if opts.Protect {
			return exitcode.UsageError(errors.New("--protect applies only when import creates the keyring; protect an existing one with 'flecht keys protect'"))
		}
		return changeKeyring(opts, secret.ActionImported, importAndRole)
	}
	if !opts.Roles.Primary {
		return exitcode.Usagef("keyring %s does not exist: import creates it only with --primary, making the imported key (an oct or x25519 key) its primary; or create it with 'flecht keys init' first", opts.Keyring)
	}
	if info.Crv == "Ed25519" {
		return exitcode.Usagef("keyring %s does not exist, and an ed25519 key cannot be the primary a new keyring needs: create it with 'flecht keys init' (an oct or x25519 key), then import this key into it", opts.Keyring)
	}
	kr, err := importAndRole(&secret.Keyring{})
	if err != nil {
		return secret.EditError(err, nil)
	}
	return createKeyring(opts, kr)
}

// readJWK reads the JWK an import adds (--input, a file or - for standard
// input), bounded, and has secret.PrepareJWK check it and apply --scope.
func readJWK(opts *KeysOptions) (jwk []byte, info secret.JWKInfo, err error) {
	usage := func(format string, args ...any) ([]byte, secret.JWKInfo, error) {
		return nil, secret.JWKInfo{}, exitcode.Usagef(format, args...)
	}
	name := opts.Input
	var r io.Reader
	if name == "-" {
		name, r = "standard input", opts.IO.In
	} else {
		f, err := os.Open(opts.Input)
		if err != nil {
			return nil, secret.JWKInfo{}, err
		}
		defer f.Close()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, maxJWKInput+1))
	if err != nil {
		return nil, secret.JWKInfo{}, fmt.Errorf("reading %s: %w", name, err)
	}
	if len(b) > maxJWKInput {
		return usage("%s holds more than %d bytes: not one JWK", name, maxJWKInput)
	}
	jwk, info, err = secret.PrepareJWK(b, name, opts.Scopes)
	return jwk, info, err
}

// writeOutFile writes data to path atomically with mode perm, replacing an
// existing file only with force. It refuses (exit 3) an existing path
// without force, and the keyring file itself always.
func writeOutFile(path string, data []byte, perm os.FileMode, force bool, keyring string) (err error) {
	if atomicfile.SameFile(path, keyring) {
		return exitcode.RefusedError(fmt.Errorf("refusing to write to %s: it is the keyring file itself; give another --out", path))
	}
	exists := exitcode.RefusedError(fmt.Errorf("refusing to overwrite %s: the file exists; add --force to replace it", path))
	if _, err := os.Lstat(path); err == nil && !force {
		return exists
	}
	err = atomicfile.Write(path, data, perm, atomicfile.Options{Replace: force})
	if errors.Is(err, fs.ErrExist) {
		return exists
	}
	return err
}
