package replay

import (
	"strconv"
	"strings"
	"time"

	"github.com/flecht-dev/flecht/internal/budget"
	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/stage"
	"github.com/flecht-dev/flecht/internal/stagefile"
	"github.com/flecht-dev/flecht/internal/status"
	"github.com/flecht-dev/flecht/internal/textfmt"
	"github.com/flecht-dev/flecht/internal/transformer/builtin"
)

// Flags are what `flecht replay` was given, as typed: NewRequest parses
// them, so that a bad value is a usage error naming its flag.
type Flags struct {
	ApplicationID      string
	StageFile          string
	InputTopics        []string
	IntermediateTopics []string
	OutputTopics       []string
	KeepOutputs        bool
	TruncateOutputs    bool
	StateDir           string
	ToEarliest         bool
	ToDatetime         string
	ByDuration         string
	ToOffset           string
	FromFile           string
	Wait               string
	Now                func() time.Time // the clock of --by-duration (nil: time.Now)
}

// NewRequest turns the flags (and the stage file) into a request, and the
// time --wait gives the group to empty.
func NewRequest(opts Flags) (Request, time.Duration, error) {
	req := Request{
		ApplicationID:      strings.TrimSpace(opts.ApplicationID),
		Kind:               KindTransformer,
		InputTopics:        textfmt.Dedupe(opts.InputTopics),
		IntermediateTopics: textfmt.Dedupe(opts.IntermediateTopics),
	}
	if opts.StageFile != "" {
		st, err := stagefile.LoadFor(opts.StageFile, req.ApplicationID, "the application id")
		if err != nil {
			return req, 0, err
		}
		req.ApplicationID = st.ApplicationID
		switch st.Kind {
		case stagefile.KindTransformer:
			if len(opts.InputTopics) == 0 {
				req.InputTopics = st.InputTopics
			}
			// The topics the stage file declares it reads back what it
			// writes go to their end, as --intermediate-topics do.
			req.IntermediateTopics = textfmt.Dedupe(append(req.IntermediateTopics, st.IntermediateTopics...))
			req.Module, req.StageFile = status.StageModule(st), opts.StageFile
			outs, err := StageOutputs(st)
			if err != nil {
				return req, 0, exitcode.Usagef("stage %s: %w", st.Path, err)
			}
			req.OutputTopics, req.OutputsKnown = outs, true
		case stagefile.KindExtractor:
			req.Kind = KindExtractor
			req.ConfigTopics = st.ConfigTopics
		default:
			return req, 0, exitcode.Usagef("%s is an %s stage: it keeps no state and reads no Kafka input, so there is nothing to replay", opts.StageFile, st.Kind)
		}
	}
	if req.ApplicationID == "" {
		return req, 0, exitcode.Usagef("give the application id (flecht replay APP) or -f stage.yaml")
	}
	if len(opts.OutputTopics) > 0 {
		if err := stagefile.CheckNames("", opts.OutputTopics); err != nil {
			return req, 0, err
		}
		req.OutputTopics, req.OutputsKnown = nil, true
		for _, t := range textfmt.Dedupe(opts.OutputTopics) {
			req.OutputTopics = append(req.OutputTopics, OutputTopic{Topic: t, Role: RoleOutput})
		}
	}
	switch {
	case opts.KeepOutputs && opts.TruncateOutputs:
		return req, 0, exitcode.Usagef("give one of --keep-outputs and --truncate-outputs")
	case opts.KeepOutputs:
		req.OutputPolicy = OutputsKeep
	case opts.TruncateOutputs:
		if !req.OutputsKnown {
			return req, 0, exitcode.Usagef("--truncate-outputs needs the output topics: -f stage.yaml or --output-topics T,...")
		}
		req.OutputPolicy = OutputsTruncate
	}
	if err := stagefile.CheckNames(req.ApplicationID); err != nil {
		return req, 0, err
	}
	if req.Kind == KindTransformer && len(req.InputTopics) == 0 {
		return req, 0, exitcode.Usagef("give the input topics: --input-topics T,... or -f stage.yaml")
	}
	if err := stagefile.CheckNames("", req.InputTopics, req.IntermediateTopics); err != nil {
		return req, 0, err
	}
	intermediate := map[string]bool{}
	for _, t := range req.IntermediateTopics {
		intermediate[t] = true
	}
	var inputs []string
	for _, t := range req.InputTopics {
		switch {
		case !intermediate[t]:
			inputs = append(inputs, t)
		case len(opts.InputTopics) > 0:
			return req, 0, exitcode.Usagef("%s is both an input and an intermediate topic", t)
		}
		// A stage file's input that --intermediate-topics names is
		// read by the stage but moved to its end, not replayed.
	}
	req.InputTopics = inputs
	if req.Kind == KindTransformer && len(req.InputTopics) == 0 {
		return req, 0, exitcode.Usagef("every input topic is an intermediate topic: nothing to replay from")
	}

	// Exactly one target.
	set := 0
	for _, on := range []bool{opts.ToEarliest, opts.ToDatetime != "", opts.ByDuration != "", opts.ToOffset != "", opts.FromFile != ""} {
		if on {
			set++
		}
	}
	if set > 1 {
		return req, 0, exitcode.Usagef("give one target: --to-earliest, --to-datetime, --by-duration, --to-offset or --from-file")
	}
	now := time.Now
	if opts.Now != nil {
		now = opts.Now
	}
	switch {
	case opts.ToDatetime != "":
		ts, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(opts.ToDatetime))
		if err != nil {
			return req, 0, exitcode.Usagef("--to-datetime %q: want an RFC 3339 time such as 2026-01-02T15:04:05Z", opts.ToDatetime)
		}
		req.Target = Target{Kind: TargetDatetime, Time: ts}
	case opts.ByDuration != "":
		d, err := budget.ParseDuration(opts.ByDuration)
		if err != nil || d <= 0 {
			return req, 0, exitcode.Usagef("--by-duration %q: want a duration such as 36h or 7d", opts.ByDuration)
		}
		req.Target = Target{Kind: TargetDuration, Duration: d, Time: now().Add(-d)}
	case opts.ToOffset != "":
		n, err := strconv.ParseInt(strings.TrimSpace(opts.ToOffset), 10, 64)
		if err != nil || n < 0 {
			return req, 0, exitcode.Usagef("--to-offset %q: want an offset, 0 or more", opts.ToOffset)
		}
		req.Target = Target{Kind: TargetOffset, Offset: n}
	case opts.FromFile != "":
		offs, err := ReadOffsetsFile(opts.FromFile)
		if err != nil {
			return req, 0, exitcode.Usagef("--from-file: %w", err)
		}
		req.Target = Target{Kind: TargetFile, File: offs, FilePath: opts.FromFile}
	default:
		req.Target = Target{Kind: TargetEarliest}
	}

	var wait time.Duration
	if opts.Wait != "" {
		d, err := budget.ParseDuration(opts.Wait)
		if err != nil {
			return req, 0, exitcode.Usagef("--wait %q: want a duration such as 90s or 5m", opts.Wait)
		}
		wait = d
	}
	req.StateDir = opts.StateDir
	if req.StateDir == "" {
		if req.StateDir = stage.DefaultStateDir(req.ApplicationID); req.StateDir == "" {
			return req, 0, exitcode.UsageError(stagefile.CheckApplicationID(req.ApplicationID))
		}
	}
	return req, wait, nil
}

// StageOutputs are the topics a transformer's stage file writes: its
// transform's outputs and, with invalid_messages: dlq, the dead-letter
// topics of its inputs (builtin.StageWrites, what flecht run checks too).
func StageOutputs(st *stagefile.Stage) ([]OutputTopic, error) {
	w, err := builtin.StageWrites(st)
	if err != nil {
		return nil, err
	}
	var out []OutputTopic
	for _, t := range w.Outputs {
		out = append(out, OutputTopic{Topic: t, Role: RoleOutput})
	}
	for _, t := range w.DeadLetters {
		out = append(out, OutputTopic{Topic: t, Role: RoleDeadLetter})
	}
	return out, nil
}
