package cli

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/module"
	"github.com/flecht-dev/flecht/internal/module/testrun"
	"github.com/flecht-dev/flecht/internal/show"
	"github.com/flecht-dev/flecht/internal/textfmt"
	"github.com/flecht-dev/flecht/internal/ui"
)

// TransformTestOptions are the inputs of `flecht transform test`.
type TransformTestOptions struct {
	IO           *ui.IOStreams
	Printer      func() *ui.Printer
	Format       func() ui.Format
	Module       string
	StageFile    string
	Input        string
	State        string
	Configs      string
	Expect       string
	Config       string
	OutputTopics []string
	StateKey     string
	Isolation    string
	Partitions   int
	Determinism  bool
	Log          *slog.Logger
	// CacheDir keeps compiled modules (FLECHT_CACHE_DIR).
	CacheDir string
	// OnStuck ends the process when a module call cannot be stopped.
	OnStuck func(error)
}

var transformTestLong = `Run a module over sample records, without Kafka, as 'flecht run' runs it:
one instance per input partition, set up with that partition and given the
partition's records in input order, the same checks of what it answers, its
state carried from record to record per state key, its config records
looked up in --configs. It is the unit test of a transform, for a laptop
and for CI.

--input is JSON lines, one record each ("-" reads standard input):

    {"key": "dev-1", "value": {"t": 21.5}, "timestamp": "2026-01-01T00:00:00Z"}
    {"key": "dev-1", "value": null}

value is the record's JSON value (null: a tombstone), written to the module
byte for byte as it stands in the line; value_text or value_base64 give
bytes that are not JSON. Optional: topic (default the stage file's first
input topic, or "input" with -m), partition, offset (counting per
partition), timestamp (milliseconds or RFC 3339; the module's clock reads
it), headers ({"name": "value"}), and a null key. A key is its bytes: one
that is not UTF-8 (raw in the line) is an invalid message, as in 'flecht
run'.

A record without a partition goes where Kafka's default partitioner puts
its key among --partitions partitions (murmur2 of the key); a null key,
which Kafka spreads by batch, goes to partition 0. Give --partitions the
input topics' partition count to place keys as Kafka does; without it, the
count is the input's largest partition + 1, or 1 (every record on
partition 0) when no line names one.

The module and its setup come from -f stage.yaml (transform.module, its
config and output_topics, and the stage's state_key), or from -m with
--config, --output-topics and --state-key. --state starts from given state
({"state key": {...}}; every partition starts from it), --configs gives the
config records ({"config key": {...}}).

Each record's result is printed in input order: its outputs, its state
before and after, and its verdict (ok, rejected by the module, or invalid
before reaching it). -o json prints one JSON line per record, which is the
format of --expect: with it, the results are compared with the file's, and
a difference exits 4 with a diff (a file without a result, which would
check nothing, exits 2). A module that fails (a trap, an error, its time
limit) exits 1, naming the record.

--determinism is the check to run before shipping a module. Each record
that reached the module runs twice more, alone and from the state it had:
on a fresh instance of its partition, and on a fresh instance set up as the
next partition. Instead of the results (after --expect's comparison, if
given), it prints every field where the test's run and the fresh instance
disagree (what the module carried over from the records before) and where
the two fresh instances disagree (what it took from its partition), naming
the line, topic/partition@offset and the field's JSON path with both
values; -o json prints the report as one JSON document. A difference exits
4, none exits 0. Each record costs two more instances of the module
(milliseconds each): the check takes up to ` + strconv.Itoa(testrun.MaxDeterminismRecords) + ` records that
reach the module; check a sample of a larger file.`

// NewCmdTransformTest builds `flecht transform test`.
func NewCmdTransformTest(f *Factory, runF func(*TransformTestOptions) error) *cobra.Command {
	opts := &TransformTestOptions{IO: f.IO, Printer: f.Printer, Format: func() ui.Format { return f.format }, CacheDir: module.CacheDirFrom(f.Getenv)}
	cmd := &cobra.Command{
		Use:   "test (-m MODULE.wasm | -f stage.yaml) --input records.jsonl [--expect expected.jsonl]",
		Short: "Run a module over sample records offline and compare what it answers",
		Long:  transformTestLong,
		Example: `  flecht transform test -m count.wasm --output-topics counted --input records.jsonl
  flecht transform test -f enrich.yaml --input records.jsonl --configs devices.json --expect expected.jsonl
  flecht transform test -m alarm.wasm --output-topics alarms --config '{"field":"t","high":30,"low":25}' \
    --input readings.jsonl -o json > expected.jsonl
  flecht transform test -f stage.yaml --input records.jsonl --partitions 6 --determinism`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.Log = runLogger(f)
			opts.OnStuck = stuckModuleExits(f, opts.Log)
			if runF != nil {
				return runF(opts)
			}
			return runTransformTest(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&opts.Module, "module", "m", "", "the module file (.wasm)")
	fl.StringVarP(&opts.StageFile, "file", "f", "", "take the module, its config, output_topics and the state_key from this stage file")
	fl.StringVar(&opts.Input, "input", "", "input records, JSON lines (- for standard input)")
	fl.StringVar(&opts.State, "state", "", "JSON file of starting state: {\"state key\": {...}, ...}")
	fl.StringVar(&opts.Configs, "configs", "", "JSON file of config records: {\"config key\": {...}, ...}")
	fl.StringVar(&opts.Expect, "expect", "", "JSON lines of expected results (what -o json prints); a difference exits 4")
	fl.StringVar(&opts.Config, "config", "", "the module's config as JSON, or @FILE (with -m; default {})")
	fl.StringSliceVar(&opts.OutputTopics, "output-topics", nil, "topics the module may write to (with -m; default output)")
	fl.StringVar(&opts.StateKey, "state-key", "", "state-key template (with -m; default {key})")
	fl.StringVar(&opts.Isolation, "isolation", "", "record or task, as transform.isolation (with -m; default record)")
	fl.IntVar(&opts.Partitions, "partitions", 0, "the input topics' partition count, over which keys are placed (default: the input's largest partition + 1, or 1)")
	fl.BoolVar(&opts.Determinism, "determinism", false, "also run each record alone on fresh instances of its partition and another, and report every field that differs")
	return cmd
}

func runTransformTest(ctx context.Context, opts *TransformTestOptions) error {
	if opts.Input == "" {
		return exitcode.Usagef("give the records with --input records.jsonl (- for standard input)")
	}
	if opts.Partitions < 0 || int64(opts.Partitions) > kafkax.MaxPartitions {
		return exitcode.Usagef("--partitions %d: give the input topics' partition count, 1 or more (0: from the input)", opts.Partitions)
	}
	setup, err := testrun.SetupFrom(testrun.Flags{StageFile: opts.StageFile, Module: opts.Module, Config: opts.Config, OutputTopics: opts.OutputTopics, StateKey: opts.StateKey, Isolation: opts.Isolation})
	if err != nil {
		return err
	}
	in, err := testrun.ReadInput(opts.Input, opts.IO.In, setup.InputTopic, opts.Partitions)
	if err != nil {
		return exitcode.Usagef("--input: %w", err)
	}
	configs, err := testrun.ReadKeyedObjects(opts.Configs, "--configs")
	if err != nil {
		return err
	}
	start, err := testrun.ReadKeyedObjects(opts.State, "--state")
	if err != nil {
		return err
	}
	var expected [][]byte
	if opts.Expect != "" {
		if expected, err = testrun.ReadExpected(opts.Expect); err != nil {
			return exitcode.Usagef("--expect: %w", err)
		}
	}
	tester, err := testrun.Load(ctx, setup.Spec, setup.Template, start, testrun.Options{
		CacheDir: opts.CacheDir, Log: opts.Log.With("test", true), OnStuck: opts.OnStuck,
		Configs: func(key string) ([]byte, bool) { b, ok := configs[key]; return b, ok }})
	if err != nil {
		return err
	}
	defer tester.Close(ctx)
	res := tester.Run(ctx, in)
	if !opts.Determinism || res.Err != nil {
		if err := printTransformCases(opts, res.Cases); err != nil {
			return err
		}
	}
	if res.Err != nil {
		return fmt.Errorf("%s: %w", opts.Input, res.Err)
	}
	if expected != nil {
		if diff := testrun.Diff(res.Cases, expected); diff != "" {
			fmt.Fprintf(opts.IO.ErrOut, "the results differ from %s:\n%s", textfmt.Escape(opts.Expect), textfmt.Text(diff))
			return &exitcode.Silent{Code: exitcode.Findings}
		}
		if opts.Format() == ui.FormatTable {
			fmt.Fprintf(opts.IO.Out, "\nall %d records as %s expects\n", len(res.Cases), textfmt.Escape(opts.Expect))
		}
	}
	if opts.Determinism {
		return checkDeterminism(ctx, opts, tester, in, res)
	}
	return nil
}

// checkDeterminism prints the determinism report; a difference exits 4,
// as a check that found problems.
func checkDeterminism(ctx context.Context, opts *TransformTestOptions, tester *testrun.Tester, in testrun.Input, res testrun.Result) error {
	rep, err := tester.CheckDeterminism(ctx, in, res)
	if err != nil {
		return fmt.Errorf("%s: %w", opts.Input, err)
	}
	if err := opts.Printer().Print(rep, func(h *ui.Human) error { show.DeterminismReport(h, rep); return nil }); err != nil {
		return err
	}
	if len(rep.Differences) > 0 {
		return &exitcode.Silent{Code: exitcode.Findings}
	}
	return nil
}

func printTransformCases(opts *TransformTestOptions, cases []testrun.Case) error {
	p := opts.Printer()
	if p.Format != ui.FormatTable {
		for _, c := range cases {
			if err := p.PrintStream(c); err != nil {
				return err
			}
		}
		return nil
	}
	show.TransformCases(p.Human(), cases)
	return nil
}
