package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/secret"
	"github.com/flecht-dev/flecht/internal/ui"
)

// EnvKeyring names the keyring file when --keyring is not given.
const EnvKeyring = "FLECHT_KEYRING"

var errNoKeyringPath = errors.New("no keyring file: give --keyring FILE or set " + EnvKeyring)

const keysLong = `Manage a keyring file: the JWK Set of AES-256 keys that encrypts and
decrypts flenc:jwe: secret tokens, the same file the Python Flechtwerk library
and any JOSE library load:

  {"keys": [{"kty": "oct", "kid": "prod-2026-01", "k": "<43 chars of base64url>"}, ...],
   "primary": "prod-2026-01"}

New tokens are sealed with the primary key; a token is opened with the key
its kid names, so old keys stay until nothing is sealed with them any more.
The file is written atomically (a temporary file in the same directory,
fsync, rename) with mode 0600, and a file that group or others may read is
reported with a warning. Temporary files that an interrupted write left
beside it (.FILE.tmp-*, .FILE.init-*: whole keyrings, key bytes included)
are removed once they are a minute old (-v logs it). No command prints key
bytes.

Rotation is reader-first:
  1. keys add --kid NEW       on a copy, then roll the file out to every reader
                              ('keys check --kid NEW' confirms they loaded it)
  2. keys promote --kid NEW   then roll it out to the writers: new tokens use NEW
  3. re-encrypt the stored tokens under NEW ('secrets reencrypt --execute')
  4. verify by a scan that no token names OLD any more ('secrets scan')
  5. keys remove --kid OLD    and roll the file out again (with --topics and
                              --field it refuses while a token names OLD)
'keys rotate-plan --kid NEW' shows these steps with their live status.

A new KID (init, add) must be printable text, without control characters
or surrounding whitespace, of at most 128 bytes, so that it shows in one
piece in tables, logs and metric labels; a keyring written elsewhere may
hold any non-empty kid and still loads.

add, promote and remove hold an advisory lock (.FILE.lock beside the file)
from reading the keyring to writing it, so two of them at once cannot lose
a change; a lock older than 10 seconds was left by a killed command and is
broken with a warning.

Keyrings written by Flechtwerk/flechtctl 0.17 load too: X25519 recipient
and Ed25519 signing keys beside oct ones, per-key scope bindings
(flenc_scopes), per-scope sealing and signing keys (flenc_primaries,
flenc_signing). remove refuses (exit 3) a key that the primary, a
flenc_primaries entry or a flenc_signing entry names: move that role first.
A password-protected keyring (an encrypted JWK Set, as 'flechtctl keyring
protect' writes) opens with --password-file FILE or ` + EnvKeyringPasswordFile + `
(or a prompt on a terminal), and an edit writes it back protected.

The keyring file comes from --keyring or ` + EnvKeyring + `.`

// KeysOptions are the inputs of `flecht keys init|add|promote|remove|list`.
type KeysOptions struct {
	IO      *ui.IOStreams
	Printer func() *ui.Printer
	Logger  func() *slog.Logger // notes of the file operations (-v shows the debug ones)
	Keyring string              // the keyring file: --keyring, else FLECHT_KEYRING
	// PasswordFile opens a password-protected keyring: --password-file,
	// else FLECHT_KEYRING_PASSWORD_FILE (else a prompt on a terminal).
	PasswordFile string
	Kid          string // the key operated on (not for list)
}

// KeyringReport is what every keys command prints: the keyring as it is
// after the command, and what the command did. Key bytes never appear.
type KeyringReport struct {
	Keyring string           `json:"keyring"`
	Action  string           `json:"action,omitempty"` // created, added, promoted, removed, unchanged; empty for list
	Kid     string           `json:"kid,omitempty"`    // the key the action was about
	Primary string           `json:"primary"`
	Keys    []secret.KeyInfo `json:"keys"`
}

// Actions reported by the keys commands.
const (
	keysCreated   = "created"
	keysAdded     = "added"
	keysPromoted  = "promoted"
	keysRemoved   = "removed"
	keysUnchanged = "unchanged"
)

// NewCmdKeys builds `flecht keys` and its subcommands.
func NewCmdKeys(f *Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "keys <command>",
		Short: "Create and rotate the keyring that encrypts secret fields",
		Long:  keysLong,
		Args:  usageArgs(cobra.NoArgs),
		RunE:  helpOrUnknown,
	}
	cmd.AddCommand(
		newCmdKeysInit(f, nil),
		newCmdKeysAdd(f, nil),
		newCmdKeysPromote(f, nil),
		newCmdKeysList(f, nil),
		guardKeysRemove(f, newCmdKeysRemove(f, nil)),
		NewCmdKeysCheck(f, nil),
		NewCmdKeysRotatePlan(f, nil),
	)
	return cmd
}

// keysCommand wires the flags every keys subcommand shares and checks them
// before run: the keyring path (flag, then environment) and, when needsKid,
// a non-empty --kid.
func keysCommand(f *Factory, cmd *cobra.Command, needsKid bool, runF, run func(*KeysOptions) error) *cobra.Command {
	opts := &KeysOptions{IO: f.IO, Printer: f.Printer, Logger: f.Logger}
	cmd.Args = usageArgs(cobra.NoArgs)
	cmd.RunE = func(*cobra.Command, []string) error {
		opts.Keyring = keyringPath(opts.Keyring, f.Getenv)
		opts.PasswordFile = passwordFilePath(opts.PasswordFile, f.Getenv)
		if opts.Keyring == "" {
			return exitcode.UsageError(errNoKeyringPath)
		}
		if needsKid && opts.Kid == "" {
			return exitcode.UsageError(errors.New("--kid KID is required (a non-empty key id)"))
		}
		if runF != nil {
			return runF(opts)
		}
		return run(opts)
	}
	addKeyringFlag(cmd, &opts.Keyring)
	addPasswordFileFlag(cmd, &opts.PasswordFile)
	if needsKid {
		cmd.Flags().StringVar(&opts.Kid, "kid", "", "key id (the JWK kid)")
	}
	return cmd
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

func newCmdKeysInit(f *Factory, runF func(*KeysOptions) error) *cobra.Command {
	return keysCommand(f, &cobra.Command{
		Use:   "init --keyring FILE --kid KID",
		Short: "Create a new keyring file with one random key as primary",
		Long: `Create a keyring file holding one fresh random AES-256 key (from the
operating system's CSPRNG) under KID, as primary. The file is written with
mode 0600.

An existing file is never overwritten: init refuses (exit 3) when FILE
exists, even if another process creates it while init runs. To add a key to
an existing keyring, use 'flecht keys add'.`,
		Example: `  flecht keys init --keyring /etc/flecht/keyring.json --kid prod-2026-01
  FLECHT_KEYRING=./keyring.json flecht keys init --kid dev`,
	}, true, runF, runKeysInit)
}

func newCmdKeysAdd(f *Factory, runF func(*KeysOptions) error) *cobra.Command {
	return keysCommand(f, &cobra.Command{
		Use:   "add --kid KID",
		Short: "Add a new random key to the keyring (not primary)",
		Long: `Add a fresh random AES-256 key under KID. The primary does not change:
rotation is reader-first, so roll the file out to every reader before
'flecht keys promote' makes writers seal with the new key. A kid already in
the keyring is refused (exit 3): its key bytes are never replaced.`,
		Example: `  flecht keys add --keyring keyring.json --kid prod-2026-07`,
	}, true, runF, runKeysAdd)
}

func newCmdKeysPromote(f *Factory, runF func(*KeysOptions) error) *cobra.Command {
	return keysCommand(f, &cobra.Command{
		Use:   "promote --kid KID",
		Short: "Make a key of the keyring the primary",
		Long: `Make KID the primary key: writers that load this file seal new tokens
with it. Tokens sealed with the previous primary still open, as long as its
key stays in the keyring. Promote only after every reader holds KID.
Promoting the key that is already primary changes nothing.`,
		Example: `  flecht keys promote --keyring keyring.json --kid prod-2026-07`,
	}, true, runF, runKeysPromote)
}

func newCmdKeysRemove(f *Factory, runF func(*KeysOptions) error) *cobra.Command {
	return keysCommand(f, &cobra.Command{
		Use:   "remove --kid KID",
		Short: "Remove a retired key from the keyring",
		Long: `Remove KID from the keyring. Tokens sealed with it can no longer be
opened, so remove a key only after every stored token has been re-encrypted
under the primary and a scan confirms that none names KID.

The primary key is never removed (exit 3): promote another key first.`,
		Example: `  flecht keys remove --keyring keyring.json --kid prod-2026-01`,
	}, true, runF, runKeysRemove)
}

func newCmdKeysList(f *Factory, runF func(*KeysOptions) error) *cobra.Command {
	return keysCommand(f, &cobra.Command{
		Use:   "list",
		Short: "List the key ids in the keyring and which one is primary",
		Long: `List the keys of the keyring by kid, in file order, and mark the
primary. Key bytes are never shown.

With -o json the output is an object:
  {"keyring": FILE, "primary": KID, "keys": [{"kid": KID, "primary": true}, ...]}`,
		Example: `  flecht keys list --keyring keyring.json
  FLECHT_KEYRING=keyring.json flecht keys list -o json | jq -r .primary`,
	}, false, runF, runKeysList)
}

func runKeysInit(opts *KeysOptions) error {
	if _, err := os.Lstat(opts.Keyring); err == nil {
		return errKeyringExists(opts.Keyring)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	kr, err := secret.NewKeyring(opts.Kid)
	if err != nil {
		return keysKidError(err, nil)
	}
	if err := kr.Create(opts.Keyring, opts.fileLog()); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return errKeyringExists(opts.Keyring)
		}
		return err
	}
	return printKeyring(opts, keysCreated, kr)
}

func runKeysAdd(opts *KeysOptions) error {
	return changeKeyring(opts, keysAdded, func(kr *secret.Keyring) (*secret.Keyring, error) { return kr.Add(opts.Kid) })
}

func runKeysPromote(opts *KeysOptions) error {
	return changeKeyring(opts, keysPromoted, func(kr *secret.Keyring) (*secret.Keyring, error) {
		if kr.Primary() == opts.Kid {
			return kr, nil
		}
		return kr.Promote(opts.Kid)
	})
}

func runKeysRemove(opts *KeysOptions) error {
	return changeKeyring(opts, keysRemoved, func(kr *secret.Keyring) (*secret.Keyring, error) { return kr.Remove(opts.Kid) })
}

// changeKeyring is one read-modify-write of the keyring, under its lock so
// that a concurrent keys command cannot drop this change (or this one
// theirs): load, change, save, print. A change that returns the keyring
// itself writes nothing and reports it unchanged.
func changeKeyring(opts *KeysOptions, action string, change func(*secret.Keyring) (*secret.Keyring, error)) error {
	unlock, err := secret.Lock(opts.Keyring, opts.fileLog())
	if errors.Is(err, fs.ErrNotExist) {
		return errNoKeyringFile(opts.Keyring)
	}
	if err != nil {
		return err
	}
	defer unlock()
	kr, err := loadKeyringForKeys(opts)
	if err != nil {
		return err
	}
	next, err := change(kr)
	if err != nil {
		return keysKidError(err, kr.Kids())
	}
	if next == kr {
		return printKeyring(opts, keysUnchanged, kr)
	}
	if err := next.Save(opts.Keyring, opts.fileLog()); err != nil {
		return err
	}
	return printKeyring(opts, action, next)
}

func runKeysList(opts *KeysOptions) error {
	kr, err := loadKeyringForKeys(opts)
	if err != nil {
		return err
	}
	return printKeyring(opts, "", kr)
}

func printKeyring(opts *KeysOptions, action string, kr *secret.Keyring) error {
	report := KeyringReport{Keyring: opts.Keyring, Primary: kr.Primary(), Keys: kr.List()}
	if action != "" {
		report.Action, report.Kid = action, opts.Kid
	}
	return opts.Printer().Print(report, func(h *ui.Human) error {
		switch action {
		case keysCreated:
			h.Printf("created %s (mode 0600) with key %q as primary\n", report.Keyring, report.Kid)
		case keysAdded:
			h.Printf("added key %q to %s; the primary is still %q\n", report.Kid, report.Keyring, report.Primary)
			h.Printf("%s\n", h.Faint("next: roll the file out to every reader, then 'flecht keys promote --kid "+report.Kid+"'"))
		case keysPromoted:
			h.Printf("key %q is now primary in %s; tokens sealed with the other keys still open\n", report.Kid, report.Keyring)
			h.Printf("%s\n", h.Faint("next: roll the file out to the writers, re-encrypt stored tokens, verify by a scan, then remove the old key"))
		case keysRemoved:
			h.Printf("removed key %q from %s\n", report.Kid, report.Keyring)
		case keysUnchanged:
			h.Printf("key %q is already primary in %s; nothing changed\n", report.Kid, report.Keyring)
		}
		rows := make([][]string, len(report.Keys))
		for i, k := range report.Keys {
			primary := "no"
			if k.Primary {
				primary = "yes"
			}
			rows[i] = []string{k.Kid, primary}
		}
		h.Table([]string{"kid", "primary"}, rows)
		return nil
	})
}

// loadKeyringForKeys loads the keyring a keys command changes or lists,
// warning on standard error when the file is readable beyond its owner.
func loadKeyringForKeys(opts *KeysOptions) (*secret.Keyring, error) {
	kr, err := loadKeyringFile(opts.IO.ErrOut, opts.Keyring, opts.fileLog(), keyringPassword(opts.PasswordFile, opts.IO))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errNoKeyringFile(opts.Keyring)
	}
	var se *secret.Error
	if errors.As(err, &se) {
		return nil, errors.New(secretLine(se, nil))
	}
	return kr, err
}

// loadKeyringFile loads and validates a keyring file and prints the loader's
// warnings (a mode open to group or others) to errOut.
func loadKeyringFile(errOut io.Writer, path string, opts ...secret.FileOption) (*secret.Keyring, error) {
	kr, warnings, err := secret.Load(path, opts...)
	for _, w := range warnings {
		fmt.Fprintf(errOut, "warning: %s\n", w)
	}
	return kr, err
}

// keysKidError maps the keyring's refusals to exit codes: a kid that is
// already taken or the primary is refused for safety (3), a kid the keyring
// does not hold is a failure (1), a kid that is not a valid name is a usage
// error (2). kids, when known, are the keyring's key ids.
func keysKidError(err error, kids []string) error {
	var se *secret.Error
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
	if se.Kind == secret.KindUnknownKid && kids != nil {
		fmt.Fprintf(&b, " (the keyring holds %s)", quoteList(kids))
	}
	line := errors.New(b.String())
	switch se.Kind {
	case secret.KindKeyringConflict:
		return exitcode.RefusedError(line)
	case secret.KindKeyringInvalid:
		return exitcode.UsageError(line)
	}
	return line
}

func errNoKeyringFile(path string) error {
	return fmt.Errorf("keyring %s does not exist; create it with 'flecht keys init --keyring %s --kid KID'", path, path)
}

func errKeyringExists(path string) error {
	return exitcode.RefusedError(fmt.Errorf(
		"refusing to overwrite %s: the file exists (keys init only creates new keyrings; use 'flecht keys add' to add a key to it)", path))
}

// secretLine renders a secret error as one line that starts with its kind,
// for "error: <kind>: …". kids, when known, are the keyring's key ids, named
// when a token's kid is missing. The line carries what *secret.Error
// carries: kids, scopes and a safe detail, never key bytes or plaintext.
func secretLine(e *secret.Error, kids []string) string {
	// The kid and token scope come from the token's header: clipped.
	kid, tokenScope := secret.Clip(e.Kid), secret.Clip(e.TokenScope)
	var b strings.Builder
	b.WriteString(string(e.Kind))
	b.WriteString(": ")
	switch e.Kind {
	case secret.KindUnknownKid:
		if kids != nil {
			fmt.Fprintf(&b, "token kid %q is not in the keyring (it holds %s)", kid, quoteList(kids))
		} else {
			fmt.Fprintf(&b, "key %q is not in the keyring", kid)
		}
	case secret.KindTagMismatch:
		fmt.Fprintf(&b, "token kid %q is in the keyring, but authentication failed: this keyring's key %q has other bytes than the one that sealed the token, or the token was altered", kid, kid)
	case secret.KindScopeViolation:
		if e.Scope == "" {
			fmt.Fprintf(&b, "token kid %q is bound to scope %q and cannot be read unscoped (a scope is never dropped; pass --scope %s to read it in its scope)", kid, tokenScope, shellQuote(tokenScope))
		} else {
			fmt.Fprintf(&b, "token kid %q belongs to scope %q, not to scope %q", kid, tokenScope, e.Scope)
		}
	case secret.KindPlaintext:
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
		if e.Kind == secret.KindHeaderRejected {
			b.WriteString(" (refused before any decryption)")
		}
	}
	return strings.ReplaceAll(b.String(), "\n", " ")
}

func quoteList(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}
