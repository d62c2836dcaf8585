package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/flecht-dev/flecht/internal/exitcode"
)

// guardGroups makes every command group under c (a command that only holds
// subcommands) print its help when called bare and refuse an unknown
// subcommand as a usage error. Cobra would print help and exit 0, so a typo
// in a script would pass silently. Done once over the tree so that a new
// group cannot forget it.
func guardGroups(c *cobra.Command) {
	for _, sub := range c.Commands() {
		if sub.HasSubCommands() && !sub.Runnable() {
			sub.Args = unknownSubcommand
			sub.RunE = helpOrUnknown
		}
		guardGroups(sub)
	}
}

// unknownSubcommand refuses a word after a command group that names none
// of its commands, suggesting the nearest (a prefix or a near miss).
func unknownSubcommand(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2 // cobra's own default for the root
	}
	if near := cmd.SuggestionsFor(args[0]); len(near) > 0 {
		msg += "; did you mean " + strings.Join(near, " or ") + "?"
	}
	return exitcode.UsageError(errors.New(msg))
}

// newCmdHelp replaces cobra's help command, which answers an unknown topic
// with the root usage and exit 0.
func newCmdHelp() *cobra.Command {
	return &cobra.Command{
		Use:   "help [command]",
		Short: "Help about any command",
		Long:  "Print the help of any command: flecht help [path to command].",
		ValidArgsFunction: func(c *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			return helpCompletions(c.Root(), args, toComplete), cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(c *cobra.Command, args []string) error {
			cmd, rest, err := c.Root().Find(args)
			if err != nil || len(rest) > 0 {
				return exitcode.Usagef("unknown help topic %q", strings.Join(args, " "))
			}
			cmd.InitDefaultHelpFlag()
			return cmd.Help()
		},
	}
}

func helpCompletions(root *cobra.Command, args []string, toComplete string) []cobra.Completion {
	cmd, rest, err := root.Find(args)
	if err != nil || len(rest) > 0 {
		return nil
	}
	var out []cobra.Completion
	for _, sub := range cmd.Commands() {
		if sub.IsAvailableCommand() && strings.HasPrefix(sub.Name(), toComplete) {
			out = append(out, cobra.CompletionWithDesc(sub.Name(), sub.Short))
		}
	}
	return out
}
