package lint

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/stagefile"
	"github.com/flecht-dev/flecht/internal/statekey"
	"github.com/flecht-dev/flecht/internal/textfmt"
)

// StateKeyFlags are what `flecht lint state-key` was given, as typed.
type StateKeyFlags struct {
	StageFile   string
	StateKey    string
	Topics      []string
	KeyPattern  string
	Sample      string // records per partition, or "all"
	MaxExamples int
}

// StateKeyPlan is the check the flags ask for: its options, where each
// partition's sample starts and how to describe it, and why the stage is
// exempt ("" when it is not).
type StateKeyPlan struct {
	Options    Options
	Start      kafkax.StartFunc
	SampleDesc string
	Exempt     string
}

// NewStateKeyPlan checks the flags and reads the stage file.
func NewStateKeyPlan(opts StateKeyFlags) (*StateKeyPlan, error) {
	var tmpl *statekey.Template
	topics := opts.Topics
	exempt := ""
	if opts.StageFile != "" {
		st, err := stagefile.Load(opts.StageFile)
		if err != nil {
			return nil, exitcode.UsageError(err)
		}
		tmpl = st.Template
		if len(topics) == 0 {
			topics = st.InputTopics
		}
		if st.Kind != stagefile.KindTransformer {
			exempt = fmt.Sprintf("%s is an %s stage: extractors are exempt from the rule, since their ownership is computed from the state key rather than from partition placement", opts.StageFile, st.Kind)
		}
	}
	if opts.StateKey != "" {
		t, err := statekey.Parse(opts.StateKey)
		if err != nil {
			return nil, exitcode.UsageError(err)
		}
		tmpl = t
	}
	if tmpl == nil {
		return nil, exitcode.Usagef("give --state-key TEMPLATE or -f stage.yaml")
	}
	var alpha *KeyAlphabet
	if opts.KeyPattern != "" {
		a, err := ParseKeyPattern(opts.KeyPattern)
		if err != nil {
			return nil, exitcode.UsageError(err)
		}
		alpha = a
	}
	start := kafkax.FromLogStart
	sampleDesc := "all records"
	if opts.MaxExamples < 1 {
		return nil, exitcode.Usagef("--max-examples must be at least 1, got %d", opts.MaxExamples)
	}
	if s := strings.TrimSpace(opts.Sample); !strings.EqualFold(s, "all") {
		n, err := strconv.ParseInt(strings.ReplaceAll(s, "_", ""), 10, 64)
		if err != nil || n < 1 {
			return nil, exitcode.Usagef("--sample %q: want a number of records per partition, or all", opts.Sample)
		}
		start = kafkax.LastN(n)
		sampleDesc = "last " + strconv.FormatInt(n, 10) + " offsets per partition"
	}
	for _, t := range topics {
		if strings.TrimSpace(t) == "" {
			return nil, exitcode.Usagef("--topics has an empty topic name")
		}
	}

	o := Options{Template: tmpl, Alphabet: alpha, Topics: textfmt.Dedupe(topics), MaxExamples: opts.MaxExamples}
	return &StateKeyPlan{Options: o, Start: start, SampleDesc: sampleDesc, Exempt: exempt}, nil
}
