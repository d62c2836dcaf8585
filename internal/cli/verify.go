package cli

import (
	"context"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/flecht-dev/flecht/internal/acl"
	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/module"
	"github.com/flecht-dev/flecht/internal/show"
	"github.com/flecht-dev/flecht/internal/ui"
	"github.com/flecht-dev/flecht/internal/verify"
)

// VerifyOptions are the inputs of `flecht verify`.
type VerifyOptions struct {
	IO          *ui.IOStreams
	Printer     func() *ui.Printer
	StageFile   string
	Module      string
	MaxFindings int

	CacheDir string
	Log      *slog.Logger
	OnStuck  func(error)

	// Cluster says how to reach Kafka (settings resolved, nothing dialled).
	Cluster func() (*kafkax.Cluster, error)
}

const verifyLong = `The exactly-once audit of a transformer, running or stopped. It reads
the stage's committed input offsets (and the generation their metadata
names) and every record of its output and dead-letter topics
read_committed, and checks each through its lineage headers (the source
record, the logic, the generation):

  duplicate       two records of one generation with the same source
                  record, topic, key and value: the source was processed
                  twice (a logic that writes one key and value twice for
                  one input on purpose is reported too)
  past_committed  a source at or past the committed offset of its
                  generation, or a generation newer than the committed
                  one: the offsets moved back without a replay, or never
                  committed
  no_lineage      a record without lineage headers: written by something
                  other than a flecht stage (a plain producer, the Python
                  library)
  bad_lineage     lineage headers that do not read
  unknown_source  a source on a topic the stage does not read

Every finding names the record (topic/partition@offset), the source and
the producer id and epoch of its transaction. Generations are audited each
on its own: a replay that kept the outputs (--keep-outputs) leaves two
complete generations, which is clean. Per input partition the report shows
the sources the current generation's outputs cover.

Gaps (an input whose outputs are missing) cannot be told from an input
the logic filtered without rerunning the logic, and neither can a changed
value: that is the content check. It reruns the logic offline (the
runner's own code, fresh state, nothing written) over every input
partition from offset 0 up to the committed offset, and compares bytes
per source record of the current generation:

  changed         an output whose value is not what the logic makes of
                  its source (the JSON field that differs is named)
  missing         an output the logic makes that the topic does not hold:
                  a gap
  unexpected      an output the logic does not make of its source

A module stage reruns the module the stage file names, or the file given
with --module; either is refused (exit 2) when its sha256 is not the one
the current generation's lineage names. A builtin stage reruns this
flecht's builtin; when the lineage names another flecht version the
report notes it. When an input's history no longer starts at offset 0
(retention deleted records the logic saw), or the module file does not
read, the content is not checked: the report says why (content_checked:
false in JSON), and completeness and uniqueness are still checked.

A stage with lineage: false is refused (exit 2): its records carry
nothing to audit them by.

The outputs' ends are read before the committed offsets, so a running
stage gives no false findings. Exit 0 when clean, 4 with findings.`

// NewCmdVerify builds `flecht verify`.
func NewCmdVerify(f *Factory, runF func(*VerifyOptions) error) *cobra.Command {
	opts := &VerifyOptions{IO: f.IO, Printer: f.Printer, Cluster: f.Cluster, CacheDir: module.CacheDirFrom(f.Getenv)}
	cmd := &cobra.Command{
		Use:   "verify -f stage.yaml [--module FILE]",
		Short: "Audit a stage's outputs against its committed offsets and its logic: duplicates, gaps, changed values, foreign records",
		Long:  verifyLong,
		Example: `  flecht verify -f examples/count.yaml
  flecht verify -f enrich.yaml --module enrich.wasm -o json`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.Log = runLogger(f)
			opts.OnStuck = stuckModuleExits(f, opts.Log)
			if runF != nil {
				return runF(opts)
			}
			return runVerify(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&opts.StageFile, "file", "f", "", "the stage file: its application id, input, output and dead-letter topics")
	fl.StringVar(&opts.Module, "module", "", "the module file to rerun (refused unless it is the one the lineage names)")
	fl.IntVar(&opts.MaxFindings, "max-findings", 100, "findings listed per kind (all are counted); 0 lists all")
	return cmd
}

func runVerify(ctx context.Context, opts *VerifyOptions) error {
	if opts.StageFile == "" {
		return exitcode.Usagef("give the stage to audit: -f stage.yaml")
	}
	if opts.MaxFindings < 0 {
		return exitcode.Usagef("--max-findings %d: want 0 (all) or more", opts.MaxFindings)
	}
	cluster, err := opts.Cluster()
	if err != nil {
		return err
	}
	req, err := verify.ForStage(opts.StageFile, opts.Module, verify.Engine{Cluster: cluster, CacheDir: opts.CacheDir, OnStuck: opts.OnStuck, Log: opts.Log})
	if err != nil {
		return err
	}
	req.MaxFindings = opts.MaxFindings
	cl, err := cluster.Client()
	if err != nil {
		return err
	}
	defer cl.Close()
	if err := cluster.Ping(ctx, cl); err != nil {
		return err
	}
	p := ui.NewProgress(opts.IO, "reading the outputs of "+req.ApplicationID)
	req.Planned, req.Read = p.SetTotal, p.Add
	rep, err := verify.Run(ctx, cl, req)
	p.Done()
	if err != nil {
		return acl.Explain(ctx, cl, err, opts.StageFile, acl.RoleOperate, false)
	}
	return printCheck(opts.Printer(), rep, func(h *ui.Human) error { return show.Verify(h, rep) }, rep.Total > 0)
}
