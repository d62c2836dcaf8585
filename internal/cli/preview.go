package cli

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/flecht-dev/flecht/internal/budget"
	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/module"
	"github.com/flecht-dev/flecht/internal/offline"
	"github.com/flecht-dev/flecht/internal/preview"
	"github.com/flecht-dev/flecht/internal/show"
	"github.com/flecht-dev/flecht/internal/stagefile"
	"github.com/flecht-dev/flecht/internal/ui"
)

// PreviewOptions are the inputs of `flecht preview`.
type PreviewOptions struct {
	IO         *ui.IOStreams
	Printer    func() *ui.Printer
	StageFile  string
	Module     string
	Candidate  string
	ToDatetime string
	ByDuration string
	MaxRecords int64
	Examples   int
	Now        func() time.Time
	CacheDir   string
	Log        *slog.Logger
	OnStuck    func(error)
	Cluster    func() (*kafkax.Cluster, error)
}

const previewLong = `Show what a change of a transformer's logic would do to its outputs,
before 'flecht replay --execute' rewrites them. The stage's current logic
and the candidate (--module NEW.wasm for a stage that runs a module, or
--stage NEW.yaml: the changed stage file, a builtin's new options say) run
over the same input, each from the same empty state, with the runner's own
per-record path: read_committed, one lane per input partition, config
topics read to their end first. Nothing is written to Kafka and no group is
joined: the stage may keep running.

The input is what the replay would read: by default the whole history of
the input topics; --to-datetime and --by-duration start it where the
replay's flags of the same name reset to, --max-records reads at most N
records of each input partition.

Each record either logic would write is matched with the other's by its
source record and its place among that record's outputs. The report:
inputs read; per output topic the outputs identical, changed, only in the
current logic's and only in the candidate's; the changed fields by path
(value.reading.unit, key, partition, headers.NAME) with their counts; the
state keys whose final state differs; the dead letters that appear or
disappear; and the first --examples of each, with both sides. Lineage
headers and a dead letter's time are not compared.

Exit 0 when the candidate changes nothing, 4 when it changes something (a
CI gate for logic changes), 1 when either logic would stop the stage on the
input (an invalid message under invalid_messages: crash, a module that
fails), naming the record.`

// NewCmdPreview builds `flecht preview`.
func NewCmdPreview(f *Factory, runF func(*PreviewOptions) error) *cobra.Command {
	opts := &PreviewOptions{IO: f.IO, Printer: f.Printer, Now: time.Now, CacheDir: module.CacheDirFrom(f.Getenv), Cluster: f.Cluster}
	cmd := &cobra.Command{
		Use:   "preview -f STAGE (--module NEW.wasm | --stage NEW.yaml) [--to-datetime T | --by-duration D] [--max-records N]",
		Short: "Show what a new logic would change in a stage's outputs, before a replay",
		Long:  previewLong,
		Example: `  flecht preview -f count.yaml --module count-v2.wasm
  flecht preview -f enrich.yaml --stage enrich-v2.yaml --by-duration 7d
  flecht preview -f count.yaml --module count-v2.wasm --max-records 100000 -o json`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.Log = runLogger(f)
			opts.OnStuck = stuckModuleExits(f, opts.Log)
			if runF != nil {
				return runF(opts)
			}
			return runPreview(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&opts.StageFile, "file", "f", "", "the stage file as it runs")
	fl.StringVar(&opts.Module, "module", "", "the candidate module (.wasm), for a stage that runs a module")
	fl.StringVar(&opts.Candidate, "stage", "", "the candidate stage file (same input topics)")
	fl.StringVar(&opts.ToDatetime, "to-datetime", "", "start at the first record at or after this RFC 3339 time, as replay --to-datetime")
	fl.StringVar(&opts.ByDuration, "by-duration", "", "start at the first record of the last DURATION (36h, 7d), as replay --by-duration")
	fl.Int64Var(&opts.MaxRecords, "max-records", 0, "read at most N records of each input partition (0: all)")
	fl.IntVar(&opts.Examples, "examples", preview.DefaultExamples, "examples of each kind to show")
	return cmd
}

func runPreview(ctx context.Context, opts *PreviewOptions) error {
	req, err := previewRequest(opts)
	if err != nil {
		return err
	}
	cluster, err := opts.Cluster()
	if err != nil {
		return err
	}
	p := ui.NewProgress(opts.IO, "reading "+strings.Join(req.Current.InputTopics, ", "))
	req.Planned, req.Read = p.SetTotal, func(n int) { p.Add(int64(n)) }
	rep, err := preview.Run(ctx, cluster, req)
	p.Done()
	if err != nil {
		return err
	}
	if err := opts.Printer().Print(rep, func(h *ui.Human) error { return show.Preview(h, rep) }); err != nil {
		return err
	}
	if !rep.Identical {
		return &exitcode.Silent{Code: exitcode.Findings}
	}
	return nil
}

// previewRequest checks the flags and loads both stage files.
func previewRequest(opts *PreviewOptions) (preview.Request, error) {
	req := preview.Request{Examples: opts.Examples, CacheDir: opts.CacheDir, OnStuck: opts.OnStuck, Log: opts.Log, Range: offline.Range{MaxRecords: opts.MaxRecords}}
	switch {
	case opts.StageFile == "":
		return req, exitcode.Usagef("give the stage file as it runs with -f STAGE")
	case (opts.Module == "") == (opts.Candidate == ""):
		return req, exitcode.Usagef("give the candidate: --module NEW.wasm or --stage NEW.yaml (one of them)")
	case opts.ToDatetime != "" && opts.ByDuration != "":
		return req, exitcode.Usagef("--to-datetime and --by-duration both say where to start: give one")
	case opts.MaxRecords < 0 || opts.Examples < 0:
		return req, exitcode.Usagef("--max-records and --examples take 0 or more")
	}
	if opts.ToDatetime != "" {
		ts, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(opts.ToDatetime))
		if err != nil {
			return req, exitcode.Usagef("--to-datetime %q: want an RFC 3339 time such as 2026-01-02T15:04:05Z", opts.ToDatetime)
		}
		req.Range.Since = ts
	}
	if opts.ByDuration != "" {
		d, err := budget.ParseDuration(opts.ByDuration)
		if err != nil || d <= 0 {
			return req, exitcode.Usagef("--by-duration %q: want a duration such as 36h or 7d", opts.ByDuration)
		}
		req.Range.Since = opts.Now().Add(-d)
	}
	var err error
	if req.Current, err = loadTransformer(opts.StageFile); err != nil {
		return req, err
	}
	if opts.Module != "" {
		req.Candidate, err = preview.WithModule(req.Current, opts.Module)
		if err != nil {
			return req, exitcode.UsageError(err)
		}
		return req, nil
	}
	req.Candidate, err = loadTransformer(opts.Candidate)
	return req, err
}

func loadTransformer(path string) (*stagefile.Stage, error) {
	st, err := stagefile.Load(path)
	if err != nil {
		return nil, exitcode.UsageError(err)
	}
	if st.Kind != stagefile.KindTransformer {
		return nil, exitcode.Usagef("stage %s is a %s: preview runs a transformer's logic", path, st.Kind)
	}
	return st, nil
}
