package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/spf13/cobra"

	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/secret"
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
                              ('keys check --kid NEW' confirms they loaded it)
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
	Prompt promptFunc

	Kid string // the key operated on

	// init, add: the kind and the binding of the new key; import: a
	// binding for a JWK that has none.
	Type   string
	Scopes []string
	// init, add, import: roles for the new key.
	Roles keyRoles
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

// keyRoles are the roles a new key takes: --primary, --primary-for S,
// --signing-for S.
type keyRoles struct {
	Primary    bool
	PrimaryFor []string
	SigningFor []string
}

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
	Kid     string         `json:"kid"`
	Type    secret.KeyType `json:"type"`    // oct, x25519, ed25519
	Private bool           `json:"private"` // holds its private half (always for oct)
	Scopes  []string       `json:"scopes"`  // its binding (flenc_scopes); empty when unbound
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
	Change string         `json:"change"`
	Kid    string         `json:"kid,omitempty"`   // the key added or removed, or the role's new holder ("" when cleared)
	Type   secret.KeyType `json:"type,omitempty"`  // key_added: its kind
	Scope  string         `json:"scope,omitempty"` // primary_for, signing_for: the scope
	From   string         `json:"from,omitempty"`  // a role's previous holder ("" when there was none)
}

// Actions reported by the keys verbs.
const (
	keysCreated     = "created"
	keysAdded       = "added"
	keysImported    = "imported"
	keysPromoted    = "promoted"
	keysAssigned    = "assigned"
	keysCleared     = "cleared"
	keysRemoved     = "removed"
	keysProtected   = "protected"
	keysUnprotected = "unprotected"
	keysCopied      = "copied"
	keysExported    = "exported"
	keysUnchanged   = "unchanged"
)

// Changes listed in a KeyringChange.
const (
	changeKeyAdded    = "key_added"
	changeKeyRemoved  = "key_removed"
	changePrimary     = "primary"
	changePrimaryFor  = "primary_for"
	changeSigningFor  = "signing_for"
	changeProtected   = "protected"
	changeUnprotected = "unprotected"
)

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
		opts.Prompt = terminalPrompt(f.IO)
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
	return printKeyring(opts, newKeyringReport(opts.Keyring, kr))
}

// changeKeyring is one read-modify-write of the keyring, under its lock so
// that a concurrent keys verb cannot drop this change (or this one theirs):
// load, change, save, print what changed. A change that leaves the keyring
// as it was writes nothing and reports it unchanged. The lock is released
// before anything is printed: a reader that closes the pipe early (| head)
// kills the process with SIGPIPE mid-print, and a lock left behind would
// hold the next verb until it turns stale.
func changeKeyring(opts *KeysOptions, action string, change func(*secret.Keyring) (*secret.Keyring, error)) error {
	if err := opts.askPasswordFirst(); err != nil {
		return err
	}
	unlock, err := secret.Lock(opts.Keyring, opts.fileLog())
	if errors.Is(err, fs.ErrNotExist) {
		return errNoKeyringFile(opts.Keyring)
	}
	if err != nil {
		return err
	}
	release := sync.OnceFunc(unlock)
	defer release()
	kr, err := loadKeyringForKeys(opts)
	if err != nil {
		return err
	}
	next, err := change(kr)
	if err != nil {
		if exitcode.Code(err) == exitcode.Failure {
			err = keysKidError(err, kr.Kids())
		}
		return err
	}
	rep := newKeyringReport(opts.Keyring, next)
	rep.Changes = keyringChanges(kr, next)
	rep.Action, rep.Kid, rep.Scope = action, opts.Kid, opts.Scope
	if len(rep.Changes) == 0 {
		rep.Action = keysUnchanged
		release()
		return printKeyring(opts, rep)
	}
	if err := next.Save(opts.Keyring, opts.fileLog()); err != nil {
		return err
	}
	release()
	return printKeyring(opts, rep)
}

// newKeyringReport describes kr, the keyring at path.
func newKeyringReport(path string, kr *secret.Keyring) KeyringReport {
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

// keyringChanges lists what differs between before (nil: no keyring yet)
// and after: keys added and removed, the primary, each scope's sealing and
// signing key, the file's protection.
func keyringChanges(before, after *secret.Keyring) []KeyringChange {
	var out []KeyringChange
	var beforePrimary string
	beforeFor, beforeSigning := map[string]string{}, map[string]string{}
	if before != nil {
		beforePrimary, beforeFor, beforeSigning = before.Primary(), before.PrimaryFor(), before.SigningFor()
	}
	for _, e := range after.Entries() {
		if !before.Has(e.Kid) {
			out = append(out, KeyringChange{Change: changeKeyAdded, Kid: e.Kid, Type: e.Type})
		}
	}
	if after.Primary() != beforePrimary {
		out = append(out, KeyringChange{Change: changePrimary, Kid: after.Primary(), From: beforePrimary})
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
	roleChanges(changePrimaryFor, beforeFor, after.PrimaryFor())
	roleChanges(changeSigningFor, beforeSigning, after.SigningFor())
	if before != nil {
		for _, kid := range before.Kids() {
			if !after.Has(kid) {
				out = append(out, KeyringChange{Change: changeKeyRemoved, Kid: kid})
			}
		}
	}
	switch {
	case after.Protected() && (before == nil || !before.Protected()):
		out = append(out, KeyringChange{Change: changeProtected})
	case !after.Protected() && before != nil && before.Protected():
		out = append(out, KeyringChange{Change: changeUnprotected})
	}
	return out
}

// describeChange is one change as a line for people.
func describeChange(c KeyringChange, rows []KeyRow) string {
	holder := func(kid, none string) string {
		if kid == "" {
			return none
		}
		return fmt.Sprintf("%q", kid)
	}
	switch c.Change {
	case changeKeyAdded:
		desc := string(c.Type)
		for _, k := range rows {
			if k.Kid == c.Kid {
				desc = describeKey(k)
			}
		}
		return fmt.Sprintf("+ key %q: %s", c.Kid, desc)
	case changeKeyRemoved:
		return fmt.Sprintf("- key %q", c.Kid)
	case changePrimary:
		return fmt.Sprintf("primary: %s → %q", holder(c.From, "(none)"), c.Kid)
	case changePrimaryFor:
		return fmt.Sprintf("sealing key of scope %q: %s → %s", c.Scope, holder(c.From, "(the primary)"), holder(c.Kid, "(the primary)"))
	case changeSigningFor:
		return fmt.Sprintf("signing key of scope %q: %s → %s", c.Scope, holder(c.From, "(none)"), holder(c.Kid, "(none)"))
	case changeProtected:
		return "the file is now password-protected"
	case changeUnprotected:
		return "the file is now a plain JWK Set: its key bytes are unencrypted on disk"
	}
	return c.Change
}

// describeKey says what a key is and can do, for one line.
func describeKey(e KeyRow) string {
	var what string
	switch {
	case e.Type == secret.TypeOct:
		what = "oct (AES-256), seals and opens"
	case e.Type == secret.TypeX25519 && e.Private:
		what = "x25519 recipient with its private half, seals and opens"
	case e.Type == secret.TypeX25519:
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

// printKeyring prints a report: what the verb did and changed, then the
// keyring as a table.
func printKeyring(opts *KeysOptions, rep KeyringReport) error {
	return opts.Printer().Print(rep, func(h *ui.Human) error {
		if line := actionLine(rep); line != "" {
			h.Printf("%s\n", line)
		}
		for _, c := range rep.Changes {
			h.Printf("  %s\n", describeChange(c, rep.Keys))
		}
		if hint := nextHint(rep); hint != "" {
			h.Printf("%s\n", h.Faint(hint))
		}
		file := "plain JWK Set"
		if rep.Protected {
			file = "password-protected"
		}
		h.Printf("keyring %s (%s), primary %q\n", rep.Keyring, file, rep.Primary)
		rows := make([][]string, len(rep.Keys))
		for i, k := range rep.Keys {
			half := "private"
			if !k.Private {
				half = "public only"
			}
			if k.Mismatch {
				half = h.Bad(half + " (MISMATCH)")
			}
			scopes, roles := "-", "-"
			if len(k.Scopes) > 0 {
				scopes = strings.Join(k.Scopes, ",")
			}
			if len(k.Roles) > 0 {
				roles = strings.Join(k.Roles, ",")
			}
			rows[i] = []string{k.Kid, string(k.Type), half, scopes, roles}
		}
		h.Table([]string{"kid", "type", "half", "scopes", "roles"}, rows)
		for _, w := range rep.Warnings {
			h.Printf("%s\n", h.Warn("warning: "+w))
		}
		return nil
	})
}

// actionLine is the first line of a verb's human output.
func actionLine(rep KeyringReport) string {
	switch rep.Action {
	case keysCreated:
		return fmt.Sprintf("created %s (mode 0600) with key %q as primary", rep.Keyring, rep.Kid)
	case keysAdded:
		return fmt.Sprintf("added key %q to %s", rep.Kid, rep.Keyring)
	case keysImported:
		return fmt.Sprintf("imported key %q into %s", rep.Kid, rep.Keyring)
	case keysPromoted:
		if rep.Scope != "" {
			return fmt.Sprintf("key %q now seals scope %q in %s", rep.Kid, rep.Scope, rep.Keyring)
		}
		return fmt.Sprintf("key %q is now primary in %s; tokens sealed with the other keys still open", rep.Kid, rep.Keyring)
	case keysAssigned:
		return fmt.Sprintf("key %q now signs scope %q in %s", rep.Kid, rep.Scope, rep.Keyring)
	case keysCleared:
		return fmt.Sprintf("cleared the role of scope %q in %s", rep.Scope, rep.Keyring)
	case keysRemoved:
		return fmt.Sprintf("removed key %q from %s", rep.Kid, rep.Keyring)
	case keysProtected:
		return fmt.Sprintf("password-protected %s in place", rep.Keyring)
	case keysUnprotected:
		return fmt.Sprintf("wrote %s plain in place", rep.Keyring)
	case keysCopied:
		return fmt.Sprintf("wrote a plain copy of %s to %s (mode 0600); the keyring itself is unchanged", rep.Keyring, rep.File)
	case keysUnchanged:
		return fmt.Sprintf("%s already is as asked; nothing changed", rep.Keyring)
	}
	return ""
}

// nextHint says what usually follows a change.
func nextHint(rep KeyringReport) string {
	switch rep.Action {
	case keysAdded, keysImported:
		if len(rep.Changes) == 1 {
			return "next: roll the file out to every reader ('flecht keys check --kid " + shellQuote(rep.Kid) + "'), then give the key a role ('flecht keys promote' or 'flecht keys signing')"
		}
		return "note: writers that load this file use the new roles at once: roll it out to every reader first"
	case keysPromoted:
		return "next: roll the file out to the writers, re-encrypt stored tokens ('flecht secrets reencrypt'), verify by a scan, then remove the old key"
	case keysAssigned:
		return "next: roll the file out; values signed by the previous key keep verifying while their key stays in readers' keyrings"
	case keysUnprotected:
		return "the file now holds its key bytes unencrypted: mind where it is copied"
	}
	return ""
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
		return nil, errors.New(secretLine(se, nil))
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

// keysKidError maps the keyring's refusals to exit codes: a kid that is
// already taken, or an edit that would break a keyring rule, is refused for
// safety (3); a kid the keyring does not hold is a failure (1); a kid or
// scope that is not a valid name, or a JWK that does not parse, is a usage
// error (2); a password too short to protect with is a usage error too.
// kids, when known, are the keyring's key ids.
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
		fmt.Fprintf(&b, " (the keyring holds %s)", textfmt.QuoteList(kids))
	}
	line := errors.New(b.String())
	switch se.Kind {
	case secret.KindKeyringConflict:
		return exitcode.RefusedError(line)
	case secret.KindKeyringInvalid, secret.KindKeyringPassword:
		return exitcode.UsageError(line)
	}
	return line
}

// errNoKeyringFile: a missing file is a usage error (exit 2), for a
// keyring as for a stage file or a config file.
func errNoKeyringFile(path string) error {
	return exitcode.UsageError(fmt.Errorf("keyring %s does not exist; create it with 'flecht keys init --keyring %s --kid KID'", path, shellQuote(path)))
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
			fmt.Fprintf(&b, "token kid %q is not in the keyring (it holds %s)", kid, textfmt.QuoteList(kids))
		} else {
			fmt.Fprintf(&b, "key %q is not in the keyring", kid)
		}
		if e.Detail != "" && strings.Contains(e.Detail, "Ed25519") {
			b.WriteString(": " + e.Detail)
		}
	case secret.KindTagMismatch:
		fmt.Fprintf(&b, "token kid %q is in the keyring, but authentication failed: this keyring's key %q has other bytes than the one that sealed the token, or the token was altered", kid, kid)
	case secret.KindScopeViolation:
		if e.Scope == "" {
			fmt.Fprintf(&b, "token kid %q is bound to scope %q and cannot be read unscoped (a scope is never dropped; pass --scope %s to read it in its scope)", kid, tokenScope, shellQuote(tokenScope))
		} else if strings.Contains(e.Detail, "exactly") {
			fmt.Fprintf(&b, "the value signed by kid %q belongs to scope %q, not to scope %q (a signed value's scope must match exactly)", kid, tokenScope, e.Scope)
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
	}
	return strings.ReplaceAll(b.String(), "\n", " ")
}
