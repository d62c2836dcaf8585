package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/acl"
	"github.com/flecht-dev/flecht/internal/show"
	"github.com/flecht-dev/flecht/internal/textfmt"
	"github.com/flecht-dev/flecht/internal/ui"
)

// ACLOptions are the inputs of `flecht acl plan` and `flecht acl check`.
type ACLOptions struct {
	IO      *ui.IOStreams
	Printer func() *ui.Printer
	acl.Flags
	// CommandConfig and Bootstrap fill the printed kafka-acls.sh commands.
	CommandConfig string
	Bootstrap     func() string
	// User is the SASL username of the profile, "" without one.
	User func() string
	// Kafka connects to the cluster (check); the caller closes the client.
	Kafka func(ctx context.Context) (*kgo.Client, error)
}

// NewCmdACL builds `flecht acl`.
func NewCmdACL(f *Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "acl <command>",
		Short: "Plan and check the Kafka ACLs a stage and its operators need",
		Long: `The least set of Kafka ACLs for a stage file and a role, and a check of
the current principal against it. Roles: run (the stage itself), replay
(flecht replay --execute; --truncate-outputs adds Delete on the outputs),
operate (read-only: status, doctor, lint, a replay's dry run) and feed
(topic create -f, topic produce, topic consume). docs/security.md has the
tables per stage kind.`,
		Args: unknownSubcommand,
		RunE: helpOrUnknown,
	}
	cmd.AddCommand(newCmdACLPlan(f), newCmdACLCheck(f))
	return cmd
}

func newACLOptions(f *Factory) *ACLOptions {
	return &ACLOptions{
		IO: f.IO, Printer: f.Printer, Kafka: f.KafkaClient,
		Bootstrap: func() string {
			if r, err := f.Resolve(); err == nil && len(r.Brokers) > 0 {
				return r.Brokers[0]
			}
			return ""
		},
		User: func() string {
			if r, err := f.Resolve(); err == nil && r.SASL != nil {
				return r.SASL.Username
			}
			return ""
		},
	}
}

func aclFlags(cmd *cobra.Command, opts *ACLOptions) {
	fl := cmd.Flags()
	fl.StringVarP(&opts.StageFile, "file", "f", "", "the stage file")
	fl.StringVar(&opts.Role, "role", "", "run, replay, operate or feed")
	fl.StringSliceVar(&opts.OutputTopics, "output-topics", nil, "outputs an extractor's or a bridge's config records name, comma-separated")
	fl.BoolVar(&opts.TruncateOutputs, "truncate-outputs", false, "replay: the replay truncates the outputs (Delete on them)")
	fl.StringVar(&opts.CommandConfig, "command-config", "", "the admin client's properties file, for the printed kafka-acls.sh commands")
}

func newCmdACLPlan(f *Factory) *cobra.Command {
	opts := newACLOptions(f)
	cmd := &cobra.Command{
		Use:   "plan -f stage.yaml --principal User:NAME --role ROLE",
		Short: "Print the least ACLs a principal needs for a stage in a role",
		Long: `Print the least set of ACLs PRINCIPAL needs to do ROLE for the stage
file: as kafka-acls.sh commands (default), as JSON ({"acls":[...]}, names
as Kafka spells them: topic, group, transactional_id, cluster; literal,
prefixed; read, write, describe_configs, ...) or, with -o yaml, as a
Strimzi KafkaUser (spec.authorization.acls). Raw, config, output and
dead-letter topics, the group and the changelog are literal; the
transactional IDs are the prefix APP- (one per task, token or bridge
client id). Nothing connects to Kafka.`,
		Example: `  flecht acl plan -f examples/count.yaml --principal User:count --role run
  flecht acl plan -f examples/count.yaml --principal User:ops --role replay --truncate-outputs -o json
  flecht acl plan -f bridge.yaml --principal User:CN=edge --role run --output-topics sensors.raw -o yaml`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error { return runACLPlan(opts) },
	}
	aclFlags(cmd, opts)
	cmd.Flags().StringVar(&opts.Principal, "principal", "", "the principal, as Kafka writes it (User:alice, User:CN=alice)")
	return cmd
}

func runACLPlan(opts *ACLOptions) error {
	p, err := acl.NewPlanFrom(opts.Flags)
	if err != nil {
		return err
	}
	pr := opts.Printer()
	for _, n := range p.Notes {
		fmt.Fprintf(opts.IO.ErrOut, "note: %s\n", textfmt.Text(n))
	}
	if pr.Format == ui.FormatYAML {
		return pr.Print(acl.Strimzi(p), nil)
	}
	return pr.Print(p, func(h *ui.Human) error { show.ACLPlan(h, p, opts.Bootstrap(), opts.CommandConfig); return nil })
}

func newCmdACLCheck(f *Factory) *cobra.Command {
	opts := newACLOptions(f)
	cmd := &cobra.Command{
		Use:   "check -f stage.yaml --role ROLE",
		Short: "Check that the current principal has every ACL a role needs",
		Long: `Ask the cluster, with the current credentials, what the principal may do
on each resource of the role's plan, without the right to list ACLs:
Kafka's authorized operations on Metadata (topics), DescribeGroups and
DescribeCluster, and each transactional ID by name (Describe by
DescribeTransactions, Write by an EndTxn for a producer no one has, which
changes nothing). Each missing ACL is printed as the kafka-acls.sh command
that grants it; exit 4 when one is missing.

What a check cannot prove is "unknown", never granted: Kafka reports the
operations on a topic only once it exists (a changelog or dead-letter
topic the stage has not created yet: Describe, Create and DescribeConfigs
are still proven), and a bridge's transactional ID only with --client-id.`,
		Example: `  flecht acl check -f examples/count.yaml --role run
  flecht acl check -f examples/count.yaml --role operate --principal User:ops -o json`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error { return runACLCheck(cmd.Context(), opts) },
	}
	aclFlags(cmd, opts)
	cmd.Flags().StringVar(&opts.Principal, "principal", "", "the principal the printed commands grant (default User:USERNAME of a SASL profile)")
	cmd.Flags().StringVar(&opts.ClientID, "client-id", "", "an MQTT stage's --client-id, to check its transactional ID APP-CLIENT_ID")
	return cmd
}

func runACLCheck(ctx context.Context, opts *ACLOptions) error {
	if _, _, err := acl.Load(opts.Flags); err != nil {
		return err
	}
	if u := opts.User(); opts.Principal == "" && u != "" {
		opts.Principal = "User:" + u
	}
	cl, err := opts.Kafka(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	rep, err := acl.Check(ctx, cl, opts.Flags)
	if err != nil {
		return err
	}
	return printCheck(opts.Printer(), rep, func(h *ui.Human) error {
		show.ACLCheck(h, rep, opts.Bootstrap(), opts.CommandConfig)
		return nil
	}, rep.Missing > 0)
}
