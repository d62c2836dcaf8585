package cli

import (
	"context"
	"errors"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/acl"
	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/show"
	"github.com/flecht-dev/flecht/internal/stagefile"
	"github.com/flecht-dev/flecht/internal/textfmt"
	"github.com/flecht-dev/flecht/internal/ui"
)

// NewCmdGroup builds `flecht group`.
func NewCmdGroup(f *Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "group <command>",
		Short: "Act on a stage's consumer group: make a static member leave",
		Long: `Commands on the consumer group of a stage (its application id).

A transformer or extractor is a static member of its group: stopped
without --leave-group, it keeps its partitions (idle) until its session
times out, so that a restart takes them back at once. For a scale-down,
'flecht group leave' makes such a member leave now, running or stopped,
as --leave-group would have.`,
		Args: unknownSubcommand,
		RunE: helpOrUnknown,
	}
	cmd.AddCommand(newCmdGroupLeave(f, nil))
	return cmd
}

// GroupLeaveOptions are the inputs of `flecht group leave`.
type GroupLeaveOptions struct {
	IO            *ui.IOStreams
	Printer       func() *ui.Printer
	ApplicationID string
	Instances     []string
	Execute       bool
	Kafka         func(ctx context.Context) (*kgo.Client, error)
}

func newCmdGroupLeave(f *Factory, runF func(*GroupLeaveOptions) error) *cobra.Command {
	opts := &GroupLeaveOptions{IO: f.IO, Printer: f.Printer, Kafka: f.KafkaClient}
	cmd := &cobra.Command{
		Use:   "leave APP --instance ID[,ID...] [--execute]",
		Short: "Make static members leave the group now (a scale-down without restarting them)",
		Long: `Remove the static members with these instance IDs (their --client-id)
from group APP, as a member stopping with --leave-group does: the group
rebalances at once and the others take their partitions, instead of
waiting for the members' sessions to time out. A running member that is
removed rejoins at its next heartbeat as a new member; use it on members
that are stopped or about to be.

Without --execute it shows the members it would remove and changes
nothing. An instance ID that is no member of the group is refused (exit 3)
with the group's members named.`,
		Example: `  flecht group leave sensors-count --instance count-2
  flecht group leave sensors-count --instance count-2,count-3 --execute -o json`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: appRunE(opts, &opts.ApplicationID, runF, runGroupLeave),
	}
	cmd.Flags().StringSliceVar(&opts.Instances, "instance", nil, "the members' instance IDs (a stage's --client-id), comma-separated")
	cmd.Flags().BoolVar(&opts.Execute, "execute", false, "remove them (without it nothing changes)")
	return cmd
}

func runGroupLeave(ctx context.Context, opts *GroupLeaveOptions) error {
	app := strings.TrimSpace(opts.ApplicationID)
	ids := textfmt.Dedupe(opts.Instances)
	if len(ids) == 0 {
		return exitcode.UsageError(errors.New("give the members to remove: --instance ID[,ID...] (a stage's --client-id)"))
	}
	if err := stagefile.CheckNames(app); err != nil {
		return err
	}
	cl, err := opts.Kafka(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	if opts.Execute {
		if err := acl.RequireLeave(ctx, cl, app); err != nil {
			return err
		}
	}
	rep, err := kafkax.LeaveMembers(ctx, cl, app, ids, opts.Execute)
	if err != nil {
		return err
	}
	return opts.Printer().Print(rep, func(h *ui.Human) error { return show.GroupLeave(h, rep) })
}
