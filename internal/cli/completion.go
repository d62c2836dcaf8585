package cli

import (
	"context"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/profile"
	"github.com/flecht-dev/flecht/internal/secret"
	"github.com/flecht-dev/flecht/internal/textfmt"
)

// CompletionOptions are the inputs of `flecht completion`.
type CompletionOptions struct {
	Out   io.Writer
	Shell string
	// Root is the command tree to complete.
	Root *cobra.Command
}

// NewCmdCompletion builds `flecht completion bash|zsh|fish`.
func NewCmdCompletion(f *Factory, runF func(*CompletionOptions) error) *cobra.Command {
	opts := &CompletionOptions{Out: f.IO.Out}
	return &cobra.Command{
		Use:   "completion bash|zsh|fish",
		Short: "Print a shell completion script",
		Long: `Print a completion script for your shell.

  bash:  source <(flecht completion bash)
         or: flecht completion bash > /etc/bash_completion.d/flecht
  zsh:   flecht completion zsh > "${fpath[1]}/_flecht"
  fish:  flecht completion fish > ~/.config/fish/completions/flecht.fish

Besides commands and flags, it completes application ids (status, replay,
doctor) and topic names from the cluster the connection settings name,
asking it for at most 2 s; --kid and the KID of keys export from the
keyring file (--keyring or FLECHT_KEYRING; not a password-protected one,
which completion cannot open); and profile names (--profile, profile show)
from the config file.`,
		ValidArgs: []string{"bash", "zsh", "fish"},
		Args:      usageArgs(cobra.MatchAll(cobra.ExactArgs(1), cobra.OnlyValidArgs)),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Shell, opts.Root = args[0], cmd.Root()
			if runF != nil {
				return runF(opts)
			}
			return runCompletion(opts)
		},
	}
}

func runCompletion(opts *CompletionOptions) error {
	switch opts.Shell {
	case "bash":
		return opts.Root.GenBashCompletionV2(opts.Out, true)
	case "zsh":
		return opts.Root.GenZshCompletion(opts.Out)
	case "fish":
		return opts.Root.GenFishCompletion(opts.Out, true)
	}
	return exitcode.Usagef("unsupported shell %q", opts.Shell)
}

// completionTimeout bounds what a completion asks the cluster: the shell
// waits for the answer, and an unreachable cluster must not hang it.
const completionTimeout = 2 * time.Second

// completionClient connects for a completion: the settings every command
// resolves, but no warnings printed and no logs, since whatever a
// completion writes lands in the user's shell.
func completionClient(f *Factory) (*kgo.Client, error) {
	r, err := profile.Resolve(profile.Inputs{Brokers: f.Brokers, Profile: f.Profile, ProfileSource: profile.SourceFlag, Config: f.ConfigPath, Getenv: f.Getenv})
	if err != nil {
		return nil, err
	}
	c, err := kafkax.FromProfile(r, f.Getenv, nil)
	if err != nil {
		return nil, err
	}
	return c.Client()
}

// askCluster runs ask against the cluster within completionTimeout and
// keeps the candidates that start with toComplete; any failure completes
// nothing.
func askCluster(cmd *cobra.Command, f *Factory, toComplete string, ask func(context.Context, *kgo.Client) ([]string, error)) ([]string, cobra.ShellCompDirective) {
	parent := cmd.Context()
	if parent == nil {
		parent = context.Background()
	}
	ctx, cancel := context.WithTimeout(parent, completionTimeout)
	defer cancel()
	cl, err := completionClient(f)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	defer cl.Close()
	all, err := ask(ctx, cl)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	out := matching(all, toComplete)
	sort.Strings(out)
	return out, cobra.ShellCompDirectiveNoFileComp
}

// completeApplicationIDs completes the first argument with the cluster's
// consumer groups: a transformer's and an extractor's application id is
// its group.
func completeApplicationIDs(f *Factory) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return askCluster(cmd, f, toComplete, kafkax.GroupNames)
	}
}

// completeTopics completes a comma-separated list of topic names (the
// cluster's, internal ones left out) one name at a time.
func completeTopics(f *Factory) cobra.CompletionFunc {
	return func(cmd *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		done, last := "", toComplete
		if i := strings.LastIndex(toComplete, ","); i >= 0 {
			done, last = toComplete[:i+1], toComplete[i+1:]
		}
		already := map[string]bool{}
		for _, t := range strings.Split(done, ",") {
			already[t] = true
		}
		names, dir := askCluster(cmd, f, last, func(ctx context.Context, cl *kgo.Client) ([]string, error) {
			topics, err := kafkax.TopicNames(ctx, cl)
			return slices.DeleteFunc(topics, func(t string) bool { return already[t] }), err
		})
		for i := range names {
			names[i] = done + names[i]
		}
		return names, dir | cobra.ShellCompDirectiveNoSpace
	}
}

// completeKids completes --kid with the kids of the keyring file the
// command names (--keyring or FLECHT_KEYRING).
func completeKids(f *Factory) cobra.CompletionFunc {
	return func(cmd *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		flag := ""
		if cmd.Flags().Lookup("keyring") != nil {
			flag, _ = cmd.Flags().GetString("keyring")
		}
		path := keyringPath(flag, f.Getenv)
		if path == "" {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		kr, _, err := secret.Load(path)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return matching(kr.Kids(), toComplete), cobra.ShellCompDirectiveNoFileComp
	}
}

// completeProfiles completes a profile name with the config file's.
func completeProfiles(f *Factory) cobra.CompletionFunc {
	return func(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		file, _, _, err := profile.Load(profile.Inputs{Config: f.ConfigPath, Getenv: f.Getenv})
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return matching(file.Names(), toComplete), cobra.ShellCompDirectiveNoFileComp
	}
}

// firstArg completes only a command's first argument with complete.
func firstArg(complete cobra.CompletionFunc) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return complete(cmd, args, toComplete)
	}
}

// Flags whose values are topic names, completed from the cluster.
var topicFlags = []string{"topics", "input-topics", "raw", "config-topics", "input"}

// registerCompletions wires the cluster's names into the command tree:
// application ids as the first argument of status, replay and doctor;
// topic names for the topic flags; kids for --kid and the KID of keys
// export; profile names for the NAME of profile show (and for --profile,
// the root's).
func registerCompletions(root *cobra.Command, f *Factory) {
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		switch strings.TrimPrefix(c.CommandPath(), root.Name()+" ") {
		case "status", "replay", "doctor":
			c.ValidArgsFunction = completeApplicationIDs(f)
		case "keys export":
			c.ValidArgsFunction = firstArg(completeKids(f))
		case "profile show":
			c.ValidArgsFunction = firstArg(completeProfiles(f))
		}
		for _, name := range topicFlags {
			if c.LocalFlags().Lookup(name) != nil {
				_ = c.RegisterFlagCompletionFunc(name, completeTopics(f))
			}
		}
		if c.LocalFlags().Lookup("kid") != nil {
			_ = c.RegisterFlagCompletionFunc("kid", completeKids(f))
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// matching are the candidates that start with what was typed. Names come
// from the cluster and from files: one that is not printable (a control,
// an escape sequence, a bidi override; textfmt's one rule) is left out,
// since the shell would print it raw and could not insert it as typed.
func matching(all []string, prefix string) []string {
	var out []string
	for _, s := range all {
		if strings.HasPrefix(s, prefix) && textfmt.IsPrintable(s) {
			out = append(out, s)
		}
	}
	return out
}
