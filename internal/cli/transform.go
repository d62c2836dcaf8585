package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/module"
	"github.com/flecht-dev/flecht/internal/scaffold"
	"github.com/flecht-dev/flecht/internal/show"
	"github.com/flecht-dev/flecht/internal/textfmt"
	"github.com/flecht-dev/flecht/internal/ui"
	"github.com/flecht-dev/flecht/sdk/abi"
)

// NewCmdTransform builds `flecht transform`, the commands for the people
// who write and ship transform modules.
func NewCmdTransform(f *Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "transform <command>",
		Short: "Write, test and inspect WebAssembly transform modules",
		Long: `A transformer can run the team's own logic as a WebAssembly module instead
of a builtin:

    transform:
      module: ./enrich.wasm          # beside the stage file
      sha256: 9f86d081…              # optional: refuse any other file
      output_topics: [sensors.enriched]
      config: {lookup: device}       # the module's own settings
      memory_limit: 64MiB            # per instance; one instance per task
      time_limit: 1s                 # per record
      isolation: record              # default; task keeps memory across records

The module runs exactly once like a builtin: its outputs, its state and the
input offsets commit in one transaction per task. It is deterministic by
construction (no clock but the record's event time, no randomness but a
seed per record, no files, network or environment), and each record runs
on the instance as it was right after setup, so nothing a record leaves in
memory reaches the next: a restart, a rebalance or a replay with a fixed
module writes the bytes an uninterrupted run writes.

The ABI (ABI v` + fmt.Sprint(abi.Version) + `) is language-neutral; docs/modules.md in the repository
describes it. Go modules use the SDK in sdk/ (package transform), which
'flecht transform new' sets up.`,
		Args: usageArgs(cobra.NoArgs),
	}
	cmd.AddCommand(NewCmdTransformTest(f, nil), NewCmdTransformInspect(f, nil), NewCmdTransformNew(f, nil))
	return cmd
}

// TransformInspectOptions are the inputs of `flecht transform inspect`.
type TransformInspectOptions struct {
	IO      *ui.IOStreams
	Printer func() *ui.Printer
	Module  string
}

// NewCmdTransformInspect builds `flecht transform inspect`.
func NewCmdTransformInspect(f *Factory, runF func(*TransformInspectOptions) error) *cobra.Command {
	opts := &TransformInspectOptions{IO: f.IO, Printer: f.Printer}
	cmd := &cobra.Command{
		Use:   "inspect MODULE.wasm",
		Short: "Show a module's ABI version, exports, imports and digest, and whether run would take it",
		Long: `Read a module without running any of its records: its size and sha256 (for
the stage file's sha256:), the ABI version it declares, what it exports and
imports (with the deterministic stand-in each WASI import gets), and
whether 'flecht run' would accept it: exit 0 when it would, 2 with the
reasons when not. The module is started once, as run does, without a
config: a module that refuses an empty config is reported, not refused.`,
		Example: `  flecht transform inspect bin/modules/count.wasm
  flecht transform inspect enrich.wasm -o json | jq -r .sha256`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Module = args[0]
			if runF != nil {
				return runF(opts)
			}
			return runTransformInspect(cmd.Context(), opts)
		},
	}
	return cmd
}

func runTransformInspect(ctx context.Context, opts *TransformInspectOptions) error {
	info, err := module.Inspect(ctx, opts.Module)
	if err != nil {
		return exitcode.UsageError(err)
	}
	if err := opts.Printer().Print(info, func(h *ui.Human) error { show.Inspect(h, info); return nil }); err != nil {
		return err
	}
	if !info.Accepted {
		return &exitcode.Silent{Code: exitcode.Usage}
	}
	return nil
}

// TransformNewOptions are the inputs of `flecht transform new`.
type TransformNewOptions struct {
	IO   *ui.IOStreams
	Lang string
	Dir  string
}

// NewCmdTransformNew builds `flecht transform new`.
func NewCmdTransformNew(f *Factory, runF func(*TransformNewOptions) error) *cobra.Command {
	opts := &TransformNewOptions{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "new --lang go DIR",
		Short: "Start a module project that builds and passes its own tests",
		Long: `Write a new module project into DIR (new, or empty): a working module (a
running total per key), its Go tests, sample records with the answers
expected of them, a stage file that runs it, a Makefile, and a copy of the
SDK, so that it builds without fetching anything:

    cd DIR && make test     # go test, then flecht transform test`,
		Example: `  flecht transform new --lang go ./payments-total`,
		Args:    usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Dir = args[0]
			if runF != nil {
				return runF(opts)
			}
			return runTransformNew(opts)
		},
	}
	cmd.Flags().StringVar(&opts.Lang, "lang", "go", "the module's language: "+strings.Join(scaffold.Languages, ", "))
	return cmd
}

// makeFlecht is what `make test` needs to run this flecht when the one on
// PATH is another (or none): FLECHT=path, if the path is safe to hand make.
func makeFlecht() string {
	exe, err := os.Executable()
	if err != nil || !filepath.IsAbs(exe) {
		return ""
	}
	if onPath, err := exec.LookPath("flecht"); err == nil && sameFile(onPath, exe) {
		return ""
	}
	if !scaffold.MakeSafe(exe) {
		return "   # with flecht on PATH, or FLECHT=<path to flecht>"
	}
	return " FLECHT=" + exe
}

func sameFile(a, b string) bool {
	fa, errA := os.Stat(a)
	fb, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(fa, fb)
}

func runTransformNew(opts *TransformNewOptions) error {
	name, err := scaffold.NameFor(opts.Dir)
	if err != nil {
		return exitcode.UsageError(err)
	}
	files, err := scaffold.Write(opts.Dir, opts.Lang, scaffold.Project{Name: name})
	if err != nil {
		var pathErr *os.PathError
		if errors.As(err, &pathErr) {
			return err
		}
		return exitcode.UsageError(err)
	}
	own, sdkFiles := scaffold.Split(files)
	for _, f := range own {
		fmt.Fprintf(opts.IO.Out, "wrote %s\n", textfmt.Escape(filepath.Join(opts.Dir, f)))
	}
	fmt.Fprintf(opts.IO.Out, "wrote %s (the SDK, %d files)\n\nNext:\n  cd %s && make test%s\n", textfmt.Escape(filepath.Join(opts.Dir, scaffold.SDKDir)), sdkFiles, textfmt.ShellQuote(opts.Dir), makeFlecht())
	return nil
}
