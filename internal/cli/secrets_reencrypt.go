package cli

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/acl"
	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/reencrypt"
	"github.com/flecht-dev/flecht/internal/show"
	"github.com/flecht-dev/flecht/internal/ui"
)

// SecretsReencryptOptions are the inputs of `flecht secrets reencrypt`.
type SecretsReencryptOptions struct {
	IO               *ui.IOStreams
	Printer          func() *ui.Printer
	Logger           func() *slog.Logger
	Targets          secretTargets
	Keyring          string // --keyring, else FLECHT_KEYRING
	PasswordFile     string // a protected keyring's password: --password-file, else FLECHT_KEYRING_PASSWORD_FILE
	Execute          bool
	EncryptPlaintext bool
	Resign           bool
	BatchSize        int
	MaxRounds        int
	SettleTimeout    time.Duration
	TransactionalID  string

	// Plan and Sweep run the engine against the cluster.
	Plan  func(ctx context.Context, o reencrypt.Options) (*reencrypt.Result, error)
	Sweep func(ctx context.Context, o reencrypt.Options) (*reencrypt.Result, error)
}

const secretsReencryptLong = `Re-encrypt the secret values stored in config topics under their scope's
sealing key: step 3 of a key rotation (see 'flecht keys rotate-plan').

The target of each value is the sealing key of its field's scope:
flenc_primaries[scope], else the primary (both token generations: an oct key
seals dir tokens, an X25519 key ECDH-ES ones), so a per-scope key is never
undone. The secret fields are --field NAME[:scope[:mode]] or a stage file's
secret_fields, the mode encrypted (default), signed or encrypted-signed (see
'flecht secrets scan --help').

Without --execute it prints the plan and writes nothing: per partition, the
records holding a token not under its scope's sealing kid, unscoped tokens
of a scoped field (the scope upgrade: a scope can be added to a live field,
never removed), values in the clear, unsigned values, signatures by an old
signer, and values it cannot touch (a token whose kid the keyring lacks or
holds only the public half of, one that fails authentication, a scope or
binding violation, a signature that does not verify, a corrupt value, a
scope no key of the keyring may seal).

What each mode allows:
  encrypted          tokens are re-sealed with their payload (a signed value
                     inside byte for byte, or signed again with --resign;
                     its reader does not verify it, so a signature there
                     that fails never holds the token up); values in the
                     clear are sealed with --encrypt-plaintext
  signed             values are never wrapped in a token (a SIGNED reader
                     refuses one); an unsigned value is left and reported
  encrypted-signed   tokens are re-sealed with their payload, the signed
                     value inside byte for byte; a signed value in the clear
                     is sealed with --encrypt-plaintext when its signature
                     verifies; an unsigned plaintext is left and reported
The sweep never signs an unsigned value: a signature vouches for who wrote
a value, and the sweep did not write it; have its writer sign it ('flecht
secrets sign'). With --resign it signs again, with the scope's signing key
(flenc_signing), every signature that VERIFIES under another signer, bare
or inside a token of any encrypted field: the step that retires an old
Ed25519 key; the value it vouched for is kept byte for byte.

With --execute it re-produces each such record
  - with the same key bytes, headers and timestamp, explicitly to the
    partition it was read from (never by key hash: a copy on another
    partition would survive and come back after the old key is gone); a
    topic with message.timestamp.type=LogAppendTime restamps it anyway;
  - with every other byte of the value unchanged (member order, whitespace,
    number spellings): only the secret values change;
  - in transactions of --batch-size records, under the transactional ID
    flecht-reencrypt-<hash of the topics>.
Before each commit it compares the end offsets of the partitions it wrote
with what it read and wrote itself. If another writer appended meanwhile,
the transaction is aborted (never visible) and those partitions are re-read
from where they were read before and re-swept: another writer's newer value
always wins, and is only rewritten if it still holds a token to rotate. A
partition re-read --max-rounds times in a row without progress stops the
sweep with exit 1 naming it. At the end a scan verifies, scope by scope,
that every token is under its scope's sealing kid and opens, every signature
verifies and nothing is corrupt (with --resign, also that every signature is
by its scope's signing kid): exit 4 otherwise. A token the keyring cannot
judge (unknown kid, seal-only, corrupt) is never verified clean.

A sweep that is killed can be run again: the transactional ID fences the old
process and aborts its open transaction, and records already swept are not
touched again.

Values in the clear are left alone unless --encrypt-plaintext is given (the
last step of a migration from plaintext); every value that rested in
plaintext must be treated as disclosed and rotated at its source.

A progress bar is drawn on a terminal. -o json prints the counts per
partition and the verification:
  {"mode": "plan"|"execute", "topics", "fields", "primary",
   "targets": [{"scope", "sealing_kid", "signing_kid", "error"}],
   "encrypt_plaintext", "resign", "transactional_id",
   "partitions": [{"topic", "partition", "end_offset", "records", "rewrite",
     "non_primary", "scope_upgrade", "plaintext", "unsigned", "old_signer",
     "blocked", "values": {"rotate", "scope_upgrade", "encrypt_plaintext",
     "resign", "plaintext_left", "unsigned_left", "old_signer_left",
     "blocked", "unchanged"}, "written", "rereads", "foreign_records",
     "resweep", "restored"}],
   "totals": {...}, "blocked": [{"topic", "partition", "offset", "key",
   "field", "error"}], "transactions", "aborted_transactions",
   "verification": {"clean", "primary", "targets", "non_primary_tokens"
     (tokens not under their scope's sealing kid), "plaintext", "unsigned",
     "corrupt", "undecryptable", "unverified", "old_signer", "by_kid",
     "by_signer"}, "reminder"}`

// NewCmdSecretsReencrypt builds `flecht secrets reencrypt`.
func NewCmdSecretsReencrypt(f *Factory, runF func(*SecretsReencryptOptions) error) *cobra.Command {
	opts := &SecretsReencryptOptions{IO: f.IO, Printer: f.Printer, Logger: f.Logger}
	opts.Plan = func(ctx context.Context, o reencrypt.Options) (*reencrypt.Result, error) {
		cl, _, err := f.Kafka(ctx)
		if err != nil {
			return nil, err
		}
		defer cl.Close()
		return reencrypt.Plan(ctx, cl, o)
	}
	opts.Sweep = func(ctx context.Context, o reencrypt.Options) (*reencrypt.Result, error) {
		cl, c, err := f.Kafka(ctx)
		if err != nil {
			return nil, err
		}
		defer cl.Close()
		if err := acl.RequireSweep(ctx, cl, o.Topics, cmp.Or(o.TransactionalID, reencrypt.TransactionalID(o.Topics))); err != nil {
			return nil, err
		}
		prod, err := c.Client(reencrypt.ProducerOpts(o.TransactionalID)...)
		if err != nil {
			return nil, err
		}
		defer prod.Close()
		o.NewProducer = func(txnID string) (*kgo.Client, error) { return c.Client(reencrypt.ProducerOpts(txnID)...) }
		return reencrypt.Execute(ctx, cl, prod, o)
	}
	cmd := &cobra.Command{
		Use:   "reencrypt (--topics T,... --field NAME[:scope[:mode]]... | -f stage.yaml) --keyring FILE [--execute]",
		Short: "Re-encrypt stored secret tokens under their scope's sealing key (dry run unless --execute)",
		Long:  secretsReencryptLong,
		Example: `  flecht secrets reencrypt --topics configs --field api_key:api_key --keyring keyring.json
  flecht secrets reencrypt -f extractor.yaml --keyring keyring.json --execute
  flecht secrets reencrypt --topics configs --field webhook:billing:encrypted-signed --resign --execute
  flecht secrets reencrypt -f extractor.yaml --encrypt-plaintext --execute -o json | jq .verification`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.Keyring = keyringPath(opts.Keyring, f.Getenv)
			opts.PasswordFile = passwordFilePath(opts.PasswordFile, f.Getenv)
			if runF != nil {
				return runF(opts)
			}
			return runSecretsReencrypt(cmd.Context(), opts)
		},
	}
	opts.Targets.addFlags(cmd)
	addKeyringFlag(cmd, &opts.Keyring)
	addPasswordFileFlag(cmd, &opts.PasswordFile)
	fl := cmd.Flags()
	fl.BoolVar(&opts.Execute, "execute", false, "write: re-produce the records (without it, only the plan is printed)")
	fl.BoolVar(&opts.EncryptPlaintext, "encrypt-plaintext", false, "also encrypt values in the clear where their field encrypts (migration); rotate them at their source afterwards")
	fl.BoolVar(&opts.Resign, "resign", false, "also sign again, with the scope's signing key, every signature that verifies under another signer (never an unsigned value)")
	fl.IntVar(&opts.BatchSize, "batch-size", reencrypt.DefaultBatchSize, "records per transaction")
	fl.IntVar(&opts.MaxRounds, "max-rounds", reencrypt.DefaultMaxRounds, "re-reads in a row of a partition other writers keep appending to (and final passes) before giving up")
	fl.DurationVar(&opts.SettleTimeout, "settle-timeout", reencrypt.DefaultSettleTimeout, "how long to wait for another producer's open transaction to end")
	fl.StringVar(&opts.TransactionalID, "transactional-id", "", "transactional ID of the sweep (default flecht-reencrypt-<hash of the topics>; sweeps fence each other only under one ID)")
	return cmd
}

func runSecretsReencrypt(ctx context.Context, opts *SecretsReencryptOptions) error {
	topics, fields, err := opts.Targets.resolve()
	if err != nil {
		return err
	}
	if opts.Keyring == "" {
		return exitcode.UsageError(errNoKeyringPath)
	}
	if opts.BatchSize < 1 || opts.MaxRounds < 1 || opts.SettleTimeout <= 0 {
		return exitcode.UsageError(errors.New("--batch-size, --max-rounds and --settle-timeout must be positive"))
	}
	kr, err := loadOptionalKeyring(opts.IO, opts.Keyring, opts.PasswordFile)
	if err != nil {
		return err
	}
	txnID := opts.TransactionalID
	if txnID == "" {
		txnID = reencrypt.TransactionalID(topics)
	}
	prog := ui.NewPhasedProgress(opts.IO)
	o := reencrypt.Options{
		Topics: topics, Fields: fields, Keyring: kr, EncryptPlaintext: opts.EncryptPlaintext, Resign: opts.Resign,
		BatchSize: opts.BatchSize, MaxRounds: opts.MaxRounds, SettleTimeout: opts.SettleTimeout,
		TransactionalID: txnID,
		ReadPlanned:     func(n int64) { prog.Restart("reading", n) }, Read: prog.Add,
		Planned: func(n int64) { prog.Phase("re-encrypting", n) }, Written: prog.Add,
	}
	if opts.Logger != nil {
		o.Log = opts.Logger()
	}
	run := opts.Plan
	if opts.Execute {
		run = opts.Sweep
	}
	res, err := run(ctx, o)
	prog.Done()
	if res != nil {
		retired := kr.RolelessKids()
		if perr := opts.Printer().Print(res, func(h *ui.Human) error { return show.Reencrypt(h, res, topics, fields, opts.Keyring, retired) }); perr != nil {
			return perr
		}
	}
	if err != nil {
		return err
	}
	if res.Verification != nil && !res.Verification.Clean {
		return &exitcode.Silent{Code: exitcode.Findings}
	}
	return nil
}
