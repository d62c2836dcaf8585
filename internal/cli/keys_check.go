package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/spf13/cobra"

	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/reencrypt"
	"github.com/flecht-dev/flecht/internal/secret"
	"github.com/flecht-dev/flecht/internal/ui"
)

// KeysLoadedMetric is the gauge every stage exposes, one series per kid of
// its installed keyring (SPEC §10).
const KeysLoadedMetric = "flechtwerk_keyring_keys_loaded"

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

// metricsURL completes host:port into http://host:port/metrics.
func metricsURL(s string) string {
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	if u, err := url.Parse(s); err == nil && (u.Path == "" || u.Path == "/") {
		u.Path = "/metrics"
		return u.String()
	}
	return s
}

// scrapeKeyring reads the kids a reader has loaded from its metrics.
func scrapeKeyring(ctx context.Context, client *http.Client, raw string) KeysCheckReader {
	u := metricsURL(raw)
	r := KeysCheckReader{URL: u, Kids: []string{}}
	fail := func(status, format string, args ...any) KeysCheckReader {
		r.Status, r.Error = status, fmt.Sprintf(format, args...)
		return r
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return fail(readerUnreachable, "bad URL: %v", err)
	}
	req.Header.Set("Accept", "text/plain; version=0.0.4")
	resp, err := client.Do(req)
	if err != nil {
		return fail(readerUnreachable, "%v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fail(readerUnreachable, "HTTP %s", resp.Status)
	}
	kids, found, err := ParseKeysLoaded(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fail(readerUnreachable, "%v", err)
	}
	if !found {
		return fail(readerNoMetric, "no %s metric (not a flecht or flechtwerk stage, or no keyring installed)", KeysLoadedMetric)
	}
	r.Kids = kids
	return r
}

// ParseKeysLoaded reads the kids with a non-zero keyring_keys_loaded series
// from a Prometheus text exposition; found says whether the metric is there.
func ParseKeysLoaded(r io.Reader) (kids []string, found bool, err error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return nil, false, fmt.Errorf("not Prometheus text format: %w", err)
	}
	mf, ok := families[KeysLoadedMetric]
	if !ok {
		return []string{}, false, nil
	}
	kids = []string{}
	for _, m := range mf.GetMetric() {
		v := m.GetGauge().GetValue()
		if m.GetUntyped() != nil {
			v = m.GetUntyped().GetValue()
		}
		if v == 0 {
			continue
		}
		for _, l := range m.GetLabel() {
			if l.GetName() == "kid" && !slices.Contains(kids, l.GetValue()) {
				kids = append(kids, l.GetValue())
			}
		}
	}
	slices.Sort(kids)
	return kids, true, nil
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
or inside a token). The refusal counts them by outcome and says what to do
about each: the sweep command for the tokens that open; for those it cannot
move (scope_violation, tag_mismatch, corrupt) how to find them and what to
fix; for signed values, where they are (no sweep re-signs). Without --topics
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
// kid is known to open or not, and refuses the removal while any value
// needs kid.
func (g *keysRemoveGuard) check(ctx context.Context, io *ui.IOStreams, kr *secret.Keyring, kid, keyring string) error {
	topics, fields, err := g.Targets.resolve()
	if err != nil {
		return err
	}
	var view *reencrypt.View
	scan := func(ctx context.Context, o reencrypt.ScanOptions) (*reencrypt.ScanReport, error) {
		v, bounds, err := g.Read(ctx, o.Topics, o.Planned, o.Read)
		if err != nil {
			return nil, err
		}
		view = v
		return reencrypt.ScanView(v, bounds, o), nil
	}
	rep, err := scanWithProgress(ctx, io, scan, reencrypt.ScanOptions{Topics: topics, Fields: fields, Keyring: kr})
	if err != nil {
		return fmt.Errorf("scanning before the removal: %w", err)
	}
	n := rep.TokensUnder(kid)
	signed := signedValuesUnder(view, rep, fields, kr, kid)
	if n == 0 && len(signed) == 0 {
		return nil
	}
	var b strings.Builder
	var found []string
	if n > 0 {
		found = append(found, fmt.Sprintf("%d token(s) sealed with it", n))
	}
	if len(signed) > 0 {
		found = append(found, fmt.Sprintf("%d value(s) signed by it", len(signed)))
	}
	fmt.Fprintf(&b, "refusing to remove key %q: the scan of %s found %s, which could no longer be opened or verified:",
		kid, strings.Join(topics, ", "), strings.Join(found, " and "))
	for _, g := range tokensUnderByOutcome(rep, kid) {
		fmt.Fprintf(&b, "\n  %d %s: %s", g.n, g.outcome, removalAdvice(g.outcome, kid, topics, fields, keyring))
	}
	if len(signed) > 0 {
		fmt.Fprintf(&b, "\n  %d signed: %s", len(signed), signedAdvice(signed))
	}
	return exitcode.RefusedError(errors.New(b.String()))
}

// signedValue is where a value signed by the key being removed is stored.
type signedValue struct {
	Topic     string
	Partition int32
	Offset    int64
	Key       string
	Field     string
	Scope     string // the value's stamped scope
	InToken   bool   // the signed value is the plaintext of a token
}

// signedValuesUnder finds the values of the view that kid signed: a
// flsig:jws: value whose header names kid, and, when kid is an Ed25519
// key, one sealed inside a token the keyring opens (ENCRYPTED(SIGNED(…))).
// A value the scan already attributed to kid (a scanner that reports signed
// values) is not counted twice.
func signedValuesUnder(view *reencrypt.View, rep *reencrypt.ScanReport, fields []reencrypt.Field, kr *secret.Keyring, kid string) []signedValue {
	if view == nil || kr.Type(kid) != secret.TypeEd25519 {
		return nil
	}
	type slotID struct {
		topic     string
		partition int32
		offset    int64
		field     string
	}
	attributed := map[slotID]bool{}
	for _, e := range rep.Entries {
		if e.Kid == kid && e.Status != secret.StatusEncrypted && e.Status != secret.StatusCorrupt && e.Status != secret.StatusPlaintext {
			attributed[slotID{e.Topic, e.Partition, e.Offset, e.Field}] = true
		}
	}
	var out []signedValue
	for _, p := range rep.Partitions {
		for _, r := range view.Partition(reencrypt.TP{Topic: p.Topic, Partition: p.Partition}) {
			slots, err := reencrypt.Slots(r.Value, fields)
			if err != nil {
				continue
			}
			for _, s := range slots {
				var v string
				if s.Raw == nil || json.Unmarshal(s.Raw, &v) != nil {
					continue
				}
				inToken := false
				if secret.IsEncrypted(v) {
					payload, _, err := kr.Open(v, s.Field.Scope)
					if err != nil || json.Unmarshal(payload, &v) != nil {
						continue
					}
					inToken = true
				}
				if !secret.IsSigned(v) || attributed[slotID{r.Topic, r.Partition, r.Offset, s.Label()}] {
					continue
				}
				if h, err := secret.InspectHeader(v); err == nil && h.Kid == kid {
					out = append(out, signedValue{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset,
						Key: string(r.Key), Field: s.Label(), Scope: h.Scope, InToken: inToken})
				}
			}
		}
	}
	return out
}

// signedAdvice says what to do about values signed by the key: no sweep
// re-signs, so it names where they are.
func signedAdvice(vals []signedValue) string {
	var b strings.Builder
	b.WriteString("values signed by this key stop verifying once it is gone, and no sweep re-signs them; " +
		"re-write each with a value signed by its scope's signing key ('flecht secrets sign --scope S VALUE', " +
		"sealed again with 'flecht secrets encrypt' where it sits inside a token), then remove the key:")
	const show = 10
	for i, v := range vals {
		if i == show {
			fmt.Fprintf(&b, "\n      … and %d more", len(vals)-show)
			break
		}
		where := ""
		if v.InToken {
			where = ", inside a token"
		}
		fmt.Fprintf(&b, "\n      %s/%d@%d key %s field %s (scope %q%s)", v.Topic, v.Partition, v.Offset,
			strconv.Quote(v.Key), v.Field, secret.Clip(v.Scope), where)
	}
	return b.String()
}

// outcomeOpen names the tokens that open: the only ones a sweep moves.
const outcomeOpen = "that open"

// outcomeCount is how many tokens under a kid have one scan outcome.
type outcomeCount struct {
	outcome string
	n       int
}

// tokensUnderByOutcome groups the values under kid by what the scan says of
// them: outcomeOpen (the sweep moves them), a decrypt failure kind,
// "corrupt", or any other status the scanner reports (such as signed
// values); in that order, the rest by name.
func tokensUnderByOutcome(rep *reencrypt.ScanReport, kid string) []outcomeCount {
	counts := map[string]int{}
	for _, e := range rep.Entries {
		if e.Kid != kid || e.Status == secret.StatusPlaintext {
			continue
		}
		switch {
		case e.Status == secret.StatusCorrupt:
			counts["corrupt"]++
		case e.Status != secret.StatusEncrypted:
			counts[string(e.Status)]++
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
		return "sweep them to their scope's sealing key first:\n      flecht secrets reencrypt " + targetFlags(topics, fields) + " --keyring " + shellQuote(keyring) + " --execute"
	case string(secret.KindScopeViolation):
		return "in a field of another scope, which refuses them; the sweep cannot move them. Find them (" + scan +
			") and re-write each record with a token of its field's scope, or delete it"
	case string(secret.KindTagMismatch):
		return fmt.Sprintf("this keyring's key %q has other bytes than the one that sealed them, or they were altered; the sweep cannot open them. "+
			"Find them (%s), then recover the keyring that sealed them or re-write each record", kid, scan)
	case string(secret.KindUnknownKid):
		return "the keyring lacks their key; the sweep cannot open them. Add the key from the keyring that sealed them, or re-write each record"
	case "signed":
		return "values it signed stop verifying once it is gone, and no sweep re-signs them. Find them (" + scan +
			") and re-write each with a value signed by its scope's signing key ('flecht secrets sign --scope S VALUE')"
	default:
		return "they cannot be read; the sweep cannot move them. Find them (" + scan + ") and re-write or delete each record"
	}
}
