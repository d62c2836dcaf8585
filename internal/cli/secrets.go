package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/flecht-dev/flecht/internal/boundedread"
	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/secret"
	"github.com/flecht-dev/flecht/internal/textfmt"
	"github.com/flecht-dev/flecht/internal/ui"
)

const secretsLong = `Work on single secret values as a stage's ENCRYPTED and SIGNED fields
store them, interchangeable with Flechtwerk 0.17 and flechtctl 0.17:

  encrypt   seal a JSON value under its scope's sealing key: a token
            "flenc:jwe:" + a compact JWE, dir + A256GCM for an oct key,
            ECDH-ES+A256KW + A256GCM for an x25519 recipient
  decrypt   open a token of either generation (kid, alg, scope reported)
  reseal    open a token and seal it again under its scope's sealing key
            (one token; 'secrets reencrypt' sweeps whole topics)
  sign      sign a JSON value with its scope's signing key: "flsig:jws:" +
            a compact JWS, alg Ed25519, stamped with the scope
  verify    check a signed value and print it with its signer
  inspect   show the UNAUTHENTICATED header of a flenc: or flsig: token,
            without a keyring
  scan      report every secret value stored in config topics
  reencrypt the rotation sweep of config topics

The payload is the canonical JSON of the value (sorted keys, no spaces);
the header carries "flenc_scope" when a scope is given. A field of scope S
opens tokens of scope S and unscoped ones, an unscoped field only unscoped
ones; a signed value verifies only in exactly its scope. The kind of the key
a token's kid names decides which header is accepted, never the header.

A failure exits with 4 and one line naming its kind, which runbooks can
match on: malformed, header_rejected, unknown_kid, tag_mismatch,
scope_violation, plaintext, no_keyring, keyring_invalid, keyring_password,
key_binding, seal_only, bad_signature, unknown_signer, unsigned,
no_signing_key. With -o json the failure is printed on standard output
instead:
  {"error": {"kind": "unknown_kid", "kid": "k9", "message": "…"}}
An input that is no value to work on (a JSON_VALUE that is not JSON,
standard input over 16 MiB, a --scope that is not UTF-8) is a usage error: exit 2, kind invalid_value,
in the same two forms. No message quotes the input.

A keyring file that is missing or cannot be read as a file is no_keyring.
The keyring file comes from --keyring or ` + EnvKeyring + ` (see 'flecht keys'); a
password-protected one opens with --password-file or ` + EnvKeyringPasswordFile + `.
No output and no error message ever holds key bytes, a password, or (but for
the value decrypt and verify are asked for) a plaintext.`

// SecretsOptions are the inputs of `flecht secrets encrypt|decrypt`.
type SecretsOptions struct {
	IO            *ui.IOStreams
	Printer       func() *ui.Printer
	Keyring       string // the keyring file: --keyring, else FLECHT_KEYRING
	PasswordFile  string // a protected keyring's password: --password-file, else FLECHT_KEYRING_PASSWORD_FILE
	Scope         string // the field's scope ("" for an unscoped field)
	ReadPlaintext bool   // decrypt: accept a non-token value as legacy plaintext
	// String: encrypt, sign take the input as a raw string, not as JSON;
	// decrypt, verify print a string value raw (flechtctl's --string).
	String bool
	Input  string // the JSON value or token; "-" reads standard input
}

// SecretErrorReport is the machine form of a failed encrypt or decrypt
// (-o json/yaml), printed on standard output.
type SecretErrorReport struct {
	Error secret.ErrorInfo `json:"error"`
}

// kindInvalidValue: the input is no value to work on (not JSON, too
// large). A usage error (exit 2), reported in the form of a secret failure
// so that -o json callers get an error object either way.
const kindInvalidValue secret.Kind = "invalid_value"

// maxSecretInput bounds what is read from standard input: a secret lives in
// one Kafka record, far below this.
const maxSecretInput = 16 << 20

// NewCmdSecrets builds `flecht secrets` and its subcommands.
func NewCmdSecrets(f *Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "secrets <command>",
		Short: "Encrypt, decrypt, sign, verify, inspect, scan and re-encrypt secret values",
		Long:  secretsLong,
		Args:  unknownSubcommand,
		RunE:  helpOrUnknown,
	}
	cmd.AddCommand(newCmdSecretsEncrypt(f, nil), newCmdSecretsDecrypt(f, nil), newCmdSecretsReseal(f, nil),
		newCmdSecretsSign(f, nil), newCmdSecretsVerify(f, nil), newCmdSecretsInspect(f, nil),
		NewCmdSecretsScan(f, nil), NewCmdSecretsReencrypt(f, nil))
	return cmd
}

func secretsCommand(f *Factory, cmd *cobra.Command, runF, run func(*SecretsOptions) error) (*cobra.Command, *SecretsOptions) {
	opts := &SecretsOptions{IO: f.IO, Printer: f.Printer}
	cmd.Args = oneValueOrStdin
	cmd.RunE = func(_ *cobra.Command, args []string) error {
		opts.Keyring = keyringPath(opts.Keyring, f.Getenv)
		opts.PasswordFile = passwordFilePath(opts.PasswordFile, f.Getenv)
		opts.Input = args[0]
		if !utf8.ValidString(opts.Scope) {
			// No token or keyring can name it (JSON is UTF-8): a typo of
			// the command line, not a finding.
			return invalidValue(opts, "--scope is not UTF-8 text, so no token or key can carry it")
		}
		if runF != nil {
			return runF(opts)
		}
		return run(opts)
	}
	addKeyringFlag(cmd, &opts.Keyring)
	addPasswordFileFlag(cmd, &opts.PasswordFile)
	cmd.Flags().StringVar(&opts.Scope, "scope", "", "the field's scope (flenc_scope); empty for an unscoped field")
	return cmd, opts
}

// oneValueOrStdin takes exactly one value, or "-" for standard input: the
// way that keeps a secret out of the shell history, which an error for a
// missing value names.
func oneValueOrStdin(cmd *cobra.Command, args []string) error {
	switch {
	case len(args) == 0:
		what := "value"
		if f := strings.Fields(cmd.Use); len(f) >= 3 && f[len(f)-1] == "-" {
			what = f[len(f)-3] // the VALUE of "... VALUE | -"
		}
		return exitcode.Usagef("give the %s, or - to read it from standard input (which keeps a secret out of the shell history): printf '%%s' … | %s -", what, cmd.CommandPath())
	case len(args) > 1:
		return exitcode.Usagef("give one value, got %d (a value that starts with - follows --)", len(args))
	}
	return nil
}

func newCmdSecretsEncrypt(f *Factory, runF func(*SecretsOptions) error) *cobra.Command {
	cmd, opts := secretsCommand(f, &cobra.Command{
		Use:   "encrypt --keyring FILE [--scope S] [--string] JSON_VALUE | -",
		Short: "Encrypt a JSON value into a flenc:jwe: token with the scope's sealing key",
		Long: `Encrypt JSON_VALUE with the keyring's sealing key for --scope (its
flenc_primaries entry, else the primary) and print the token: dir + A256GCM
for an oct key, ECDH-ES+A256KW + A256GCM for an X25519 recipient (whose
public half is enough: a writer's keyring may hold only that). A bound
sealing key refuses a scope outside its binding (key_binding).

JSON_VALUE is the field's value as JSON, so a string needs its quotes:
'"sk-live-123"', or --string to take it as a raw string. It is sealed in the
canonical form a stage writes (sorted keys, no spaces; numbers keep their
text). With "-" it is read from standard input, which keeps the secret out
of the shell history and the process list (--string drops one trailing
newline there).

--scope binds the token to a field's scope: a field of another scope, or an
unscoped field, refuses it. Every run draws a fresh random nonce, so the
same value gives a different token each time. -o json adds the sealing kid
and alg.`,
		Example: `  flecht secrets encrypt --keyring keyring.json --scope api_key '"sk-live-123"'
  printf '%s' '{"user":"svc","password":"…"}' | flecht secrets encrypt --scope db -
  printf '%s' 'sk-live-123' | flecht secrets encrypt --scope api_key --string -
  flecht secrets encrypt -o json -- -42     # a value that starts with "-" follows "--"`,
	}, runF, runSecretsEncrypt)
	cmd.Flags().BoolVar(&opts.String, "string", false, "take the value as a raw string, not as JSON")
	return cmd
}

func newCmdSecretsDecrypt(f *Factory, runF func(*SecretsOptions) error) *cobra.Command {
	cmd, opts := secretsCommand(f, &cobra.Command{
		Use:   "decrypt --keyring FILE [--scope S] [--read-plaintext] [--string] TOKEN | -",
		Short: "Decrypt a flenc:jwe: token of either generation and print its JSON value",
		Long: `Decrypt TOKEN as a field of scope --scope reads it and print the JSON
value it holds (--string: a string value raw, without quotes). TOKEN may be
given bare or as it appears in a record's JSON (in double quotes); with "-"
it is read from standard input. Surrounding whitespace is ignored.

The rules are a stage's: the key is the one the token's kid names, and the
KIND of that key decides which header is accepted (dir + A256GCM for an oct
key, ECDH-ES+A256KW + A256GCM for an x25519 key holding its private half),
checked before any decryption; a field of scope S opens tokens of scope S
and unscoped tokens, an unscoped field only unscoped tokens; a bound key
opens only tokens of its scopes. A value that is not a flenc: token is
refused as plaintext unless --read-plaintext is given: then it is printed
with a warning, as a field in migration reads it (JSON when it parses as
JSON, else a string). A flenc: value with another envelope is never
plaintext.

Standard error gets one line saying which kid opened it, the generation
and the scope; -o json has them as kid, alg, key_type and scope. A value
that is itself a signed value (an ENCRYPTED(SIGNED(…)) field) is flagged:
pipe it on with --string to 'flecht secrets verify --scope S -'.

On failure the exit code is 4 and the line names the kind; with -o json the
error object is printed on standard output.`,
		Example: `  flecht secrets decrypt --keyring keyring.json --scope api_key flenc:jwe:eyJhbGciOi…
  flecht topic consume configs --max 1 | jq -r .value.api_key | flecht secrets decrypt --scope api_key -
  flecht secrets decrypt --scope api --string "$TOKEN" | flecht secrets verify --scope api -
  flecht secrets decrypt -o json "$TOKEN" | jq .error.kind`,
	}, runF, runSecretsDecrypt)
	cmd.Flags().BoolVar(&opts.ReadPlaintext, "read-plaintext", false, "accept a value that is not a token as legacy plaintext, with a warning")
	cmd.Flags().BoolVar(&opts.String, "string", false, "print a string value raw, without JSON quotes")
	return cmd
}

func runSecretsEncrypt(opts *SecretsOptions) error {
	payload, value, err := valueInput(opts)
	if err != nil {
		return err
	}
	if s, ok := value.(string); ok && secret.IsEncrypted(s) {
		fmt.Fprintln(opts.IO.ErrOut, "warning: the value is already a flenc: token; it is encrypted again, not re-encrypted ('flecht secrets reseal' changes its key)")
	}
	kr, err := secretsKeyring(opts)
	if err != nil {
		return err
	}
	res, err := secret.EncryptToken(kr, payload, opts.Scope)
	if err != nil {
		return secretFailure(opts, err, kr)
	}
	return printToken(opts, res, res.Token)
}

// valueInput is the value encrypt and sign work on: the input parsed as
// JSON, or with --string taken as a string (from standard input, one
// trailing newline dropped), and its canonical JSON payload.
func valueInput(opts *SecretsOptions) (payload []byte, value any, err error) {
	input, err := secretInput(opts)
	if err != nil {
		return nil, nil, err
	}
	payload, value, problem := secret.ParseValueInput(input, opts.String, opts.Input == "-")
	if problem != "" {
		return nil, nil, invalidValue(opts, problem)
	}
	return payload, value, nil
}

// tokenInput is the token decrypt, verify, reseal and inspect work on: the
// input bare, or as it stands in a record's JSON (a string in quotes);
// plain is the input as a value, for a legacy plaintext read.
func tokenInput(opts *SecretsOptions) (token string, plain any, err error) {
	input, err := secretInput(opts)
	if err != nil {
		return "", nil, err
	}
	token, plain = secret.ParseTokenInput(input)
	return token, plain, nil
}

func runSecretsDecrypt(opts *SecretsOptions) error {
	token, plain, err := tokenInput(opts)
	if err != nil {
		return err
	}
	kr, err := secretsKeyring(opts)
	if err != nil {
		return err
	}
	res, err := secret.DecryptValue(kr, token, plain, opts.Scope, opts.ReadPlaintext)
	if err != nil {
		return secretFailure(opts, err, kr)
	}
	if res.Plaintext {
		fmt.Fprintln(opts.IO.ErrOut, "warning: value read as legacy plaintext: it is not a flenc: token; encrypt it and write it back")
	}
	return printSecretValue(opts, res, res.Value, func(w io.Writer) {
		if res.Plaintext {
			return
		}
		scope := "unscoped"
		if res.Scope != "" {
			scope = fmt.Sprintf("scope %q", secret.Clip(res.Scope))
		}
		fmt.Fprintf(w, "opened: kid %q (%s, %s + A256GCM), %s\n", secret.Clip(res.Kid), res.KeyType, res.Alg, scope)
		if res.Signed {
			fmt.Fprintf(w, "note: the value is a signed value (flsig:jws:); check it with 'flecht secrets decrypt --string … | flecht secrets verify --scope %s -'\n", textfmt.ShellQuote(res.Scope))
		}
	})
}

// printToken prints what encrypt, sign or reseal made: res as JSON or
// YAML, or the token alone on a line, for a pipe or a variable.
func printToken(opts *SecretsOptions, res any, token string) error {
	return opts.Printer().Print(res, func(h *ui.Human) error {
		h.Printf("%s\n", token)
		return nil
	})
}

// printSecretValue prints what decrypt or verify opened: res as JSON or
// YAML, or value on standard output (--string: a string raw) and note's
// line on standard error.
func printSecretValue(opts *SecretsOptions, res any, value json.RawMessage, note func(io.Writer)) error {
	p := opts.Printer()
	if p.Format != ui.FormatTable {
		return p.Print(res, nil)
	}
	out := []byte(value)
	if opts.String {
		var s string
		if json.Unmarshal(value, &s) != nil {
			return invalidValue(opts, "the value is not a JSON string, so --string cannot print it raw; drop --string")
		}
		out = []byte(s)
	}
	note(opts.IO.ErrOut)
	if opts.IO.IsStdoutTTY() {
		// A value shown on a terminal cannot drive it (a pipe gets it raw).
		out = []byte(textfmt.Text(string(out)))
	}
	_, err := fmt.Fprintf(opts.IO.Out, "%s\n", out)
	return err
}

// secretInput is the positional argument, or standard input for "-".
func secretInput(opts *SecretsOptions) ([]byte, error) {
	if opts.Input != "-" {
		return []byte(opts.Input), nil
	}
	b, err := io.ReadAll(io.LimitReader(opts.IO.In, maxSecretInput+1))
	if err != nil {
		return nil, fmt.Errorf("reading standard input: %w", err)
	}
	if len(b) > maxSecretInput {
		return nil, invalidValue(opts, fmt.Sprintf("standard input holds more than %d bytes", maxSecretInput))
	}
	return b, nil
}

// secretsKeyring loads the keyring for the value verbs, a failure already
// reported as theirs are (secretFailure). A missing path or file, or one
// that cannot be read as a file (a directory, a symlink loop, a path
// through a file, no permission), is no_keyring: the contract's exit 4 and
// error object, never a plain I/O error.
func secretsKeyring(opts *SecretsOptions) (*secret.Keyring, error) {
	if opts.Keyring == "" {
		return nil, secretFailure(opts, &secret.Error{Kind: secret.KindNoKeyring, Scope: opts.Scope,
			Detail: "no keyring file: give --keyring FILE or set " + EnvKeyring}, nil)
	}
	kr, err := loadKeyringFile(opts.IO.ErrOut, opts.Keyring, keyringPassword(opts.PasswordFile, opts.IO))
	var se *secret.Error
	var be *boundedread.Error
	var pe *fs.PathError
	switch {
	case err == nil || errors.As(err, &se):
	case errors.As(err, &be): // names the file and what is wrong with it
		err = &secret.Error{Kind: secret.KindNoKeyring, Scope: opts.Scope, Detail: be.Error()}
	case errors.Is(err, fs.ErrNotExist):
		err = &secret.Error{Kind: secret.KindNoKeyring, Scope: opts.Scope,
			Detail: "keyring file " + opts.Keyring + " does not exist"}
	case errors.As(err, &pe):
		err = &secret.Error{Kind: secret.KindNoKeyring, Scope: opts.Scope,
			Detail: fmt.Sprintf("keyring file %s cannot be read: %v", opts.Keyring, pe.Err)}
	}
	if err != nil {
		return nil, secretFailure(opts, err, nil)
	}
	return kr, nil
}

// secretFailure reports a failed value verb: a *secret.Error exits
// with 4, as one line on standard error ("error: <kind>: …"), or with -o
// json/yaml as an error object on standard output. Any other error (an I/O
// failure) is returned as it is.
func secretFailure(opts *SecretsOptions, err error, kr *secret.Keyring) error {
	var se *secret.Error
	if !errors.As(err, &se) {
		return err
	}
	var kids []string
	if kr != nil {
		kids = kr.Kids()
	}
	info := secret.ErrorInfo{Kind: se.Kind, Kid: se.Kid, Scope: se.Scope, TokenScope: se.TokenScope,
		Message: strings.TrimPrefix(secret.ErrorLine(se, kids), string(se.Kind)+": ")}
	return printFailure(opts, info, exitcode.KindFindings)
}

// invalidValue reports an input that is no value to work on: a usage
// error, in the forms of a secret failure. msg must not quote the input.
func invalidValue(opts *SecretsOptions, msg string) error {
	return printFailure(opts, secret.ErrorInfo{Kind: kindInvalidValue, Scope: opts.Scope, Message: msg}, exitcode.KindUsage)
}

// printFailure reports a failure as one line "<kind>: <message>" on
// standard error, or with -o json/yaml as an error object on standard
// output; either way the exit code is kind's.
func printFailure(opts *SecretsOptions, info secret.ErrorInfo, kind exitcode.Kind) error {
	p := opts.Printer()
	if p.Format == ui.FormatTable {
		return exitcode.Wrap(kind, errors.New(string(info.Kind)+": "+info.Message))
	}
	if err := p.Print(SecretErrorReport{Error: info}, func(*ui.Human) error { return nil }); err != nil {
		return err
	}
	return &exitcode.Silent{Code: kind.Code()}
}
