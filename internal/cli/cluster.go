package cli

import (
	"context"
	"fmt"
	"sort"
	"strconv"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/flecht-dev/flecht/internal/ui"
)

// ClusterOptions are the inputs of `flecht cluster`.
type ClusterOptions struct {
	Printer  func() *ui.Printer
	Describe func(ctx context.Context) (*ClusterInfo, error)
}

// ClusterInfo is what `flecht cluster` reports.
type ClusterInfo struct {
	ClusterID  string       `json:"cluster_id"`
	Controller int32        `json:"controller"`
	Brokers    []BrokerInfo `json:"brokers"`
	Topics     int          `json:"topics"`
}

// BrokerInfo is one broker of the cluster.
type BrokerInfo struct {
	NodeID int32  `json:"node_id"`
	Host   string `json:"host"`
	Port   int32  `json:"port"`
	Rack   string `json:"rack,omitempty"`
}

// NewCmdCluster builds `flecht cluster`.
func NewCmdCluster(f *Factory, runF func(*ClusterOptions) error) *cobra.Command {
	opts := &ClusterOptions{Printer: f.Printer}
	opts.Describe = func(ctx context.Context) (*ClusterInfo, error) {
		cl, _, err := f.Kafka(ctx)
		if err != nil {
			return nil, err
		}
		defer cl.Close()
		return describeCluster(ctx, kadm.NewClient(cl))
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

func describeCluster(ctx context.Context, adm *kadm.Client) (*ClusterInfo, error) {
	md, err := adm.Metadata(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading cluster metadata: %w", err)
	}
	info := &ClusterInfo{ClusterID: md.Cluster, Controller: md.Controller, Topics: len(md.Topics)}
	for _, b := range md.Brokers {
		bi := BrokerInfo{NodeID: b.NodeID, Host: b.Host, Port: b.Port}
		if b.Rack != nil {
			bi.Rack = *b.Rack
		}
		info.Brokers = append(info.Brokers, bi)
	}
	sort.Slice(info.Brokers, func(i, j int) bool { return info.Brokers[i].NodeID < info.Brokers[j].NodeID })
	return info, nil
}

func runCluster(ctx context.Context, opts *ClusterOptions) error {
	info, err := opts.Describe(ctx)
	if err != nil {
		return err
	}
	return opts.Printer().Print(info, func(h *ui.Human) error {
		h.KV([2]string{"cluster id", info.ClusterID}, [2]string{"controller", strconv.Itoa(int(info.Controller))}, [2]string{"topics", strconv.Itoa(info.Topics)})
		h.Printf("\n")
		rows := make([][]string, len(info.Brokers))
		for i, b := range info.Brokers {
			rows[i] = []string{strconv.Itoa(int(b.NodeID)), fmt.Sprintf("%s:%d", b.Host, b.Port), dash(b.Rack)}
		}
		h.Table([]string{"node", "address", "rack"}, rows)
		return nil
	})
}
