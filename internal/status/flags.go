package status

import (
	"strings"
	"time"

	"github.com/flecht-dev/flecht/internal/budget"
	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/promscrape"
	"github.com/flecht-dev/flecht/internal/stagefile"
	"github.com/flecht-dev/flecht/internal/textfmt"
)

// Flags are what `flecht status` was given, as typed.
type Flags struct {
	ApplicationID string
	StageFile     string
	InputTopics   []string
	ClientIDs     []string
	MetricsURLs   []string
	Interval      string
	Watch         bool
}

// NewRequest checks the flags and reads the stage file: the request, and
// the time between two samples.
func NewRequest(opts Flags) (Request, time.Duration, error) {
	req := Request{ApplicationID: strings.TrimSpace(opts.ApplicationID), InputTopics: textfmt.Dedupe(opts.InputTopics), ClientIDs: textfmt.Dedupe(opts.ClientIDs)}
	if opts.StageFile != "" {
		st, err := stagefile.LoadFor(opts.StageFile, req.ApplicationID, "the application id")
		if err != nil {
			return req, 0, err
		}
		req.ApplicationID = st.ApplicationID
		req.Kind = st.Kind
		if st.Kind == stagefile.KindExtractor {
			req.ConfigTopics = st.ConfigTopics
		}
		if len(req.InputTopics) == 0 {
			req.InputTopics = st.InputTopics
		}
		req.StageFile = textfmt.ShellQuote(opts.StageFile)
		if len(opts.MetricsURLs) > 0 {
			req.Expect = Expected(st, ReadModuleFile(StageModule(st)))
		}
	}
	if req.ApplicationID == "" {
		return req, 0, exitcode.Usagef("give the application id (flecht status APP) or -f stage.yaml")
	}
	if err := stagefile.CheckNames(req.ApplicationID, req.InputTopics); err != nil {
		return req, 0, err
	}
	interval, err := budget.ParseDuration(opts.Interval)
	if err != nil {
		return req, 0, exitcode.Usagef("--interval %q: want a duration such as 5s", opts.Interval)
	}
	if opts.Watch && interval <= 0 {
		return req, 0, exitcode.Usagef("--watch needs an --interval above 0")
	}
	if req.MetricsURLs, err = promscrape.URLs(opts.MetricsURLs); err != nil {
		return req, 0, exitcode.Usagef("--metrics-url: %v", err)
	}
	return req, interval, nil
}
