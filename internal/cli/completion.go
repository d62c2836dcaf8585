package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/flecht-dev/flecht/internal/exitcode"
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
  fish:  flecht completion fish > ~/.config/fish/completions/flecht.fish`,
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
	return exitcode.UsageError(fmt.Errorf("unsupported shell %q", opts.Shell))
}
