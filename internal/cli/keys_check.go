package cli

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/reencrypt"
	"github.com/flecht-dev/flecht/internal/rotation"
	"github.com/flecht-dev/flecht/internal/secret"
	"github.com/flecht-dev/flecht/internal/show"
	"github.com/flecht-dev/flecht/internal/ui"
)

// KeysCheckOptions are the inputs of `flecht keys check`.
type KeysCheckOptions struct {
	IO      *ui.IOStreams
	Printer func() *ui.Printer
	Kid     string
	URLs    []string
	// Scrape reads one reader's loaded kids.
	Scrape func(ctx context.Context, url string) rotation.Reader
}

// NewCmdKeysCheck builds `flecht keys check`.
func NewCmdKeysCheck(f *Factory, runF func(*KeysCheckOptions) error) *cobra.Command {
	opts := &KeysCheckOptions{IO: f.IO, Printer: f.Printer, Scrape: func(ctx context.Context, u string) rotation.Reader {
		return rotation.Scrape(ctx, &http.Client{Timeout: 10 * time.Second}, u)
	}}
	cmd := &cobra.Command{
		Use:   "check --kid KID --metrics-url URL...",
		Short: "Check that every reader has loaded a key (the gate before keys promote)",
		Long: `Scrape each reader's Prometheus endpoint for ` + rotation.KeysLoadedMetric + `{kid}
and report which readers have loaded KID. Rotation is reader-first: promote
a key to primary only once every stage that reads the secret fields holds
it, or the first token sealed with it crash-loops every reader without it.

Give one --metrics-url per reader (repeatable or comma-separated; host:port
means http://host:port/metrics). A reader that cannot be scraped, or exposes
no keyring metric, counts as lacking the key: the gate never passes on a
guess. Exit 0 when every reader has it, 4 otherwise.`,
		Example: `  flecht keys check --kid prod-2026-07 --metrics-url 127.0.0.1:9464 --metrics-url 127.0.0.1:9465
  flecht keys check --kid prod-2026-07 --metrics-url http://127.0.0.1:9100/metrics -o json | jq .ready`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.Kid == "" {
				return exitcode.UsageError(errors.New("--kid KID is required"))
			}
			if len(opts.URLs) == 0 {
				return exitcode.UsageError(errors.New("give each reader's metrics endpoint with --metrics-url URL"))
			}
			if runF != nil {
				return runF(opts)
			}
			return runKeysCheck(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Kid, "kid", "", "the key every reader must hold")
	cmd.Flags().StringSliceVar(&opts.URLs, "metrics-url", nil, "a reader's Prometheus endpoint (repeatable)")
	return cmd
}

func runKeysCheck(ctx context.Context, opts *KeysCheckOptions) error {
	rep := rotation.CheckReaders(ctx, opts.Kid, opts.URLs, opts.Scrape)
	return printCheck(opts.Printer(), rep, func(h *ui.Human) error { return show.KeysCheck(h, rep) }, !rep.Ready)
}

// keysRemoveGuard makes `keys remove` refuse while a scan of the given
// topics still finds values that need the key: tokens sealed with it (of
// both generations) and values it signed.
type keysRemoveGuard struct {
	Targets secretTargets
	// Scan reads and judges the topics (the secret scan's own), so the
	// guard counts whatever the scanner reports.
	Scan func(ctx context.Context, o reencrypt.ScanOptions) (*reencrypt.ScanReport, error)
}

// guardKeysRemove adds --topics/--field/-f to `keys remove` and runs the
// scan before the removal. Without them nothing guards the removal, and a
// warning says so. opts are the remove verb's: a password asked here
// is not asked again.
func guardKeysRemove(f *Factory, cmd *cobra.Command, opts *KeysOptions) *cobra.Command {
	g := &keysRemoveGuard{Scan: f.ScanTopics}
	g.Targets.addFlags(cmd)
	cmd.Use = "remove --kid KID [--topics T,... --field NAME[:scope]... | -f stage.yaml]"
	cmd.Long += `

With --topics and --field (or -f stage.yaml) the config topics are scanned
first (with the keyring, so each token is known to open or not), and the
removal is refused (exit 3) while any value there still needs KID: a token
sealed with it (either generation), or a value it signed (flsig:jws:, bare
or inside a token, whatever mode the field is declared with). The refusal
counts them by outcome and says what to do about each: the sweep command
for the tokens that open; for those it cannot move (scope_violation,
tag_mismatch, corrupt) how to find them and what to fix; for signatures
that verify, the sweep that signs them again with their scope's signing key
(--resign); for the signatures no sweep moves (in the clear in an encrypted
field, or not verifying), where each is and what to do. Without --topics
nothing checks the topics, and a warning says so.`
	cmd.Example = `  flecht keys remove --keyring keyring.json --kid prod-2026-01 --topics configs --field api_key:api_key
  flecht keys remove --keyring keyring.json --kid prod-2026-01 -f extractor.yaml`
	inner := cmd.RunE
	cmd.RunE = func(c *cobra.Command, args []string) error {
		kid, _ := c.Flags().GetString("kid")
		if !g.Targets.given() {
			if err := inner(c, args); err != nil {
				return err
			}
			fmt.Fprintf(f.IO.ErrOut, "warning: no topics were scanned, so nothing checked that no stored value still needs %q; "+
				"give --topics and --field (or -f stage.yaml) to have remove refuse while any does\n", kid)
			return nil
		}
		flagPath, _ := c.Flags().GetString("keyring")
		pwFlag, _ := c.Flags().GetString("password-file")
		look := &KeysOptions{IO: f.IO, Keyring: keyringPath(flagPath, f.Getenv), PasswordFile: passwordFilePath(pwFlag, f.Getenv), Prompt: ui.PasswordPrompt(f.IO)}
		if kid == "" || look.Keyring == "" {
			return inner(c, args) // reports the usage error
		}
		if err := look.askPasswordFirst(); err != nil {
			return err
		}
		opts.password = look.password
		kr, _, err := secret.Load(look.Keyring, look.passwordOption())
		if err != nil || !kr.Has(kid) || secret.RoleRefusal(kr, kid, look.Keyring) != nil {
			return inner(c, args) // reports the missing file, kid or the roles
		}
		if err := g.check(c.Context(), f.IO, kr, kid, look.Keyring); err != nil {
			return err
		}
		return inner(c, args)
	}
	return cmd
}

// check scans the topics with the keyring, so that each token left under
// kid is known to open or not and each signature it made to verify or not,
// and refuses the removal while any value needs kid.
func (g *keysRemoveGuard) check(ctx context.Context, io *ui.IOStreams, kr *secret.Keyring, kid, keyring string) error {
	topics, fields, err := g.Targets.resolve()
	if err != nil {
		return err
	}
	rep, err := scanWithProgress(ctx, io, g.Scan, reencrypt.ScanOptions{Topics: topics, Fields: fields, Keyring: kr})
	if err != nil {
		return fmt.Errorf("scanning before the removal: %w", err)
	}
	return rotation.CheckRemoval(rep, kid, topics, fields, keyring)
}
