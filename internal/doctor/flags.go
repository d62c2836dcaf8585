package doctor

import (
	"fmt"
	"time"

	"github.com/flecht-dev/flecht/internal/budget"
	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/promscrape"
	"github.com/flecht-dev/flecht/internal/secret"
	"github.com/flecht-dev/flecht/internal/stagefile"
	"github.com/flecht-dev/flecht/internal/status"
	"github.com/flecht-dev/flecht/internal/transformer"
	"github.com/flecht-dev/flecht/internal/transformer/builtin"
)

// Flags are what `flecht doctor` was given, as typed.
type Flags struct {
	ApplicationID string
	StageFile     string
	MetricsURLs   []string
	Interval      string
	IntervalGiven bool
	QueueLimit    int64
	MinBudget     string
	MinRetention  string
	// DLQSince acknowledges older dead letters: a time (RFC 3339) or a
	// duration ago; empty: none.
	DLQSince string
	// Now is the clock DLQSince's duration counts back from (nil:
	// time.Now).
	Now func() time.Time
	// Keyring opens the keyring the instances should hold (nil: none given).
	Keyring func() (*secret.Keyring, error)
}

// doctorInputs turns the flags into the doctor's inputs, refusing what is
// wrong before anything connects.
// NewInputs checks the flags and reads the stage file (and the module or
// builtin it runs, and the keyring when the stage loads one): what Run
// checks.
func NewInputs(opts Flags) (Inputs, error) {
	var in Inputs
	if opts.StageFile == "" {
		return in, exitcode.Usagef("give the stage file with -f stage.yaml: the doctor checks what it declares")
	}
	st, err := stagefile.LoadFor(opts.StageFile, opts.ApplicationID, "the application id")
	if err != nil {
		return in, err
	}
	in.Stage = st
	if st.Kind == stagefile.KindTransformer {
		// Only the builtin knows whether it keeps state (and so has a
		// changelog to miss); a module's stage file says so.
		if m := st.Transform.Module; m != nil {
			in.Stateless = m.Stateless
			in.Module = status.ReadModuleFile(m)
		} else {
			tf, err := builtin.NewTransformer(st.Transform, builtin.Env{Configs: builtin.NoConfigs{}})
			if err != nil {
				return in, exitcode.Usagef("stage %s: %w", st.Path, err)
			}
			if s, ok := tf.(transformer.Stateless); ok && s.Stateless() {
				in.Stateless = true
			}
		}
	}
	if in.MetricsURLs, err = promscrape.URLs(opts.MetricsURLs); err != nil {
		return in, exitcode.Usagef("--metrics-url: %v", err)
	}
	if len(in.MetricsURLs) == 0 && st.Metrics != nil && st.Metrics.Listen != "" {
		// The stage file says where its instance serves metrics: use it
		// (as seen from this host) rather than skip the metric checks.
		in.MetricsURLs, in.MetricsFromStage = []string{promscrape.ListenURL(st.Metrics.Listen)}, true
	}
	if in.Interval, err = budget.ParseDuration(opts.Interval); err != nil || in.Interval <= 0 {
		return in, exitcode.Usagef("--interval %q: want a duration above 0 such as 10s", opts.Interval)
	}
	in.IntervalGiven = opts.IntervalGiven
	if in.MinBudget, err = budget.ParseDuration(opts.MinBudget); err != nil || in.MinBudget < 0 {
		return in, exitcode.Usagef("--min-budget %q: want a duration such as 5m", opts.MinBudget)
	}
	if opts.MinRetention != "" {
		if in.MinRetention, err = budget.ParseDuration(opts.MinRetention); err != nil || in.MinRetention <= 0 {
			return in, exitcode.Usagef("--min-retention %q: want a duration such as 30d or 8760h", opts.MinRetention)
		}
	}
	if opts.DLQSince != "" {
		if in.DLQSince, err = parseSince(opts.DLQSince, opts.Now); err != nil {
			return in, exitcode.Usagef("--dlq-since %q: want a time such as 2026-12-04T18:00:00Z, or a duration ago such as 30m", opts.DLQSince)
		}
	}
	if opts.QueueLimit <= 0 {
		return in, exitcode.Usagef("--queue-limit %d: want the broker's per-session queue in messages, above 0", opts.QueueLimit)
	}
	in.QueueLimit = opts.QueueLimit
	// Only a stage that loads a keyring is checked against one: a bridge
	// is not, so its --keyring (or FLECHT_KEYRING) is not even opened.
	if opts.Keyring != nil && LoadsKeyring(st.Kind) {
		kr, err := opts.Keyring()
		if err != nil {
			return in, exitcode.Usagef("--keyring: %w", err)
		}
		in.Kids = kr.Kids()
	}
	if err := stagefile.CheckNames(st.ApplicationID, nil); err != nil {
		return in, err
	}
	return in, nil
}

// parseSince reads a time (RFC 3339) or a duration before now.
func parseSince(v string, now func() time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	d, err := budget.ParseDuration(v)
	if err != nil || d <= 0 {
		return time.Time{}, fmt.Errorf("not a time or a duration above 0")
	}
	if now == nil {
		now = time.Now
	}
	return now().Add(-d), nil
}
