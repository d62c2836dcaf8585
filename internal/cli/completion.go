package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/flecht-dev/flecht/internal/exitcode"
)

// NewCmdCompletion builds `flecht completion bash|zsh|fish`.
func NewCmdCompletion(f *Factory) *cobra.Command {
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
			root := cmd.Root()
			switch args[0] {
			case "bash":
				return root.GenBashCompletionV2(f.IO.Out, true)
			case "zsh":
				return root.GenZshCompletion(f.IO.Out)
			case "fish":
				return root.GenFishCompletion(f.IO.Out, true)
			}
			return exitcode.UsageError(fmt.Errorf("unsupported shell %q", args[0]))
		},
	}
}
