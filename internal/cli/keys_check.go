package cli

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/promscrape"
	"github.com/flecht-dev/flecht/internal/reencrypt"
	"github.com/flecht-dev/flecht/internal/secret"
	"github.com/flecht-dev/flecht/internal/textfmt"
	"github.com/flecht-dev/flecht/internal/ui"
)

// KeysLoadedMetric is the gauge every stage exposes, one series per kid of
// its installed keyring (docs/contract.md §10).
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
	return printCheck(opts.Printer(), rep, func(h *ui.Human) error {
		printReaders(h, rep)
		if rep.Ready {
			h.Printf("%s\n", h.Good(fmt.Sprintf("every reader (%d) has loaded key %q: it may be promoted", len(rep.Readers), rep.Kid)))
		} else {
			h.Printf("%s\n", h.Bad(fmt.Sprintf("%d of %d readers have not loaded key %q: roll the keyring out to them before 'flecht keys promote'",
				rep.Lacking, len(rep.Readers), rep.Kid)))
		}
		return nil
	}, !rep.Ready)
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

// keysRemoveGuard makes `keys remove` refuse while a scan of the given
// topics still finds values that need the key: tokens sealed with it (of
// both generations) and values it signed.
type keysRemoveGuard struct {
	Targets secretTargets
	// Read reads the topics' compacted view (a Kafka client from the
	// factory); the scan judges it with reencrypt.ScanView, so the guard
	// counts whatever the scanner reports.
	Read func(ctx context.Context, topics []string, planned, read func(int64)) (*reencrypt.View, map[reencrypt.TP]kafkax.Bounds, error)
}

// readView is the guard's default Read: the secret scan's own read.
func (f *Factory) readView(ctx context.Context, topics []string, planned, read func(int64)) (*reencrypt.View, map[reencrypt.TP]kafkax.Bounds, error) {
	cl, err := f.KafkaClient(ctx)
	if err != nil {
		return nil, nil, err
	}
	defer cl.Close()
	v, res, err := reencrypt.ReadView(ctx, cl, topics, planned, read)
	if err != nil {
		return nil, nil, err
	}
	return v, res.Bounds, nil
}

// guardKeysRemove adds --topics/--field/-f to `keys remove` and runs the
// scan before the removal. Without them the removal is unguarded, as
// before, and says so. opts are the remove verb's: a password asked here
// is not asked again.
func guardKeysRemove(f *Factory, cmd *cobra.Command, opts *KeysOptions) *cobra.Command {
	g := &keysRemoveGuard{Read: f.readView}
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
		look := &KeysOptions{IO: f.IO, Keyring: keyringPath(flagPath, f.Getenv), PasswordFile: passwordFilePath(pwFlag, f.Getenv), Prompt: terminalPrompt(f.IO)}
		if kid == "" || look.Keyring == "" {
			return inner(c, args) // reports the usage error
		}
		if err := look.askPasswordFirst(); err != nil {
			return err
		}
		opts.password = look.password
		kr, _, err := secret.Load(look.Keyring, look.passwordOption())
		if err != nil || !kr.Has(kid) || roleRefusal(kr, kid, look.Keyring) != nil {
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
	scan := func(ctx context.Context, o reencrypt.ScanOptions) (*reencrypt.ScanReport, error) {
		v, bounds, err := g.Read(ctx, o.Topics, o.Planned, o.Read)
		if err != nil {
			return nil, err
		}
		return reencrypt.ScanView(v, bounds, o), nil
	}
	rep, err := scanWithProgress(ctx, io, scan, reencrypt.ScanOptions{Topics: topics, Fields: fields, Keyring: kr})
	if err != nil {
		return fmt.Errorf("scanning before the removal: %w", err)
	}
	if rep.TokensUnder(kid) == 0 {
		return nil
	}
	return exitcode.RefusedError(errors.New(removalRefusal(rep, kid, topics, fields, keyring)))
}

// removalRefusal explains a refused removal: how many values need kid, as
// sealing key and as signer, and what to do about each group of them.
func removalRefusal(rep *reencrypt.ScanReport, kid string, topics []string, fields []reencrypt.Field, keyring string) string {
	sealed, signed := 0, 0
	for _, u := range rep.UsesOf(kid) {
		if u.As == reencrypt.UseSealing {
			sealed += u.Count
		} else {
			signed += u.Count
		}
	}
	var found []string
	lost := "opened"
	if sealed > 0 {
		found = append(found, fmt.Sprintf("%d token(s) sealed with it", sealed))
	}
	if signed > 0 {
		found = append(found, fmt.Sprintf("%d value(s) signed with it", signed))
		lost = "verified"
		if sealed > 0 {
			lost = "opened or verified"
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "refusing to remove key %q: the scan of %s found %s, which could no longer be %s:",
		kid, strings.Join(topics, ", "), strings.Join(found, " and "), lost)
	for _, g := range tokensUnderByOutcome(rep, kid) {
		fmt.Fprintf(&b, "\n  %d %s: %s", len(g.entries), g.outcome, removalAdvice(g.outcome, kid, topics, fields, keyring))
		if listsPlaces(g.outcome) {
			writePlaces(&b, g.entries)
		}
	}
	return b.String()
}

// Outcomes of the values under a kid, beside the failing kinds: the tokens
// that open (the sweep moves them, unless the signature inside an
// encrypted-signed one fails), the signatures that verify (--resign moves
// them; those in the clear in an encrypted-signed field once sealed too),
// and the signed values in the clear in an encrypted field, which no sweep
// re-signs.
const (
	outcomeOpen          = "that open"
	outcomeOpenBadInside = "that open, holding a signature that does not verify"
	outcomeVerified      = "signatures that verify"
	outcomeVerifiedClear = "signatures that verify, in the clear in an encrypted-signed field"
	outcomeSignedInClear = "signed values in the clear in an encrypted field"
	outcomeSignaturePre  = "signature " // + the failing kind: "signature bad_signature"
)

// outcomeCount is the values under a kid with one scan outcome.
type outcomeCount struct {
	outcome string
	entries []reencrypt.ScanEntry
}

// tokensUnderByOutcome groups the values that depend on kid by what the
// scan says of them (reencrypt.ScanEntry.Use): outcomeOpen, outcomeVerified,
// outcomeVerifiedClear, outcomeOpenBadInside, outcomeSignedInClear, a failing kind
// ("signature KIND" for a signer's), or "corrupt"; in that order, failures
// by name.
func tokensUnderByOutcome(rep *reencrypt.ScanReport, kid string) []outcomeCount {
	groups := map[string][]reencrypt.ScanEntry{}
	for _, e := range rep.Entries {
		u, ok := e.Use(kid)
		if !ok {
			continue
		}
		o := u.Outcome
		switch {
		case u.As == reencrypt.UseSealing && o == string(reencrypt.DecryptOK) && e.FieldMode == reencrypt.ModeEncryptedSigned &&
			e.Verify != "" && e.Verify != reencrypt.VerifyOK && e.Verify != secret.KindUnsigned:
			// The sweep blocks these: their field reads the signature.
			o = outcomeOpenBadInside
		case u.As == reencrypt.UseSealing && o == string(reencrypt.DecryptOK):
			o = outcomeOpen
		case u.As == reencrypt.UseSigner && o == string(reencrypt.VerifyOK) && e.Status == secret.StatusSigned && e.FieldMode == reencrypt.ModeEncryptedSigned:
			o = outcomeVerifiedClear
		case u.As == reencrypt.UseSigner && o == string(reencrypt.VerifyOK):
			o = outcomeVerified
		case u.As == reencrypt.UseSigner && o == "":
			// Judged with the keyring, only a signed value in the clear in
			// an encrypted field goes unverified: its field does not sign.
			o = outcomeSignedInClear
		case u.As == reencrypt.UseSigner && o != "corrupt":
			o = outcomeSignaturePre + o
		}
		groups[o] = append(groups[o], e)
	}
	rank := func(o string) int {
		switch o {
		case outcomeOpen:
			return 0
		case outcomeVerified:
			return 1
		case outcomeVerifiedClear:
			return 2
		}
		return 3
	}
	out := make([]outcomeCount, 0, len(groups))
	for o, es := range groups {
		out = append(out, outcomeCount{o, es})
	}
	slices.SortFunc(out, func(a, b outcomeCount) int {
		if c := rank(a.outcome) - rank(b.outcome); c != 0 {
			return c
		}
		return strings.Compare(a.outcome, b.outcome)
	})
	return out
}

// listsPlaces reports whether the refusal lists where the values of an
// outcome are: signatures no sweep moves, which a scan's findings do not
// always show (a signature inside a token of an encrypted field is none).
func listsPlaces(outcome string) bool {
	return outcome == outcomeSignedInClear || strings.HasPrefix(outcome, outcomeSignaturePre)
}

// writePlaces lists where values are stored, the first ten of them.
func writePlaces(b *strings.Builder, entries []reencrypt.ScanEntry) {
	const show = 10
	for i, e := range entries {
		if i == show {
			fmt.Fprintf(b, "\n      … and %d more", len(entries)-show)
			return
		}
		key := strconv.Quote(e.Key)
		if e.KeyBase64 != "" {
			key = "base64:" + e.KeyBase64
		}
		where := ""
		if e.Status == secret.StatusEncrypted {
			where = ", inside a token"
		}
		fmt.Fprintf(b, "\n      %s/%d@%d key %s field %s (scope %q%s)", textfmt.Escape(e.Topic), e.Partition, e.Offset, key, textfmt.Escape(e.Field), e.FieldScope, where)
	}
}

// signatureFailures says why a signature that does not verify even now
// fails, by kind.
var signatureFailures = map[string]string{
	string(secret.KindBadSignature):   "altered since they were signed, or signed by other key bytes than this keyring's",
	string(secret.KindScopeViolation): "signed for another scope than their field's",
	string(secret.KindKeyBinding):     "the key is not bound to their field's scope",
}

// removalAdvice says what to do about values of one outcome. Only tokens
// that open and signatures that verify can be swept; suggesting the sweep
// for the others would send the operator in a loop, since it leaves them
// as they are.
func removalAdvice(outcome, kid string, topics []string, fields []reencrypt.Field, keyring string) string {
	tf := targetFlags(topics, fields)
	scan := "flecht secrets scan " + tf + " --keyring " + shellQuote(keyring) + " --findings-only"
	resign := "flecht secrets reencrypt " + tf + " --keyring " + shellQuote(keyring)
	rewrite := "re-write each with a value signed by its scope's signing key ('flecht secrets sign --scope S VALUE', " +
		"sealed with 'flecht secrets encrypt --scope S' where it sits inside a token), or delete it; they are at"
	switch {
	case outcome == outcomeOpen:
		return "sweep them to their scope's sealing key first:\n      flecht secrets reencrypt " + tf + " --keyring " + shellQuote(keyring) + " --execute"
	case outcome == outcomeVerified:
		return "sign them again with their scope's signing key first (flenc_signing; 'flecht keys signing --kid NEW --scope S' names one " +
			"where none is):\n      " + resign + " --resign --execute"
	case outcome == outcomeOpenBadInside:
		return "their field is encrypted-signed and the signature inside fails, so the sweep leaves them. Find them (" + scan +
			") and re-write each with a value signed by its scope's signing key, sealed ('flecht secrets sign --scope S VALUE', then " +
			"'flecht secrets encrypt --scope S'), or delete it"
	case outcome == outcomeVerifiedClear:
		return "seal them and sign them again with their scope's signing key first:\n      " + resign + " --encrypt-plaintext --resign --execute"
	case outcome == outcomeSignedInClear:
		return "an ENCRYPTED reader refuses them as plaintext, and no sweep re-signs a value in the clear there. If their stage reads " +
			"the field as SIGNED, declare it NAME:scope:signed and sweep with --resign; else " + rewrite
	case strings.HasPrefix(outcome, outcomeSignaturePre):
		kind := strings.TrimPrefix(outcome, outcomeSignaturePre)
		why := signatureFailures[kind]
		if why == "" {
			why = "they do not verify even now"
		}
		return why + "; the sweep cannot sign them again: " + rewrite
	case outcome == string(secret.KindScopeViolation):
		return "in a field of another scope, which refuses them; the sweep cannot move them. Find them (" + scan +
			") and re-write each record with a token of its field's scope, or delete it"
	case outcome == string(secret.KindTagMismatch):
		return fmt.Sprintf("this keyring's key %q has other bytes than the one that sealed them, or they were altered; the sweep cannot open them. "+
			"Find them (%s), then recover the keyring that sealed them or re-write each record", kid, scan)
	case outcome == string(secret.KindUnknownKid):
		return "the keyring lacks their key; the sweep cannot open them. Add the key from the keyring that sealed them, or re-write each record"
	default:
		return "they cannot be read; the sweep cannot move them. Find them (" + scan + ") and re-write or delete each record"
	}
}
