package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/show"
	"github.com/flecht-dev/flecht/internal/ui"
)

// PartitionOptions are the inputs of `flecht partition`.
type PartitionOptions struct {
	IO         *ui.IOStreams
	Printer    func() *ui.Printer
	Partitions int
	Topic      string
	Keys       []string
	// PartitionCount looks up a topic's partition count (--topic).
	PartitionCount func(ctx context.Context, topic string) (int, error)
}

// NewCmdPartition builds `flecht partition`.
func NewCmdPartition(f *Factory, runF func(*PartitionOptions) error) *cobra.Command {
	opts := &PartitionOptions{IO: f.IO, Printer: f.Printer}
	opts.PartitionCount = func(ctx context.Context, topic string) (int, error) {
		cl, _, err := f.Kafka(ctx)
		if err != nil {
			return 0, err
		}
		defer cl.Close()
		return kafkax.PartitionCountOf(ctx, cl, topic)
	}
	cmd := &cobra.Command{
		Use:   "partition (--partitions N | --topic T) KEY... | -",
		Short: "Show which partition Kafka's default partitioner gives each key",
		Long: `Print, for each key, the partition Kafka's default partitioner assigns it:
(murmur2(key) & 0x7fffffff) % N, as the Java client, franz-go and kcat with
-X partitioner=murmur2_random do. librdkafka's own default (CRC32) places keys
differently: a common cause of broken co-partitioning.

Keys are hashed as the bytes given; the empty string is a key like any
other. With "-" the keys are read from standard input, one per line. N is at
most 2147483647, Kafka's limit. A key that is not valid UTF-8 is shown
quoted with \x escapes, and in JSON and YAML also as key_base64.`,
		Example: `  flecht partition --partitions 6 device-1 device-2
  flecht partition --topic sensors.raw tenant-a
  cut -f1 keys.tsv | flecht partition -N 12 - -o json`,
		Args: usageArgs(cobra.MinimumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.Topic == "" && !cmd.Flags().Changed("partitions") {
				return exitcode.UsageError(errors.New("give --partitions N or --topic T"))
			}
			if opts.Topic != "" && cmd.Flags().Changed("partitions") {
				return exitcode.UsageError(errors.New("--partitions and --topic exclude each other"))
			}
			if opts.Topic == "" && (opts.Partitions <= 0 || int64(opts.Partitions) > kafkax.MaxPartitions) {
				return exitcode.Usagef("--partitions must be from 1 to %d (Kafka's limit), got %d", kafkax.MaxPartitions, opts.Partitions)
			}
			opts.Keys = args
			if runF != nil {
				return runF(opts)
			}
			return runPartition(cmd.Context(), opts)
		},
	}
	cmd.Flags().IntVarP(&opts.Partitions, "partitions", "N", 0, "number of partitions")
	cmd.Flags().StringVar(&opts.Topic, "topic", "", "take the partition count from this topic (needs a broker)")
	return cmd
}

func runPartition(ctx context.Context, opts *PartitionOptions) error {
	n := opts.Partitions
	if opts.Topic != "" {
		var err error
		if n, err = opts.PartitionCount(ctx, opts.Topic); err != nil {
			return err
		}
	}
	keys := opts.Keys
	if len(keys) == 1 && keys[0] == "-" {
		var err error
		if keys, err = readLines(opts.IO.In); err != nil {
			return fmt.Errorf("reading keys from standard input: %w", err)
		}
	}
	rows := make([]kafkax.PartitionRow, 0, len(keys))
	for _, k := range keys {
		rows = append(rows, kafkax.KeyPartition(k, n))
	}
	return opts.Printer().Print(rows, func(h *ui.Human) error { return show.KeyPartitions(h, rows, n) })
}

// readLines reads lines without their line endings; a final line without
// a newline counts.
func readLines(r io.Reader) ([]string, error) {
	var out []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if n := len(line); n > 0 && line[n-1] == '\r' {
			line = line[:n-1]
		}
		out = append(out, line)
	}
	return out, sc.Err()
}
