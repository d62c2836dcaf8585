package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/promscrape"
	"github.com/flecht-dev/flecht/internal/reencrypt"
	"github.com/flecht-dev/flecht/internal/secret"
	"github.com/flecht-dev/flecht/internal/ui"
)

// KeysLoadedMetric is the gauge every stage exposes, one series per kid of
// its installed keyring (SPEC §10).
const KeysLoadedMetric = promscrape.KeysLoadedMetric

// Reader statuses in a keys check.
const (
	readerHasKey      = "has_key"
	readerLacksKey    = "lacks_key"
	readerNoMetric    = "no_metric"
	readerUnreachable = "unreachable"
)

// KeysCheckReader is what one reader's metrics endpoint says.
type KeysCheckReader struct {
	URL    string   `json:"url"`
	Status string   `json:"status"` // has_key, lacks_key, no_metric, unreachable
	Kids   []string `json:"kids"`   // the kids its keyring has loaded
	Error  string   `json:"error,omitempty"`
}

// KeysCheckReport is what `flecht keys check` prints.
type KeysCheckReport struct {
	Kid     string            `json:"kid"`
	Ready   bool              `json:"ready"`   // every reader has loaded the key
	Lacking int               `json:"lacking"` // readers that have not (or cannot tell)
	Readers []KeysCheckReader `json:"readers"`
}

// KeysCheckOptions are the inputs of `flecht keys check`.
type KeysCheckOptions struct {
	IO      *ui.IOStreams
	Printer func() *ui.Printer
	Kid     string
	URLs    []string
	// Scrape reads one reader's loaded kids.
	Scrape func(ctx context.Context, url string) KeysCheckReader
}

// NewCmdKeysCheck builds `flecht keys check`.
func NewCmdKeysCheck(f *Factory, runF func(*KeysCheckOptions) error) *cobra.Command {
	opts := &KeysCheckOptions{IO: f.IO, Printer: f.Printer, Scrape: func(ctx context.Context, u string) KeysCheckReader {
		return scrapeKeyring(ctx, &http.Client{Timeout: 10 * time.Second}, u)
	}}
	cmd := &cobra.Command{
		Use:   "check --kid KID --metrics-url URL...",
		Short: "Check that every reader has loaded a key (the gate before keys promote)",
		Long: `Scrape each reader's Prometheus endpoint for ` + KeysLoadedMetric + `{kid}
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
	rep := checkReaders(ctx, opts.Kid, opts.URLs, opts.Scrape)
	if err := opts.Printer().Print(rep, func(h *ui.Human) error {
		printReaders(h, rep)
		if rep.Ready {
			h.Printf("%s\n", h.Good(fmt.Sprintf("every reader (%d) has loaded key %q: it may be promoted", len(rep.Readers), rep.Kid)))
		} else {
			h.Printf("%s\n", h.Bad(fmt.Sprintf("%d of %d readers have not loaded key %q: roll the keyring out to them before 'flecht keys promote'",
				rep.Lacking, len(rep.Readers), rep.Kid)))
		}
		return nil
	}); err != nil {
		return err
	}
	if !rep.Ready {
		return &exitcode.Silent{Code: exitcode.Findings}
	}
	return nil
}

func checkReaders(ctx context.Context, kid string, urls []string, scrape func(context.Context, string) KeysCheckReader) *KeysCheckReport {
	rep := &KeysCheckReport{Kid: kid, Readers: []KeysCheckReader{}}
	for _, u := range dedupeStrings(urls) {
		r := scrape(ctx, u)
		if r.Status == "" {
			r.Status = readerLacksKey
			if slices.Contains(r.Kids, kid) {
				r.Status = readerHasKey
			}
		}
		if r.Status != readerHasKey {
			rep.Lacking++
		}
		rep.Readers = append(rep.Readers, r)
	}
	rep.Ready = rep.Lacking == 0 && len(rep.Readers) > 0
	return rep
}

func printReaders(h *ui.Human, rep *KeysCheckReport) {
	rows := make([][]string, len(rep.Readers))
	for i, r := range rep.Readers {
		status := r.Status
		if status != readerHasKey {
			status = h.Bad(status)
		}
		detail := strings.Join(r.Kids, ", ")
		if r.Error != "" {
			detail = r.Error
		}
		rows[i] = []string{r.URL, status, detail}
	}
	h.Table([]string{"reader", "status", "kids loaded"}, rows)
}

// scrapeKeyring reads the kids a reader has loaded from its metrics.
func scrapeKeyring(ctx context.Context, client *http.Client, raw string) KeysCheckReader {
	r := KeysCheckReader{URL: promscrape.URL(raw), Kids: []string{}}
	s, err := promscrape.Scrape(ctx, client, raw)
	if err != nil {
		r.Status, r.Error = readerUnreachable, err.Error()
		return r
	}
	kids, found := s.KidsLoaded()
	if !found {
		r.Status, r.Error = readerNoMetric, fmt.Sprintf("no %s metric (not a flecht or flechtwerk stage, or no keyring installed)", KeysLoadedMetric)
		return r
	}
	r.Kids = kids
	return r
}

// ParseKeysLoaded reads the kids with a non-zero keyring_keys_loaded series
// from a Prometheus text exposition; found says whether the metric is there.
func ParseKeysLoaded(r io.Reader) (kids []string, found bool, err error) {
	fams, err := promscrape.Parse(r)
	if err != nil {
		return nil, false, err
	}
	kids, found = (&promscrape.Sample{Families: fams}).KidsLoaded()
	return kids, found, nil
}

// keysRemoveGuard makes `keys remove` refuse while a scan of the given
// topics still finds tokens under the key.
type keysRemoveGuard struct {
	Targets secretTargets
	// Scan reads the topics (a Kafka client from the factory).
	Scan func(ctx context.Context, o reencrypt.ScanOptions) (*reencrypt.ScanReport, error)
}

// guardKeysRemove adds --topics/--field/-f to `keys remove` and runs the
// scan before the removal. Without them the removal is unguarded, as
// before, and says so.
func guardKeysRemove(f *Factory, cmd *cobra.Command) *cobra.Command {
	g := &keysRemoveGuard{Scan: f.ScanTopics}
	g.Targets.addFlags(cmd)
	cmd.Use = "remove --kid KID [--topics T,... --field NAME[:scope]... | -f stage.yaml]"
	cmd.Long += `

With --topics and --field (or -f stage.yaml) the config topics are scanned
first (with the keyring, so each token is known to open or not), and the
removal is refused (exit 3) while any token there still names KID. The
refusal counts them by outcome and says what to do about each: the sweep
command for the tokens that open; for those it cannot move (scope_violation,
tag_mismatch, corrupt) how to find them and what to fix. Without --topics
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
			fmt.Fprintf(f.IO.ErrOut, "warning: no topics were scanned, so nothing checked that no stored token still names %q; "+
				"give --topics and --field (or -f stage.yaml) to have remove refuse while any does\n", kid)
			return nil
		}
		flagPath, _ := c.Flags().GetString("keyring")
		path := keyringPath(flagPath, f.Getenv)
		if kid == "" || path == "" {
			return inner(c, args) // reports the usage error
		}
		kr, _, err := secret.Load(path)
		if err != nil || !kr.Has(kid) || kr.Primary() == kid {
			return inner(c, args) // reports the missing file, kid or the primary
		}
		if err := g.check(c.Context(), f.IO, kr, kid, path); err != nil {
			return err
		}
		return inner(c, args)
	}
	return cmd
}

// check scans the topics with the keyring, so that each token left under
// kid is known to open or not, and refuses the removal while any is left.
func (g *keysRemoveGuard) check(ctx context.Context, io *ui.IOStreams, kr *secret.Keyring, kid, keyring string) error {
	topics, fields, err := g.Targets.resolve()
	if err != nil {
		return err
	}
	rep, err := scanWithProgress(ctx, io, g.Scan, reencrypt.ScanOptions{Topics: topics, Fields: fields, Keyring: kr})
	if err != nil {
		return fmt.Errorf("scanning before the removal: %w", err)
	}
	n := rep.TokensUnder(kid)
	if n == 0 {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "refusing to remove key %q: the scan of %s found %d token(s) sealed with it, which could no longer be opened:",
		kid, strings.Join(topics, ", "), n)
	for _, g := range tokensUnderByOutcome(rep, kid) {
		fmt.Fprintf(&b, "\n  %d %s: %s", g.n, g.outcome, removalAdvice(g.outcome, kid, topics, fields, keyring))
	}
	return exitcode.RefusedError(errors.New(b.String()))
}

// outcomeOpen names the tokens that open: the only ones a sweep moves.
const outcomeOpen = "that open"

// outcomeCount is how many tokens under a kid have one scan outcome.
type outcomeCount struct {
	outcome string
	n       int
}

// tokensUnderByOutcome groups the tokens under kid by what the scan says of
// them: outcomeOpen (the sweep moves them), a decrypt failure kind, or
// "corrupt"; in that order, failures by name.
func tokensUnderByOutcome(rep *reencrypt.ScanReport, kid string) []outcomeCount {
	counts := map[string]int{}
	for _, e := range rep.Entries {
		if e.Kid != kid || e.Status == secret.StatusPlaintext {
			continue
		}
		switch {
		case e.Status == secret.StatusCorrupt:
			counts["corrupt"]++
		case e.Decrypt == reencrypt.DecryptOK:
			counts[outcomeOpen]++
		default:
			counts[string(e.Decrypt)]++
		}
	}
	out := make([]outcomeCount, 0, len(counts))
	for o, n := range counts {
		out = append(out, outcomeCount{o, n})
	}
	slices.SortFunc(out, func(a, b outcomeCount) int {
		if (a.outcome == outcomeOpen) != (b.outcome == outcomeOpen) {
			if a.outcome == outcomeOpen {
				return -1
			}
			return 1
		}
		return strings.Compare(a.outcome, b.outcome)
	})
	return out
}

// removalAdvice says what to do about tokens of one outcome. Only tokens
// that open can be swept; suggesting the sweep for the others would send
// the operator in a loop, since it leaves them as they are.
func removalAdvice(outcome, kid string, topics []string, fields []reencrypt.Field, keyring string) string {
	scan := "flecht secrets scan " + targetFlags(topics, fields) + " --keyring " + shellQuote(keyring) + " --findings-only"
	switch outcome {
	case outcomeOpen:
		return "sweep them to the primary first:\n      flecht secrets reencrypt " + targetFlags(topics, fields) + " --keyring " + shellQuote(keyring) + " --execute"
	case string(secret.KindScopeViolation):
		return "in a field of another scope, which refuses them; the sweep cannot move them. Find them (" + scan +
			") and re-write each record with a token of its field's scope, or delete it"
	case string(secret.KindTagMismatch):
		return fmt.Sprintf("this keyring's key %q has other bytes than the one that sealed them, or they were altered; the sweep cannot open them. "+
			"Find them (%s), then recover the keyring that sealed them or re-write each record", kid, scan)
	case string(secret.KindUnknownKid):
		return "the keyring lacks their key; the sweep cannot open them. Add the key from the keyring that sealed them, or re-write each record"
	default:
		return "they cannot be read; the sweep cannot move them. Find them (" + scan + ") and re-write or delete each record"
	}
}
