package lint

import (
	"strings"

	"github.com/flecht-dev/flecht/internal/budget"
	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/stagefile"
	"github.com/flecht-dev/flecht/internal/textfmt"
)

// TopicsFlags are what `flecht lint topics` was given, as typed.
type TopicsFlags struct {
	StageFile     string
	ApplicationID string
	Raw           []string
	ConfigTopics  []string
	Input         []string
	MinRetention  string
}

// lintTopicsSpec turns the flags (and the stage file) into what to check,
// every name validated: the stage file's roles (lint.SpecFromStage), each
// list replaced by its flag when given.
// TopicsSpecFrom checks the flags of `flecht lint topics` and reads the
// stage file: the topics to check, and the application id.
func TopicsSpecFrom(opts TopicsFlags) (spec TopicsSpec, app string, err error) {
	app = strings.TrimSpace(opts.ApplicationID)
	var st *stagefile.Stage
	if opts.StageFile != "" {
		if st, err = stagefile.LoadFor(opts.StageFile, app, "--application-id"); err != nil {
			return spec, app, err
		}
		app = st.ApplicationID
		if spec, err = SpecFromStage(st); err != nil {
			return spec, app, exitcode.Usagef("%s: %w", opts.StageFile, err)
		}
	} else if app != "" {
		spec.Changelog = stagefile.ChangelogTopic(app)
	}
	if len(opts.Raw) > 0 {
		spec.Raw, spec.RawFromConfigs = textfmt.Dedupe(opts.Raw), false
	}
	if len(opts.ConfigTopics) > 0 {
		spec.Config = textfmt.Dedupe(opts.ConfigTopics)
	}
	if len(opts.Input) > 0 {
		spec.Input = textfmt.Dedupe(opts.Input)
	}
	// The changelog has one partition per task: per input partition of a
	// transformer, per config partition of an extractor.
	switch {
	case st == nil && app != "", st != nil && st.Kind == stagefile.KindTransformer:
		spec.TaskTopics = spec.Input
	case st != nil && st.Kind == stagefile.KindExtractor:
		spec.TaskTopics = spec.Config
	}
	if st != nil && st.Kind == stagefile.KindTransformer && st.InvalidMessages == stagefile.InvalidDLQ {
		spec.DLQ = nil
		for _, t := range spec.Input {
			spec.DLQ = append(spec.DLQ, stagefile.DLQTopic(t))
		}
	}
	if len(spec.Raw)+len(spec.Config)+len(spec.Input)+len(spec.DLQ) == 0 && spec.Changelog == "" {
		return spec, app, exitcode.Usagef("give -f stage.yaml, or topics with --raw, --config-topics and --input")
	}
	if err := stagefile.CheckNames(app, spec.Raw, spec.Config, spec.Input); err != nil {
		return spec, app, err
	}
	if opts.MinRetention != "" {
		d, err := budget.ParseDuration(opts.MinRetention)
		if err != nil || d <= 0 {
			return spec, app, exitcode.Usagef("--min-retention %q: want a duration such as 30d or 8760h", opts.MinRetention)
		}
		spec.MinRetention = d
	}
	return spec, app, nil
}
