package cli

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/show"
	"github.com/flecht-dev/flecht/internal/ui"
)

// ClusterOptions are the inputs of `flecht cluster`.
type ClusterOptions struct {
	Printer  func() *ui.Printer
	Describe func(ctx context.Context) (*kafkax.ClusterInfo, error)
}

// NewCmdCluster builds `flecht cluster`.
func NewCmdCluster(f *Factory, runF func(*ClusterOptions) error) *cobra.Command {
	opts := &ClusterOptions{Printer: f.Printer}
	opts.Describe = func(ctx context.Context) (*kafkax.ClusterInfo, error) {
		cl, _, err := f.Kafka(ctx)
		if err != nil {
			return nil, err
		}
		defer cl.Close()
		return kafkax.DescribeCluster(ctx, cl)
	}
	return &cobra.Command{
		Use:   "cluster",
		Short: "Check that Kafka answers and show its brokers",
		Long: `Connect with the effective settings (see 'flecht profile show') and print
the cluster id, controller, brokers and topic count. A quick check that a
profile works: an unreachable cluster fails within seconds, naming the
addresses tried.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(opts)
			}
			return runCluster(cmd.Context(), opts)
		},
	}
}

func runCluster(ctx context.Context, opts *ClusterOptions) error {
	info, err := opts.Describe(ctx)
	if err != nil {
		return err
	}
	return opts.Printer().Print(info, func(h *ui.Human) error { return show.Cluster(h, info) })
}
