package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/secret"
	"github.com/flecht-dev/flecht/internal/show"
	"github.com/flecht-dev/flecht/internal/textfmt"
	"github.com/flecht-dev/flecht/internal/ui"
)

// EnvKeyring names the keyring file when --keyring is not given.
const EnvKeyring = "FLECHT_KEYRING"

var errNoKeyringPath = errors.New("no keyring file: give --keyring FILE or set " + EnvKeyring)

const keysLong = `Manage a keyring file: the JWK Set that Flechtwerk 0.17, flechtctl 0.17 and
flecht all load. It holds keys of three kinds, one kind per kid:

  oct       a 32-byte AES-256 key: seals and opens dir + A256GCM tokens
  x25519    a recipient: its public half seals ECDH-ES+A256KW tokens, its
            private half opens them (a copy without it is seal-only)
  ed25519   a signer: its private half signs flsig:jws: values, its public
            half verifies them

A key may be bound to the scopes it serves (flenc_scopes); X25519 and
Ed25519 keys must be. Three kinds of role say which key does what:

  primary           the sealing key of every value (an oct or x25519 key)
  primary-for:S     the sealing key of scope S (flenc_primaries), instead
  signing-for:S     the key that signs scope S (flenc_signing; ed25519)

  {"keys": [{"kty": "oct", "kid": "a", "k": "…"},
            {"kty": "OKP", "crv": "X25519", "kid": "r", "x": "…", "d": "…", "flenc_scopes": ["api"]}],
   "primary": "a", "flenc_primaries": {"api": "r"}}

The verbs:
  init        create the file with one key, its primary (never overwrites)
  add         add a fresh key of any kind, with roles if asked
  promote     make a key the primary, or the sealing key of one scope
  signing     make an ed25519 key the signing key of one scope
  remove      remove a key no role names (and, with topics, no token uses)
  list        every key: kind, halves, scopes, roles, a broken pair
  export      print the public half of an x25519 or ed25519 key as a JWK
  import      add one JWK (an export, or a key from elsewhere)
  protect     password-protect the file in place
  unprotect   write it plain again (in place, or a plain copy with --out)
  check       check that every reader has loaded a key (metrics)
  rotate-plan the rotation runbook with each step's live status

Rotation is reader-first:
  1. keys add --kid NEW       on a copy, then roll the file out to every reader
                              and restart it: a stage reads its keyring when
                              it starts ('keys check --kid NEW' confirms they
                              loaded it)
  2. keys promote --kid NEW   (or --scope S for one scope's key) and roll it
                              out to the writers: new tokens use NEW (an
                              ed25519 NEW: 'keys signing --kid NEW --scope S')
  3. re-encrypt the stored tokens under NEW ('secrets reencrypt --execute';
                              with --resign it signs them again for a new signer)
  4. verify by a scan that no token names OLD any more ('secrets scan')
  5. keys remove --kid OLD    and roll the file out again (with --topics and
                              --field it refuses while a value names OLD)
'keys rotate-plan --kid NEW [--scope S]' shows these steps with their status,
for a sealing key and for a signer.

Every verb that changes the file holds an advisory lock (.FILE.lock beside
it) from reading the keyring to writing it, so two at once cannot lose a
change. A verb that finds the lock held says after a second who holds it
(pid, host, since when) and gives up after 30 seconds (exit 3) or at once
on Ctrl-C; a lock whose holder no longer runs, or one older than 10 seconds
from a holder it cannot check, was left by a killed command and is broken
with a warning. Anything else in the lock's place (a directory, a symlink)
is an error naming it. The file is written atomically (a temporary file in
the same directory, fsync, rename) with mode 0600, unknown members are kept,
and a file that group or others may read is reported with a warning.
Temporary files an interrupted write left beside it are removed once a
minute old (-v logs it). Each change is printed (-o json: "changes"); no
verb prints key bytes.

A password-protected keyring (an encrypted JWK Set, PBES2-HS512+A256KW)
opens with --password-file FILE or ` + EnvKeyringPasswordFile + `, or a prompt
on a terminal, and every edit writes it back protected with the same
password. Passwords are at least 14 bytes. A password file is read as
flechtctl reads it: UTF-8 text, one trailing line break (\n, \r\n) ignored.

A new KID or scope name must be printable text, without control
characters or surrounding whitespace, of at most 128 bytes, so that it shows
in one piece in tables, logs and metric labels; a keyring written elsewhere
may hold any non-empty kid and still loads.

Exit codes: 0 done (or nothing to change), 1 failure (a missing file or
kid, a wrong password), 2 usage (a bad name, a kind that cannot take the
role asked), 3 refused for safety (an existing file, a duplicate kid, a kid
a role or a stored value still needs).

The keyring file comes from --keyring or ` + EnvKeyring + `.`

// KeysOptions are the inputs of the `flecht keys` verbs that read or edit
// the keyring file. Each verb reads the fields it documents.
type KeysOptions struct {
	IO      *ui.IOStreams
	Printer func() *ui.Printer
	Logger  func() *slog.Logger // notes of the file operations (-v shows the debug ones)
	Keyring string              // the keyring file: --keyring, else FLECHT_KEYRING
	// PasswordFile opens a password-protected keyring, and is the password
	// protect, init --protect and import --protect write with:
	// --password-file, else FLECHT_KEYRING_PASSWORD_FILE (else a prompt on
	// a terminal).
	PasswordFile string
	// Prompt reads a password from the terminal; nil when standard input
	// is not one.
	Prompt ui.PromptFunc

	Kid string // the key operated on

	// init, add: the kind and the binding of the new key; import: a
	// binding for a JWK that has none.
	Type   string
	Scopes []string
	// init, add, import: roles for the new key.
	Roles secret.Roles
	// init, import: write a new file password-protected.
	Protect bool

	// promote, signing: the scope whose role changes ("" for the primary);
	// Clear removes the scope's entry instead of naming a kid.
	Scope string
	Clear bool

	// import: the JWK file ("-" for standard input).
	Input string
	// export, unprotect: write to this file instead (export: standard
	// output when empty; unprotect: in place when empty); Force replaces
	// an existing one.
	Out   string
	Force bool

	// password is the keyring's password once asked on the terminal, so
	// that it is asked before the lock is taken, never while it is held.
	password []byte
}

// NewCmdKeys builds `flecht keys` and its subcommands.
func NewCmdKeys(f *Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "keys <command>",
		Short: "Create, rotate, share and protect the keyring of secret fields",
		Long:  keysLong,
		Args:  unknownSubcommand,
		RunE:  helpOrUnknown,
	}
	cmd.AddCommand(
		newCmdKeysInit(f, nil),
		newCmdKeysAdd(f, nil),
		newCmdKeysPromote(f, nil),
		newCmdKeysSigning(f, nil),
		newCmdKeysRemove(f, nil),
		newCmdKeysList(f, nil),
		newCmdKeysExport(f, nil),
		newCmdKeysImport(f, nil),
		newCmdKeysProtect(f, nil),
		newCmdKeysUnprotect(f, nil),
		NewCmdKeysCheck(f, nil),
		NewCmdKeysRotatePlan(f, nil),
	)
	return cmd
}

// keysCommand wires what every keyring verb shares: --keyring (flag, then
// environment, required) and --password-file, and, when kidFlag, --kid.
// check runs after the flags are read and before run, for the verb's own
// usage rules.
func keysCommand(f *Factory, cmd *cobra.Command, kidFlag bool, check func(*KeysOptions, []string) error, runF, run func(*KeysOptions) error) (*cobra.Command, *KeysOptions) {
	opts := &KeysOptions{IO: f.IO, Printer: f.Printer, Logger: f.Logger}
	if cmd.Args == nil {
		cmd.Args = usageArgs(cobra.NoArgs)
	}
	cmd.RunE = func(_ *cobra.Command, args []string) error {
		opts.Keyring = keyringPath(opts.Keyring, f.Getenv)
		opts.PasswordFile = passwordFilePath(opts.PasswordFile, f.Getenv)
		opts.Prompt = ui.PasswordPrompt(f.IO)
		if opts.Keyring == "" {
			return exitcode.UsageError(errNoKeyringPath)
		}
		if check != nil {
			if err := check(opts, args); err != nil {
				return exitcode.UsageError(err)
			}
		}
		if runF != nil {
			return runF(opts)
		}
		return run(opts)
	}
	addKeyringFlag(cmd, &opts.Keyring)
	addPasswordFileFlag(cmd, &opts.PasswordFile)
	if kidFlag {
		cmd.Flags().StringVar(&opts.Kid, "kid", "", "key id (the JWK kid)")
	}
	return cmd, opts
}

// requireKid is the check of the verbs whose --kid is required.
func requireKid(opts *KeysOptions, _ []string) error {
	if opts.Kid == "" {
		return errors.New("--kid KID is required (a non-empty key id)")
	}
	return nil
}

// fileLog routes the keyring file operations' notes to the command's logger.
func (opts *KeysOptions) fileLog() secret.FileOption {
	if opts.Logger == nil {
		return secret.FileLog(slog.Default())
	}
	return secret.FileLog(opts.Logger())
}

// helpOrUnknown runs a command group: its help without arguments, while its
// Args check turns an unknown subcommand into a usage error (exit 2) instead
// of cobra's help with exit 0.
func helpOrUnknown(cmd *cobra.Command, _ []string) error { return cmd.Help() }

func addKeyringFlag(cmd *cobra.Command, p *string) {
	cmd.Flags().StringVar(p, "keyring", "", "keyring file, a JWK Set (env "+EnvKeyring+")")
	_ = cmd.MarkFlagFilename("keyring", "json")
}

// keyringPath applies flag > environment.
func keyringPath(flag string, getenv func(string) string) string {
	if flag != "" {
		return flag
	}
	return getenv(EnvKeyring)
}

func newCmdKeysList(f *Factory, runF func(*KeysOptions) error) *cobra.Command {
	cmd, _ := keysCommand(f, &cobra.Command{
		Use:   "list",
		Short: "List the keys: kind, halves held, scopes, roles",
		Long: `List the keys of the keyring in file order: kid, kind (oct, x25519,
ed25519), whether it holds the private half or only the public one, the
scopes it is bound to, and its roles (primary, primary-for:S, signing-for:S).
A key whose private half does not match its public half is flagged: the
file loads, but the key fails at use. The first line says whether the file
is password-protected. Key bytes are never shown.

With -o json the output is an object:
  {"keyring": FILE, "protected": false, "primary": KID,
   "primary_for": {SCOPE: KID}, "signing_for": {SCOPE: KID},
   "keys": [{"kid": KID, "type": "x25519", "private": true, "scopes": ["api"],
             "roles": ["primary-for:api"], "primary": false,
             "primary_for": ["api"], "signing_for": [], "mismatch": false}]}`,
		Example: `  flecht keys list --keyring keyring.json
  FLECHT_KEYRING=keyring.json flecht keys list -o json | jq -r .primary
  flecht keys list --keyring sealed.jwe --password-file /run/secrets/keyring-pw`,
	}, false, nil, runF, runKeysList)
	return cmd
}

func runKeysList(opts *KeysOptions) error {
	kr, err := loadKeyringForKeys(opts)
	if err != nil {
		return err
	}
	return printKeyring(opts, secret.NewKeyringReport(opts.Keyring, kr))
}

// changeKeyring is one edit of the keyring (secret.Edit), a password asked
// before the lock is taken, and prints what changed.
func changeKeyring(opts *KeysOptions, action string, change func(*secret.Keyring) (*secret.Keyring, error)) error {
	if err := opts.askPasswordFirst(); err != nil {
		return err
	}
	rep, err := secret.Edit(opts.Keyring, func() (*secret.Keyring, error) { return loadKeyringForKeys(opts) }, change, opts.fileLog())
	if errors.Is(err, fs.ErrNotExist) {
		return errNoKeyringFile(opts.Keyring)
	}
	if err != nil {
		return err
	}
	rep.Action, rep.Kid, rep.Scope = action, opts.Kid, opts.Scope
	if len(rep.Changes) == 0 {
		rep.Action = secret.ActionUnchanged
	}
	return printKeyring(opts, rep)
}

// printKeyring prints a report: what the verb did and changed, then the
// keyring as a table.
func printKeyring(opts *KeysOptions, rep secret.KeyringReport) error {
	return opts.Printer().Print(rep, func(h *ui.Human) error { return show.Keyring(h, rep) })
}

// askPasswordFirst asks for the password of a protected keyring on the
// terminal before a change takes the lock: a lock held while someone types
// would be broken as stale (10 s) by the next writer. A password file, a
// plain file, or no terminal: nothing to ask now.
func (opts *KeysOptions) askPasswordFirst() error {
	if opts.PasswordFile != "" || opts.Prompt == nil || opts.password != nil {
		return nil
	}
	if plain, err := fileIsPlain(opts.Keyring); err != nil || plain {
		return nil
	}
	pw, err := opts.Prompt("Keyring password: ")
	if err != nil {
		return err
	}
	opts.password = pw
	return nil
}

// passwordOption opens a protected keyring: the password asked already,
// else the password file, else the terminal (Prompt), else an error saying
// what to give.
func (opts *KeysOptions) passwordOption() secret.FileOption {
	switch {
	case opts.password != nil:
		pw := opts.password
		return secret.WithPassword(func() ([]byte, error) { return pw, nil })
	case opts.PasswordFile == "" && opts.Prompt != nil:
		return secret.WithPassword(func() ([]byte, error) { return opts.Prompt("Keyring password: ") })
	}
	return keyringPassword(opts.PasswordFile, opts.IO)
}

// fileIsPlain reports whether the keyring file at path is a plain JWK Set
// (or anything but a protected one); an error when it cannot be read.
func fileIsPlain(path string) (bool, error) {
	doc, err := secret.ReadKeyringFile(path)
	if err != nil {
		return false, err
	}
	return !secret.IsProtectedDocument(doc), nil
}

// loadKeyringForKeys loads the keyring a keys verb changes or lists,
// warning on standard error when the file is readable beyond its owner.
func loadKeyringForKeys(opts *KeysOptions) (*secret.Keyring, error) {
	kr, err := loadKeyringFile(opts.IO.ErrOut, opts.Keyring, opts.fileLog(), opts.passwordOption())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errNoKeyringFile(opts.Keyring)
	}
	var se *secret.Error
	if errors.As(err, &se) {
		return nil, secretLine(se, err)
	}
	return kr, err
}

// loadKeyringFile loads and validates a keyring file and prints the loader's
// warnings (a mode open to group or others) to errOut.
func loadKeyringFile(errOut io.Writer, path string, opts ...secret.FileOption) (*secret.Keyring, error) {
	kr, warnings, err := secret.Load(path, opts...)
	for _, w := range warnings {
		fmt.Fprintf(errOut, "warning: %s\n", textfmt.Text(w))
	}
	return kr, err
}

// errNoKeyringFile: a missing file is a usage error (exit 2), for a
// keyring as for a stage file or a config file.
func errNoKeyringFile(path string) error {
	return exitcode.Usagef("keyring %s does not exist; create it with 'flecht keys init --keyring %s --kid KID'", path, textfmt.ShellQuote(path))
}

func errKeyringExists(path string) error {
	return exitcode.RefusedError(fmt.Errorf(
		"refusing to overwrite %s: the file exists (keys init only creates new keyrings; use 'flecht keys add' to add a key to it)", path))
}
