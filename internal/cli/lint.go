package cli

import (
	"context"
	"strings"

	"github.com/spf13/cobra"

	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/lint"
	"github.com/flecht-dev/flecht/internal/show"
	"github.com/flecht-dev/flecht/internal/ui"
)

// NewCmdLint builds `flecht lint`, the parent of the pipeline checks.
func NewCmdLint(f *Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "lint <check>",
		Short: "Check a pipeline for problems that nothing else detects",
		Long: `Checks for mistakes that run without an error and quietly produce wrong
results. Each check exits 0 when clean and 4 when it found problems, so it
can gate a deploy in CI.`,
		Args: usageArgs(cobra.NoArgs),
	}
	cmd.AddCommand(NewCmdLintStateKey(f, nil), NewCmdLintTopics(f, nil))
	return cmd
}

// LintStateKeyOptions are the inputs of `flecht lint state-key`.
type LintStateKeyOptions struct {
	IO          *ui.IOStreams
	Printer     func() *ui.Printer
	StateKey    string
	StageFile   string
	Topics      []string
	Sample      string
	KeyPattern  string
	MaxExamples int
	// SampleTopics reads the topics through the checker.
	SampleTopics func(ctx context.Context, o lint.Options, start kafkax.StartFunc, planned, add func(int64)) (*lint.Report, error)
}

const lintStateKeyLong = `Check the rule that keeps a transformer's state whole: a state key may
refine the message key, never coarsen it,

    state_key(a) == state_key(b)  ⇒  partition(a) == partition(b)

Otherwise every partition builds its own shard of one logical state entry,
and nothing errors (the silent split).

The template is --state-key (the stage-file language: {key}, {value.PATH},
literal text, {{ and }} for braces) or the state_key of -f stage.yaml.

1. Static verdict, from the template alone:
   refines   the message key is recoverable from the state key ({key} with
             fixed text, or {key} cut off by a separator that keys never
             contain: declare the key alphabet with --key-pattern to prove it)
   coarsens  no {key}: a problem by construction
   unknown   {key} is there but may not be recoverable; an example collision
             shows how (key "a:b" + device "c" vs key "a" + device "b:c")
2. Proof on data, by sampling --topics (the stage's input_topics with -f):
   every state key seen on more than one partition number is a violation,
   listed with its records (topic, partition, offset, key, state key).
3. Co-partitioning across several input topics: equal partition counts,
   and each key on the same partition number in every topic.
4. Partitioner: keys not on the partition Kafka's default murmur2
   partitioner gives them (typically a librdkafka producer with its default
   CRC32 partitioner, or a partition count changed after the fact): they
   break co-partitioning with Java and franz-go producers.

--sample N reads the last N offsets of every partition; --sample all reads
everything. Exit 0 when clean, 4 with findings. Extractor and MQTT stages
are exempt (their ownership follows the state key).`

// NewCmdLintStateKey builds `flecht lint state-key`.
func NewCmdLintStateKey(f *Factory, runF func(*LintStateKeyOptions) error) *cobra.Command {
	opts := &LintStateKeyOptions{IO: f.IO, Printer: f.Printer}
	opts.SampleTopics = func(ctx context.Context, o lint.Options, start kafkax.StartFunc, planned, add func(int64)) (*lint.Report, error) {
		cl, _, err := f.Kafka(ctx)
		if err != nil {
			return nil, err
		}
		defer cl.Close()
		return lint.SampleTopics(ctx, cl, o, start, planned, add)
	}
	cmd := &cobra.Command{
		Use:   "state-key (--state-key TEMPLATE | -f stage.yaml) [--topics T,...]",
		Short: "Check that a state key refines the message key, on the template and on data",
		Long:  lintStateKeyLong,
		Example: `  flecht lint state-key --state-key '{value.tenant}'
  flecht lint state-key --state-key '{key}/{value.device}' --topics sensors.raw --key-pattern '[a-z0-9:-]+'
  flecht lint state-key -f enrich.yaml --sample all -o json`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(opts)
			}
			return runLintStateKey(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.StateKey, "state-key", "", "state-key template, e.g. '{key}/{value.device}'")
	fl.StringVarP(&opts.StageFile, "file", "f", "", "take the state key and input topics from this stage file")
	fl.StringSliceVar(&opts.Topics, "topics", nil, "input topics to sample, comma-separated")
	fl.StringVar(&opts.Sample, "sample", "1000", "offsets to read per partition, from the end, or 'all' (any case)")
	fl.StringVar(&opts.KeyPattern, "key-pattern", "", "regular expression every message key matches in full (makes separators provable)")
	fl.IntVar(&opts.MaxExamples, "max-examples", 20, "records listed per kind of finding")
	return cmd
}

func runLintStateKey(ctx context.Context, opts *LintStateKeyOptions) error {
	plan, err := lint.NewStateKeyPlan(lint.StateKeyFlags{StageFile: opts.StageFile, StateKey: opts.StateKey, Topics: opts.Topics,
		KeyPattern: opts.KeyPattern, Sample: opts.Sample, MaxExamples: opts.MaxExamples})
	if err != nil {
		return err
	}
	o, start, sampleDesc, exempt := plan.Options, plan.Start, plan.SampleDesc, plan.Exempt
	var rep *lint.Report
	if len(o.Topics) == 0 || exempt != "" {
		rep = lint.NewChecker(o).Report()
	} else {
		p := ui.NewProgress(opts.IO, "sampling "+strings.Join(o.Topics, ", "))
		var err error
		rep, err = opts.SampleTopics(ctx, o, start, p.SetTotal, p.Add)
		p.Done()
		if err != nil {
			return err
		}
		rep.Sample = sampleDesc
	}
	if exempt != "" {
		rep.Exempt = true
		rep.Findings = 0
		rep.Warnings = append(rep.Warnings, exempt)
	} else if len(o.Topics) == 0 {
		rep.Warnings = append(rep.Warnings, "no topics sampled: give --topics (or a stage file with input_topics) for the proof on data")
	}

	return printCheck(opts.Printer(), rep, func(h *ui.Human) error { return show.Lint(h, rep) }, rep.Findings > 0)
}

// printCheck prints the report of a command that checks something, then
// exits 4 when the check found problems (silently: the report says so).
func printCheck(p *ui.Printer, rep any, human func(*ui.Human) error, found bool) error {
	if err := p.Print(rep, human); err != nil {
		return err
	}
	if found {
		return &exitcode.Silent{Code: exitcode.Findings}
	}
	return nil
}
