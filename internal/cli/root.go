package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"

	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/profile"
	"github.com/flecht-dev/flecht/internal/textfmt"
	"github.com/flecht-dev/flecht/internal/ui"
)

const rootLong = `flecht runs and operates Kafka stream-processing pipelines of the
Flechtwerk kind: extractors and an MQTT bridge that write raw topics, and
exactly-once transformers that refine them.

It is wire-compatible with the Python Flechtwerk library (topic names,
transactional IDs, JSON, secret tokens, keyrings, metric names), so it can
operate pipelines that library already runs.

Connection settings come from, in order: flags, environment
(FLECHT_BROKERS, FLECHT_PROFILE, FLECHT_CONFIG), a profile in
$XDG_CONFIG_HOME/flecht/config.yaml, and the default 127.0.0.1:9092.

Exit codes: 0 ok, 1 failure, 2 usage error, 3 refused for safety,
4 a check found problems.`

// NewCmdRoot builds the flecht command tree.
func NewCmdRoot(f *Factory) *cobra.Command {
	root := &cobra.Command{
		Use:           "flecht <command>",
		Short:         "Run and operate Kafka stream-processing pipelines",
		Long:          rootLong,
		SilenceErrors: true,
		SilenceUsage:  true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			format, err := f.parseOutput(cmd)
			if err != nil {
				return err
			}
			f.format = format
			if f.NoColor {
				f.IO.SetColorEnabled(false)
			}
			return nil
		},
	}
	root.CompletionOptions.DisableDefaultCmd = true
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return exitcode.UsageError(err) })

	pf := root.PersistentFlags()
	pf.StringVarP(&f.Brokers, "brokers", "b", "", "Kafka bootstrap brokers, comma-separated (env "+profile.EnvBrokers+"; default "+profile.DefaultBrokers+")")
	pf.StringVar(&f.Profile, "profile", "", "connection profile from the config file (env "+profile.EnvProfile+")")
	pf.StringVar(&f.ConfigPath, "config", "", "config file (env "+profile.EnvConfig+"; default $XDG_CONFIG_HOME/flecht/config.yaml)")
	pf.StringVarP(&f.Output, "output", "o", "table", "output format: "+strings.Join(ui.Formats, "|"))
	pf.BoolVar(&f.NoColor, "no-color", false, "disable colour (also NO_COLOR)")
	pf.BoolVarP(&f.Verbose, "verbose", "v", false, "debug logs on standard error")
	_ = root.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(ui.Formats, cobra.ShellCompDirectiveNoFileComp))
	_ = root.RegisterFlagCompletionFunc("profile", completeProfiles(f))

	root.AddGroup(
		&cobra.Group{ID: "run", Title: "Run pipelines:"},
		&cobra.Group{ID: "operate", Title: "Operate pipelines:"},
		&cobra.Group{ID: "tools", Title: "Tools:"},
	)
	add := func(group string, cmds ...*cobra.Command) {
		for _, c := range cmds {
			c.GroupID = group
			root.AddCommand(c)
		}
	}
	add("run", NewCmdRun(f, nil), NewCmdDev(f, nil), NewCmdTransform(f))
	add("operate", NewCmdACL(f), NewCmdCluster(f, nil), NewCmdKeys(f), NewCmdSecrets(f), NewCmdBudget(f, nil), NewCmdLint(f), NewCmdReplay(f, nil), NewCmdPreview(f, nil), NewCmdVerify(f, nil), NewCmdTrace(f, nil), NewCmdStatus(f, nil), NewCmdDoctor(f, nil), NewCmdGroup(f), NewCmdTopic(f))
	add("tools",
		NewCmdPartition(f, nil),
		NewCmdProfile(f),
		NewCmdVersion(f, nil),
		NewCmdCompletion(f, nil),
	)
	help := newCmdHelp()
	help.GroupID = "tools"
	root.SetHelpCommand(help)
	guardGroups(root)
	registerCompletions(root, f)
	return root
}

// Main runs flecht with args and returns the process exit code. It is the
// one place output failures and panics become exit codes: a result that
// could not be written to standard output (a full disk, a closed
// descriptor) exits 1 with the write error on standard error, whatever the
// command did with its own write errors; a panic exits 1 ("internal
// error", with its stack), never 2, which is the usage code.
func Main(ctx context.Context, f *Factory, args []string) (code int) {
	out := f.IO.CheckOut()
	defer func() {
		if p := recover(); p != nil {
			fmt.Fprintf(f.IO.ErrOut, "error: internal error: %s\n%s", textfmt.Text(fmt.Sprint(p)), debug.Stack())
			code = exitcode.Failure
		}
	}()
	code, err := execute(ctx, f, args)
	// A write error the command returned is reported already.
	if werr := out.Err(); werr != nil && !errors.Is(err, werr) {
		fmt.Fprintf(f.IO.ErrOut, "error: writing standard output: %s\n", textfmt.Text(werr.Error()))
		if code == exitcode.OK {
			code = exitcode.Failure
		}
	}
	return code
}

// execute runs the command tree, reports its error on standard error and
// returns its exit code.
func execute(ctx context.Context, f *Factory, args []string) (int, error) {
	root := NewCmdRoot(f)
	root.SetArgs(args)
	root.SetIn(f.IO.In)
	root.SetOut(f.IO.Out)
	root.SetErr(f.IO.ErrOut)
	if len(args) > 0 && strings.HasPrefix(args[0], cobra.ShellCompRequestCmd) {
		// The completion scripts discard standard error; cobra's own note
		// there ("Completion ended with directive ...") is only noise in a
		// shell that does not.
		root.SetErr(io.Discard)
	}
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitcode.OK, nil
	}
	// Cobra reports an unknown command or wrong argument count as a plain
	// error; both are usage errors.
	if isCobraUsageError(err) {
		err = exitcode.UsageError(err)
	}
	if !exitcode.IsSilent(err) {
		// Messages quote names from files, tokens and brokers: shown
		// escaped, never as raw controls.
		fmt.Fprintf(f.IO.ErrOut, "error: %s\n", textfmt.Text(err.Error()))
		if exitcode.Code(err) == exitcode.Usage && cmd != nil {
			fmt.Fprintf(f.IO.ErrOut, "Run '%s --help' for usage.\n", textfmt.Text(cmd.CommandPath()))
		}
	}
	return exitcode.Code(err), err
}

// isCobraUsageError spots cobra's own "unknown command" error, which it
// does not let us classify at the source.
func isCobraUsageError(err error) bool {
	return exitcode.Code(err) == exitcode.Failure && strings.HasPrefix(err.Error(), "unknown command")
}

// appRunE is the RunE of a command whose one optional argument is the
// application id: it sets *app from it, then hands opts to runF (tests)
// or to run.
func appRunE[O any](opts *O, app *string, runF func(*O) error, run func(context.Context, *O) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) == 1 {
			*app = args[0]
		}
		if runF != nil {
			return runF(opts)
		}
		return run(cmd.Context(), opts)
	}
}

// usageArgs makes a positional-argument check fail as a usage error (exit 2).
func usageArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		return exitcode.UsageError(check(cmd, args))
	}
}
