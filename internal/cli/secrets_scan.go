package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/spf13/cobra"

	"github.com/flecht-dev/flecht/internal/reencrypt"
	"github.com/flecht-dev/flecht/internal/secret"
	"github.com/flecht-dev/flecht/internal/show"
	"github.com/flecht-dev/flecht/internal/ui"
)

// secretTargets are the topics and secret fields a scan or sweep covers:
// --topics and --field, or the config_topics and secret_fields of -f
// stage.yaml (flags win).
type secretTargets struct {
	Topics    []string
	Fields    []string
	StageFile string
}

func (s *secretTargets) addFlags(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringSliceVar(&s.Topics, "topics", nil, "config topics to read, comma-separated")
	fl.StringArrayVar(&s.Fields, "field", nil, "a secret field, NAME[:scope[:mode]] (repeatable): NAME a dotted path, NAME[] a list; mode encrypted (default), signed or encrypted-signed")
	fl.StringVarP(&s.StageFile, "file", "f", "", "take the config topics and secret fields from this stage file")
	_ = cmd.MarkFlagFilename("file", "yaml", "yml")
}

// given reports whether any target flag was set.
func (s *secretTargets) given() bool {
	return len(s.Topics) > 0 || len(s.Fields) > 0 || s.StageFile != ""
}

// resolve is the topics and fields the flags or the stage file name.
func (s *secretTargets) resolve() ([]string, []reencrypt.Field, error) {
	return reencrypt.ResolveTargets(s.Topics, s.Fields, s.StageFile)
}

// loadOptionalKeyring loads the keyring when a path is given (flag or
// environment); "" gives nil.
func loadOptionalKeyring(io *ui.IOStreams, path, passwordFile string) (*secret.Keyring, error) {
	if path == "" {
		return nil, nil
	}
	kr, err := loadKeyringFile(io.ErrOut, path, keyringPassword(passwordFile, io))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("keyring %s does not exist", path)
	}
	var se *secret.Error
	if errors.As(err, &se) {
		return nil, secretLine(se, err)
	}
	return kr, err
}

// SecretsScanOptions are the inputs of `flecht secrets scan`.
type SecretsScanOptions struct {
	IO           *ui.IOStreams
	Printer      func() *ui.Printer
	Targets      secretTargets
	Keyring      string // optional: --keyring, else FLECHT_KEYRING
	PasswordFile string // a protected keyring's password: --password-file, else FLECHT_KEYRING_PASSWORD_FILE
	FindingsOnly bool
	// Scan reads the topics (a Kafka client from the factory).
	Scan func(ctx context.Context, o reencrypt.ScanOptions) (*reencrypt.ScanReport, error)
}

const secretsScanLong = `Report every secret value stored in config topics, so that a migration or
a key rotation can be checked before anything is removed.

The topics are read (read_committed) to the end offsets captured at the
start, keeping the latest record per partition and key: the compacted view
every reader builds, so a record placed off its key's hash partition counts
where it is. The secret fields are --field NAME[:scope[:mode]] (repeatable;
NAME a dotted path, NAME[] a list of values) or -f stage.yaml with
secret_fields, in the same syntax. The mode says which upstream codec reads
the field:

  encrypted          ENCRYPTED(inner, scope=S): a flenc:jwe: token (the default)
  signed             SIGNED(inner, scope=S): a flsig:jws: signed value, in the clear
  encrypted-signed   ENCRYPTED(SIGNED(inner, scope=S), scope=S): a token whose
                     payload is a signed value, upstream's recommended form

A signed mode needs its scope (api_key:billing:signed). A scope that ends in
a mode word is written with its mode (k:a:signed:encrypted is scope a:signed).

Every value is listed with its topic, partition, offset, key and status:

  encrypted   a flenc:jwe: token of either generation (alg dir to an oct kid,
              ECDH-ES+A256KW to an X25519 kid); kid and scope from its header
  signed      a flsig:jws: signed value; its kid is the Ed25519 signer
  plaintext   neither: a legacy value, a pasted secret, an unsigned value
  corrupt     a flenc: or flsig: value that does not parse, a record that is
              not a JSON object, or a field path through a duplicated key

and, when something is wrong with it for its field, a problem: plaintext (in
the clear where the field encrypts: a signed value in the clear counts, its
payload is readable and an ENCRYPTED reader refuses it; its status stays
signed), unsigned (not signed where the field signs: a token in a signed
field counts), or the kind that kept it from opening or verifying.

Absent and null values are skipped: absence is not a leak. Keyring or not,
every token's header is held against its field's scope ratchet and every
signature's stamped scope against its field's scope (a signature's must
match exactly): a mismatch is a scope_violation. With a keyring (--keyring or
` + EnvKeyring + `) every token is also opened through its field's scope (decrypt:
ok, unknown_kid, seal_only, tag_mismatch, scope_violation, key_binding) and
every signature verified (verify: verified, bad_signature, unknown_signer,
scope_violation, key_binding), the one inside a token too: in an
encrypted-signed field (unsigned when it opens to a value that is not
signed), and in an encrypted field, where it is no finding either way (its
reader takes the string as it is) but its signer is named, since a key is
needed by every signature it made. The
report then names each scope's target: the kid that seals its values
(flenc_primaries[scope], else primary) and the one that signs them
(flenc_signing[scope]); a token under another kid is stale (the sweep moves
it, 'flecht secrets reencrypt'), a signature by another signer is by an old
signer. Summaries count the values per kid and status, and the signatures per
signer and verdict.

A plaintext value is never printed: it shows as a length range (powers of
two) and a fingerprint, the first 12 hex digits of an HMAC-SHA-256 of its
JSON text. An unkeyed hash would let anyone with the report confirm a
guessed PIN or password, so the HMAC key is derived from the keyring's
primary key (HKDF, a fixed label) when a keyring is given: the same value
then has the same fingerprint in every run with that keyring, to follow it
across runs, until the primary changes. Without a keyring the key is random
per run, and fingerprints compare within one report only ("fingerprints":
"run" in -o json).

A missing topic is an error, never a clean report. Exit 0 when clean, 4
when any value has a problem (plaintext, unsigned, corrupt, in the wrong
scope, or with a keyring a token that does not open or a signature that
does not verify: a value the scan could not judge is never clean), so CI can
gate on it. Stale tokens and old signers are counted, not findings.

With -o json:
  {"topics", "fields", "fingerprints", "primary", "kids", "clean",
   "targets": [{"scope", "sealing_kid", "signing_kid", "error"}],
   "partitions": [{"topic", "partition", "end_offset", "records"}],
   "summary": {"records", "values", "by_status", "by_kid": [{"kid", "status",
     "count"}], "by_signer": [{"kid", "verify", "count"}], "by_decrypt",
     "by_verify", "by_problem", "plaintext", "unsigned", "corrupt",
     "undecryptable", "unverified", "stale", "old_signer", "findings"},
   "entries": [{"topic", "partition", "offset", "key", "field", "field_scope",
     "field_mode", "status", "kid", "scope", "alg", "decrypt", "verify",
     "signer", "target_kid", "target_signer", "problem",
     "error": {"kind", "message"}, "plaintext": {"length_range", "fingerprint"}}]}`

// NewCmdSecretsScan builds `flecht secrets scan`.
func NewCmdSecretsScan(f *Factory, runF func(*SecretsScanOptions) error) *cobra.Command {
	opts := &SecretsScanOptions{IO: f.IO, Printer: f.Printer}
	opts.Scan = f.ScanTopics
	cmd := &cobra.Command{
		Use:   "scan (--topics T,... --field NAME[:scope[:mode]]... | -f stage.yaml) [--keyring FILE]",
		Short: "Report every secret value in config topics: encrypted or signed (by kid), plaintext, corrupt",
		Long:  secretsScanLong,
		Example: `  flecht secrets scan --topics configs --field api_key:api_key --field 'auth.tokens[]'
  flecht secrets scan --topics configs --field endpoint:billing:signed --field webhook:billing:encrypted-signed --keyring keyring.json
  flecht secrets scan -f extractor.yaml --keyring keyring.json --findings-only
  flecht secrets scan -f extractor.yaml -o json | jq '.summary.by_kid'`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.Keyring = keyringPath(opts.Keyring, f.Getenv)
			opts.PasswordFile = passwordFilePath(opts.PasswordFile, f.Getenv)
			if runF != nil {
				return runF(opts)
			}
			return runSecretsScan(cmd.Context(), opts)
		},
	}
	opts.Targets.addFlags(cmd)
	addKeyringFlag(cmd, &opts.Keyring)
	addPasswordFileFlag(cmd, &opts.PasswordFile)
	cmd.Flags().BoolVar(&opts.FindingsOnly, "findings-only", false, "list only values with a problem: plaintext, unsigned, corrupt, or not opening or verifying (the summary still counts all)")
	return cmd
}

func runSecretsScan(ctx context.Context, opts *SecretsScanOptions) error {
	topics, fields, err := opts.Targets.resolve()
	if err != nil {
		return err
	}
	kr, err := loadOptionalKeyring(opts.IO, opts.Keyring, opts.PasswordFile)
	if err != nil {
		return err
	}
	rep, err := scanWithProgress(ctx, opts.IO, opts.Scan, reencrypt.ScanOptions{Topics: topics, Fields: fields, Keyring: kr})
	if err != nil {
		return err
	}
	if opts.FindingsOnly {
		kept := rep.Entries[:0:0]
		for _, e := range rep.Entries {
			if e.Finding() {
				kept = append(kept, e)
			}
		}
		rep.Entries = kept
	}
	return printCheck(opts.Printer(), rep, func(h *ui.Human) error { return show.Scan(h, rep) }, !rep.Clean)
}

// scanWithProgress runs a scan behind a progress bar (drawn on a terminal
// only).
func scanWithProgress(ctx context.Context, io *ui.IOStreams, scan func(context.Context, reencrypt.ScanOptions) (*reencrypt.ScanReport, error), o reencrypt.ScanOptions) (*reencrypt.ScanReport, error) {
	p := ui.NewProgress(io, "scanning "+strings.Join(o.Topics, ", "))
	o.Planned, o.Read = p.SetTotal, p.Add
	rep, err := scan(ctx, o)
	p.Done()
	return rep, err
}
