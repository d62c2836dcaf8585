package cli

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/reencrypt"
	"github.com/flecht-dev/flecht/internal/rotation"
	"github.com/flecht-dev/flecht/internal/show"
	"github.com/flecht-dev/flecht/internal/ui"
)

// KeysRotatePlanOptions are the inputs of `flecht keys rotate-plan`.
type KeysRotatePlanOptions struct {
	IO           *ui.IOStreams
	Printer      func() *ui.Printer
	Keyring      string
	PasswordFile string // a protected keyring's password: --password-file, else FLECHT_KEYRING_PASSWORD_FILE
	Kid          string
	Scope        string // rotate the role of this scope only
	URLs         []string
	Targets      secretTargets
	Scan         func(ctx context.Context, o reencrypt.ScanOptions) (*reencrypt.ScanReport, error)
	Scrape       func(ctx context.Context, url string) rotation.Reader
}

// NewCmdKeysRotatePlan builds `flecht keys rotate-plan`.
func NewCmdKeysRotatePlan(f *Factory, runF func(*KeysRotatePlanOptions) error) *cobra.Command {
	opts := &KeysRotatePlanOptions{IO: f.IO, Printer: f.Printer}
	opts.Scan = f.ScanTopics
	opts.Scrape = func(ctx context.Context, u string) rotation.Reader {
		return rotation.Scrape(ctx, &http.Client{Timeout: 10 * time.Second}, u)
	}
	cmd := &cobra.Command{
		Use:   "rotate-plan --kid NEW [--scope S] [--metrics-url URL...] [--topics T,... --field NAME[:scope]... | -f stage.yaml]",
		Short: "Show the five rotation steps to key NEW, each with its live status",
		Long: `Show the reader-first rotation to key NEW as five steps, each checked now.
For a sealing key (oct or x25519):

  1. add NEW to every reader's keyring   the keyring holds NEW, and every
                                          --metrics-url reports it loaded
  2. promote NEW (writers)               the keyring's primary is NEW (with
                                          --scope S: scope S's sealing key)
  3. re-encrypt the stored tokens        the scan finds no token of the
                                          rotated fields under another kid
  4. verify by a scan                    nothing under an old kid,
                                          plaintext, corrupt or unopenable
  5. retire the old keys                 no oct or x25519 key is left that
                                          no role but the rotated one names

Any kind works as a sealing key's successor: a rotation may move from oct
to x25519 and back. Without --scope the rotation is the primary's: the
rotated fields are those whose scope has no sealing key of its own. With
--scope S it is scope S's alone (flenc_primaries[S]): the rotated fields
are those of scope S, and the other scopes' keys are left alone.

For a signing key (ed25519), the scopes of its binding (or, with --scope S,
scope S alone) are the rotated ones:

  1. add NEW to every reader's keyring   as above: readers verify with it
  2. make NEW the signing key            flenc_signing names NEW for each
     ('keys signing --kid NEW --scope S')  rotated scope
  3. sign the stored values again        the scan finds no signature in the
     (the sweep with --resign)             rotated scopes by another signer
  4. verify by a scan                    as above
  5. retire the old signers              no other ed25519 key bound to the
                                          rotated scopes that no role names

A key the keyring does not hold yet is planned as a sealing key: add an
ed25519 key first ('keys add --type ed25519 --scope S') to see its plan.

Each step says done, pending or unknown (not checkable without
--metrics-url, or without --topics and --field / -f stage.yaml), with the
command that does or checks it; "next" is the first step not done. The
keyring is the writers' copy (--keyring or ` + EnvKeyring + `). Nothing is
changed. Exit 0 whatever the progress; 1 when a check itself fails.`,
		Example: `  flecht keys rotate-plan --keyring keyring.json --kid prod-2026-07 \
      --metrics-url 127.0.0.1:9464 --metrics-url 127.0.0.1:9465 -f extractor.yaml
  flecht keys rotate-plan --kid prod-2026-07 -f extractor.yaml -o json | jq .next
  flecht keys rotate-plan --kid sig-api-2026-07 --scope api -f extractor.yaml`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.Keyring = keyringPath(opts.Keyring, f.Getenv)
			opts.PasswordFile = passwordFilePath(opts.PasswordFile, f.Getenv)
			if opts.Keyring == "" {
				return exitcode.UsageError(errNoKeyringPath)
			}
			if opts.Kid == "" {
				return exitcode.UsageError(errors.New("--kid NEW is required: the key being rotated to"))
			}
			if opts.Scope != "" && strings.TrimSpace(opts.Scope) == "" {
				return exitcode.UsageError(errors.New("--scope must name a scope"))
			}
			if runF != nil {
				return runF(opts)
			}
			return runKeysRotatePlan(cmd.Context(), opts)
		},
	}
	addKeyringFlag(cmd, &opts.Keyring)
	addPasswordFileFlag(cmd, &opts.PasswordFile)
	cmd.Flags().StringVar(&opts.Kid, "kid", "", "the new key (being rotated to)")
	cmd.Flags().StringVar(&opts.Scope, "scope", "", "rotate scope S's role only: its sealing key (flenc_primaries[S]), or for an ed25519 NEW its signing key (flenc_signing[S])")
	cmd.Flags().StringSliceVar(&opts.URLs, "metrics-url", nil, "a reader's Prometheus endpoint (repeatable)")
	opts.Targets.addFlags(cmd)
	return cmd
}

func runKeysRotatePlan(ctx context.Context, opts *KeysRotatePlanOptions) error {
	kr, err := loadKeyringForKeys(&KeysOptions{IO: opts.IO, Keyring: opts.Keyring, PasswordFile: opts.PasswordFile})
	if err != nil {
		return err
	}
	in := rotation.Inputs{Keyring: kr, KeyringPath: opts.Keyring, Kid: opts.Kid, Scope: opts.Scope, URLs: opts.URLs, Scrape: opts.Scrape}
	if opts.Targets.given() {
		topics, fields, err := opts.Targets.resolve()
		if err != nil {
			return err
		}
		in.Topics, in.Fields = topics, fields
		in.Scan = func(ctx context.Context) (*reencrypt.ScanReport, error) {
			return scanWithProgress(ctx, opts.IO, opts.Scan, reencrypt.ScanOptions{Topics: topics, Fields: fields, Keyring: kr})
		}
	}
	plan, err := rotation.NewPlan(ctx, in)
	if err != nil {
		return err
	}
	return opts.Printer().Print(plan, func(h *ui.Human) error { return show.RotatePlan(h, plan) })
}
