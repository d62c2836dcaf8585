// Package cli holds flecht's commands: the command layer. Each command has
// an Options struct with its inputs and dependencies, a NewCmdX(f, runF)
// that wires cobra flags into it, and a runX(opts) that is inputs → a
// domain package's call → internal/show (or -o json/yaml) for its result.
// Tests run commands through Main with argv, or drive runX with fakes
// through runF. Cobra does not leave this package (and the reference
// generator, internal/docgen); the domain logic lives in the domain
// packages, which internal/layering keeps free of commands and terminals.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/profile"
	"github.com/flecht-dev/flecht/internal/reencrypt"
	"github.com/flecht-dev/flecht/internal/textfmt"
	"github.com/flecht-dev/flecht/internal/ui"
)

// Factory carries what every command may need: the streams, the global
// flags, and constructors for connections built from them.
type Factory struct {
	IO     *ui.IOStreams
	Getenv func(string) string

	// Global flags, filled in by the root command.
	Brokers    string
	Profile    string
	ConfigPath string
	Output     string
	NoColor    bool
	Verbose    bool

	format   ui.Format
	logger   *slog.Logger
	warnOnce sync.Once
	// runLog is the logger of the stages `run` starts (runLogger).
	runLog     *slog.Logger
	runLogOnce sync.Once
}

// NewFactory returns a factory over the process's real streams and
// environment.
func NewFactory() *Factory {
	return &Factory{IO: ui.System(), Getenv: os.Getenv}
}

// Format is the validated -o value.
func (f *Factory) Format() ui.Format {
	if f.format == "" {
		return ui.FormatTable
	}
	return f.format
}

// Printer renders results in the chosen format.
func (f *Factory) Printer() *ui.Printer { return ui.NewPrinter(f.IO, f.Format()) }

// Logger logs to standard error: warnings by default, everything with -v.
func (f *Factory) Logger() *slog.Logger {
	if f.logger == nil {
		level := slog.LevelWarn
		if f.Verbose {
			level = slog.LevelDebug
		}
		var w io.Writer = f.IO.ErrOut
		f.logger = slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
	}
	return f.logger
}

// Resolve applies flag > env > profile > default to the connection settings.
func (f *Factory) Resolve() (*profile.Resolved, error) {
	return f.resolveProfile(f.Profile, profile.SourceFlag)
}

// resolveProfile resolves with the profile name given by src. An unknown
// profile is a usage error (its message lists the known ones); warnings go
// to standard error, once per process.
func (f *Factory) resolveProfile(name string, src profile.Source) (*profile.Resolved, error) {
	getenv := f.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	if err := checkBrokerList(f.Brokers, getenv(profile.EnvBrokers)); err != nil {
		return nil, err
	}
	r, err := profile.Resolve(profile.Inputs{
		Brokers:       f.Brokers,
		Profile:       name,
		ProfileSource: src,
		Config:        f.ConfigPath,
		Getenv:        f.Getenv,
	})
	if errors.Is(err, profile.ErrUnknownProfile) {
		return nil, exitcode.UsageError(err)
	}
	if err != nil {
		return nil, err
	}
	f.warnOnce.Do(func() {
		for _, w := range r.Warnings {
			fmt.Fprintf(f.IO.ErrOut, "warning: %s\n", textfmt.Text(w))
		}
	})
	return r, nil
}

// Cluster returns how to reach Kafka under the resolved settings.
func (f *Factory) Cluster() (*kafkax.Cluster, error) {
	r, err := f.Resolve()
	if err != nil {
		return nil, err
	}
	// franz-go's own logs (every failed dial, every retry) are noise unless
	// asked for; the error a command returns already names the cause.
	var kafkaLog *slog.Logger
	if f.Verbose {
		kafkaLog = f.Logger()
	}
	return kafkax.FromProfile(r, f.Getenv, kafkaLog)
}

// Kafka returns a client for the resolved cluster that has answered a
// ping, so a dead broker fails fast with its address named. The caller
// closes the client.
func (f *Factory) Kafka(ctx context.Context, extra ...kgo.Opt) (*kgo.Client, *kafkax.Cluster, error) {
	c, err := f.Cluster()
	if err != nil {
		return nil, nil, err
	}
	cl, err := c.Client(extra...)
	if err != nil {
		return nil, nil, err
	}
	if err := c.Ping(ctx, cl); err != nil {
		cl.Close()
		return nil, nil, err
	}
	return cl, c, nil
}

// KafkaClient is Kafka without the cluster, the shape commands take as
// their Kafka seam.
func (f *Factory) KafkaClient(ctx context.Context) (*kgo.Client, error) {
	cl, _, err := f.Kafka(ctx)
	return cl, err
}

// ScanTopics runs a secret scan on a fresh client: the seam of every
// command that scans (secrets scan, keys rotate-plan, the keys remove
// guard).
func (f *Factory) ScanTopics(ctx context.Context, o reencrypt.ScanOptions) (*reencrypt.ScanReport, error) {
	cl, err := f.KafkaClient(ctx)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	return reencrypt.Scan(ctx, cl, o)
}

// signalOf is the signal that ended ctx, as signal.NotifyContext names it
// in the context's cause: SIGTERM when the cause says "terminated", else
// Ctrl-C (a context a test cancels).
func signalOf(ctx context.Context) os.Signal {
	if c := context.Cause(ctx); c != nil && strings.Contains(c.Error(), syscall.SIGTERM.String()) {
		return syscall.SIGTERM
	}
	return os.Interrupt
}

// commandFormats are the -o values of the commands that do not print all
// three formats; every other command prints table, json and yaml through
// its Printer. topic consume prints JSON lines; the others print text (a
// script, a stage's logs, the files written) that has no data form.
var commandFormats = map[string][]ui.Format{
	"topic consume": {ui.FormatJSON},
	"transform new": {ui.FormatTable},
	"run":           {ui.FormatTable},
	"completion":    {ui.FormatTable},
}

// parseOutput is the one check of -o: a known format, and, when -o is
// given, one that cmd prints (else a usage error listing those it does).
func (f *Factory) parseOutput(cmd *cobra.Command) (ui.Format, error) {
	format, err := ui.ParseFormat(f.Output)
	if err != nil {
		return "", exitcode.UsageError(err)
	}
	path := strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" ")
	supported, ok := commandFormats[path]
	if !ok || !cmd.Flags().Changed("output") || slices.Contains(supported, format) {
		return format, nil
	}
	names := make([]string, len(supported))
	for i, s := range supported {
		names[i] = string(s)
	}
	return "", exitcode.Usagef("-o %s: flecht %s does not print %s; it prints %s", format, path, format, strings.Join(names, ", "))
}

// checkBrokerList refuses a broker list that is given but names no broker
// (--brokers , or FLECHT_BROKERS=,): a usage error, not a failure to
// connect.
func checkBrokerList(flag, env string) error {
	blank := func(s string) bool { return s != "" && strings.Trim(s, ", \t") == "" }
	switch {
	case blank(flag):
		return exitcode.Usagef("--brokers %q names no broker: give host:port[,host:port...]", flag)
	case flag == "" && blank(env):
		return exitcode.Usagef("%s=%q names no broker: give host:port[,host:port...], or unset it", profile.EnvBrokers, env)
	}
	return nil
}
