package cli

import (
	"context"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/lineage"
	"github.com/flecht-dev/flecht/internal/show"
	"github.com/flecht-dev/flecht/internal/stagefile"
	"github.com/flecht-dev/flecht/internal/trace"
	"github.com/flecht-dev/flecht/internal/ui"
)

// TraceOptions are the inputs of `flecht trace`.
type TraceOptions struct {
	IO      *ui.IOStreams
	Printer func() *ui.Printer
	Place   string
	Key     string
	KeySet  bool
	Last    int64

	// Kafka connects to the cluster; the caller closes the client.
	Kafka func(ctx context.Context) (*kgo.Client, error)
}

const traceLong = `Follow a record up its lineage: the record (key, value, headers,
timestamp, and the producer id and epoch of the transaction that wrote
it), the record it was made from (its flecht.lineage.source header), the
logic and generation that made it, and so on through every upstream
flecht stage to the raw record, where the chain ends with who wrote it:
the MQTT bridge (mqtt:<mqtt topic>, and the record's timestamp is when the
message arrived) or an extractor (extractor:<application id>/<config key>).

A chain also ends at a record with no lineage (written outside flecht, or
before lineage), or at a source record that is gone (retention,
compaction or a deletion), or at a source record on a topic the
principal may not read (not_authorized, naming the ACL). -o json prints
the chains with end and end_detail.

With --key K the argument is a topic: every record with key K among the
last --last offsets of each of its partitions is traced, oldest first.

A record (or key) that is not there exits 3.`

// NewCmdTrace builds `flecht trace`.
func NewCmdTrace(f *Factory, runF func(*TraceOptions) error) *cobra.Command {
	opts := &TraceOptions{IO: f.IO, Printer: f.Printer, Kafka: f.KafkaClient}
	cmd := &cobra.Command{
		Use:   "trace TOPIC/PARTITION@OFFSET | trace TOPIC --key K [--last N]",
		Short: "Follow a record up its lineage to the raw record and the MQTT message or extractor it came from",
		Long:  traceLong,
		Example: `  flecht trace sensors.refined/2@1841
  flecht trace sensors.refined --key dev-7 --last 5000 -o json`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Place, opts.KeySet = args[0], cmd.Flags().Changed("key")
			if runF != nil {
				return runF(opts)
			}
			return runTrace(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.Key, "key", "", "trace the records with this key; the argument is then a topic")
	fl.Int64Var(&opts.Last, "last", 1000, "with --key: offsets read from the end of each partition")
	return cmd
}

func runTrace(ctx context.Context, opts *TraceOptions) error {
	var start lineage.Source
	switch {
	case opts.KeySet:
		if strings.ContainsAny(opts.Place, "/@") {
			return exitcode.Usagef("with --key give a topic, not %q", opts.Place)
		}
		if err := stagefile.CheckTopicName(opts.Place); err != nil {
			return exitcode.UsageError(err)
		}
		if opts.Last <= 0 {
			return exitcode.Usagef("--last %d: want 1 or more", opts.Last)
		}
	default:
		s, err := lineage.ParseSource(opts.Place)
		if err != nil {
			return exitcode.UsageError(err)
		}
		start = s
	}
	cl, err := opts.Kafka(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	starts := []lineage.Source{start}
	if opts.KeySet {
		if starts, err = trace.FindKey(ctx, cl, opts.Place, opts.Key, opts.Last); err != nil {
			return err
		}
	}
	chains, err := trace.Follow(ctx, cl, starts...)
	if err != nil {
		return err
	}
	return opts.Printer().Print(chains, func(h *ui.Human) error { return show.Trace(h, chains) })
}
