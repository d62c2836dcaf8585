package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/reencrypt"
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
	BatchSize        int
	MaxRounds        int
	SettleTimeout    time.Duration
	TransactionalID  string

	// Plan and Sweep run the engine against the cluster.
	Plan  func(ctx context.Context, o reencrypt.Options) (*reencrypt.Result, error)
	Sweep func(ctx context.Context, o reencrypt.Options) (*reencrypt.Result, error)
}

const secretsReencryptLong = `Re-encrypt the secret values stored in config topics under the keyring's
primary key: step 3 of a key rotation (see 'flecht keys rotate-plan').

Without --execute it prints the plan and writes nothing: per partition, the
records holding a token under a non-primary kid, unscoped tokens of a
scoped field (the scope upgrade: a scope can be added to a live field, never
removed), plaintext values, and values it cannot touch (a token whose kid
the keyring lacks, one that fails authentication, a scope violation, a
corrupt value).

With --execute it re-produces each such record
  - with the same key bytes, headers and timestamp, explicitly to the
    partition it was read from (never by key hash: a copy on another
    partition would survive and come back after the old key is gone); a
    topic with message.timestamp.type=LogAppendTime restamps it anyway;
  - with every other byte of the value unchanged (member order, whitespace,
    number spellings): only the token values change;
  - in transactions of --batch-size records, under the transactional ID
    flecht-reencrypt-<hash of the topics>.
Before each commit it compares the end offsets of the partitions it wrote
with what it read and wrote itself. If another writer appended meanwhile,
the transaction is aborted (never visible) and those partitions are re-read
from where they were read before and re-swept: another writer's newer value
always wins, and is only rewritten if it still holds a token to rotate. A
partition re-read --max-rounds times in a row without progress stops the
sweep with exit 1 naming it. At the end a scan verifies that no token under a
non-primary kid remains and every token opens (exit 4 otherwise).

A sweep that is killed can be run again: the transactional ID fences the old
process and aborts its open transaction, and records already swept are not
touched again.

Plaintext values are left alone unless --encrypt-plaintext is given (the
last step of a migration from plaintext); every value that rested in
plaintext must be treated as disclosed and rotated at its source.

A progress bar is drawn on a terminal. -o json prints the counts per
partition and the verification:
  {"mode": "plan"|"execute", "topics", "fields", "primary", "transactional_id",
   "partitions": [{"topic", "partition", "end_offset", "records", "rewrite",
     "non_primary", "scope_upgrade", "plaintext", "blocked", "values": {...},
     "written", "rereads", "foreign_records", "resweep", "restored"}],
   "totals": {...}, "blocked": [{"topic", "partition", "offset", "key",
   "field", "error"}], "transactions", "aborted_transactions",
   "verification": {"clean", "primary", "non_primary_tokens", "plaintext",
     "corrupt", "undecryptable", "by_kid": [...]}, "reminder"}`

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
		prod, err := c.Client(reencrypt.ProducerOpts(o.TransactionalID)...)
		if err != nil {
			return nil, err
		}
		defer prod.Close()
		o.NewProducer = func(txnID string) (*kgo.Client, error) { return c.Client(reencrypt.ProducerOpts(txnID)...) }
		return reencrypt.Execute(ctx, cl, prod, o)
	}
	cmd := &cobra.Command{
		Use:   "reencrypt (--topics T,... --field NAME[:scope]... | -f stage.yaml) --keyring FILE [--execute]",
		Short: "Re-encrypt stored secret tokens under the primary key (dry run unless --execute)",
		Long:  secretsReencryptLong,
		Example: `  flecht secrets reencrypt --topics configs --field api_key:api_key --keyring keyring.json
  flecht secrets reencrypt -f extractor.yaml --keyring keyring.json --execute
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
	fl.BoolVar(&opts.EncryptPlaintext, "encrypt-plaintext", false, "also encrypt plaintext values (migration); rotate them at their source afterwards")
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
	prog := &sweepProgress{io: opts.IO}
	o := reencrypt.Options{
		Topics: topics, Fields: fields, Keyring: kr, EncryptPlaintext: opts.EncryptPlaintext,
		BatchSize: opts.BatchSize, MaxRounds: opts.MaxRounds, SettleTimeout: opts.SettleTimeout,
		TransactionalID: txnID,
		ReadPlanned:     prog.reading, Read: prog.add, Planned: prog.writing, Written: prog.add,
	}
	if opts.Logger != nil {
		o.Log = opts.Logger()
	}
	run := opts.Plan
	if opts.Execute {
		run = opts.Sweep
	}
	res, err := run(ctx, o)
	prog.done()
	if res != nil {
		if perr := opts.Printer().Print(res, func(h *ui.Human) error { return printReencrypt(h, res, kr.Primary(), topics, fields, opts.Keyring) }); perr != nil {
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

// sweepProgress shows one bar per phase: reading, then writing.
type sweepProgress struct {
	io    *ui.IOStreams
	cur   *ui.Progress
	phase string
}

func (p *sweepProgress) start(phase string) {
	if p.phase == phase && p.cur != nil {
		return
	}
	p.cur.Done()
	p.phase, p.cur = phase, ui.NewProgress(p.io, phase)
}

func (p *sweepProgress) reading(offsets int64) {
	p.phase = ""
	p.start("reading")
	p.cur.SetTotal(offsets)
}
func (p *sweepProgress) writing(total int64) { p.start("re-encrypting"); p.cur.SetTotal(total) }
func (p *sweepProgress) add(n int64)         { p.cur.Add(n) }
func (p *sweepProgress) done()               { p.cur.Done() }

func printReencrypt(h *ui.Human, res *reencrypt.Result, primary string, topics []string, fields []reencrypt.Field, keyring string) error {
	executed := res.Mode == "execute"
	t := res.Totals
	if executed {
		h.Printf("swept %s to primary %q: %s of %s records re-encrypted\n", strings.Join(res.Topics, ", "), primary,
			ui.GroupDigits(int64(t.Written)), ui.GroupDigits(int64(t.Records)))
	} else {
		h.Printf("plan: re-encrypt %s of %s records in %s to primary %q\n", ui.GroupDigits(int64(t.Rewrite)), ui.GroupDigits(int64(t.Records)),
			strings.Join(res.Topics, ", "), primary)
	}
	headers := []string{"topic", "partition", "records", "rewrite", "non-primary", "scope-upgrade", "plaintext", "blocked"}
	if executed {
		headers = append(headers, "written", "rereads", "foreign")
	}
	n := func(v int) string { return ui.GroupDigits(int64(v)) }
	var rows [][]string
	for _, p := range res.Partitions {
		row := []string{p.Topic, strconv.Itoa(int(p.Partition)), n(p.Records), n(p.Rewrite), n(p.NonPrimary), n(p.ScopeUpgrade), n(p.Plaintext), n(p.Blocked)}
		if executed {
			row = append(row, n(p.Written), n(p.Rereads), n(p.ForeignRecords))
		}
		rows = append(rows, row)
	}
	h.Table(headers, rows)
	if len(res.Blocked) > 0 {
		h.Printf("\n%s\n", h.Warn("values the sweep cannot rewrite (left as they are):"))
		var brows [][]string
		for _, b := range res.Blocked {
			brows = append(brows, []string{b.Topic, strconv.Itoa(int(b.Partition)), strconv.FormatInt(b.Offset, 10), b.Key, b.Field, b.Error.Message})
		}
		h.Table([]string{"topic", "partition", "offset", "key", "field", "why"}, brows)
		if res.BlockedMore > 0 {
			h.Printf("… and %d more (-o json lists the first %d)\n", res.BlockedMore, len(res.Blocked))
		}
	}
	if t.Plaintext > 0 && !res.EncryptPlaintext {
		h.Printf("\nrecords holding plaintext values: %s; they are left alone (--encrypt-plaintext encrypts them)\n", n(t.Plaintext))
	}
	if res.Reminder != "" {
		h.Printf("\n%s\n", h.Warn("reminder: "+res.Reminder))
	}
	if !executed {
		h.Printf("\n%s\n", h.Faint("dry run: nothing was written; run again with --execute"))
		return nil
	}
	h.Printf("\n%d transactions committed", res.Transactions)
	if res.Aborted > 0 {
		h.Printf(", %d aborted because another writer appended to a partition meanwhile", res.Aborted)
	}
	h.Printf("\n")
	for _, p := range res.Partitions {
		if p.Rereads > 0 {
			h.Printf("re-swept %s/%d: re-read %d times, found %d records of another writer, %d of them still holding tokens to sweep",
				p.Topic, p.Partition, p.Rereads, p.ForeignRecords, p.Resweep)
			if p.Restored > 0 {
				h.Printf(", %d edits re-produced", p.Restored)
			}
			h.Printf("\n")
		}
	}
	v := res.Verification
	if v == nil {
		return nil
	}
	if v.Clean {
		h.Printf("%s\n", h.Good(fmt.Sprintf("verified by a scan: no token under a kid other than %q remains (%s values in %s records)",
			v.Primary, n(v.Values), n(v.Records))))
		h.Printf("%s\n", h.Faint("next: remove the old keys, guarded by a scan: flecht keys remove --kid OLD "+targetFlags(topics, fields)+" --keyring "+shellQuote(keyring)))
	} else {
		h.Printf("%s\n", h.Bad(fmt.Sprintf("verification failed: %d tokens name a kid other than %q, %d tokens do not open",
			v.NonPrimary, v.Primary, v.Undecryptable)))
	}
	if v.Plaintext > 0 || v.Corrupt > 0 {
		h.Printf("%s\n", h.Warn(fmt.Sprintf("the scan also found %d plaintext and %d corrupt values ('flecht secrets scan' lists them)", v.Plaintext, v.Corrupt)))
	}
	return nil
}
