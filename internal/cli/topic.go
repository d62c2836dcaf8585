package cli

import (
	"context"
	"errors"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/acl"
	"github.com/flecht-dev/flecht/internal/budget"
	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/secret"
	"github.com/flecht-dev/flecht/internal/show"
	"github.com/flecht-dev/flecht/internal/stagefile"
	"github.com/flecht-dev/flecht/internal/topicio"
	"github.com/flecht-dev/flecht/internal/ui"
)

// NewCmdTopic builds `flecht topic`.
func NewCmdTopic(f *Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "topic <command>",
		Short: "Create, feed and read the topics of a pipeline (JSON lines, secrets sealed or opened)",
		Long: `The few topic verbs an operator of these pipelines needs, without an
outside client: create a stage's topics (config topics compacted), produce
JSON lines (a config record with a secret field sealed from the keyring),
and consume read_committed as JSON lines (secret fields opened for whoever
holds the keyring).`,
		Args: unknownSubcommand,
		RunE: helpOrUnknown,
	}
	cmd.AddCommand(newCmdTopicCreate(f), newCmdTopicProduce(f), newCmdTopicConsume(f))
	return cmd
}

func newCmdTopicCreate(f *Factory) *cobra.Command {
	var (
		stageFile  string
		partitions int
		compact    bool
		configs    []string
	)
	cmd := &cobra.Command{
		Use:   "create (TOPIC... | -f stage.yaml) [--partitions N] [--compact]",
		Short: "Create topics, or the topics a stage file reads and writes",
		Long: `Create each TOPIC with --partitions partitions (default 1), compacted
with --compact, with any other --config key=value. With -f, create what
the stage file names and the cluster lacks: its input topics
(--partitions), its config topics compacted (cleanup.policy=compact, the
latest config per key), and a transformer's output topics with its
inputs' partition count. A topic that exists is listed with its partition
count and left alone; the changelog and dead-letter topics are the
stage's own, which it creates when it starts.`,
		Example: `  flecht topic create sensors.raw sensors.refined --partitions 6
  flecht topic create sensors.config --compact
  flecht topic create -f examples/count.yaml --partitions 3`,
		RunE: func(cmd *cobra.Command, args []string) error {
			want, err := topicio.ToCreate(args, stageFile, partitions, compact, configs)
			if err != nil {
				return err
			}
			cl, err := f.KafkaClient(cmd.Context())
			if err != nil {
				return err
			}
			defer cl.Close()
			res, err := topicio.Create(cmd.Context(), cl, want)
			if err != nil {
				return err
			}
			return f.Printer().Print(res, func(h *ui.Human) error { return show.TopicsCreated(h, res) })
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&stageFile, "file", "f", "", "create the topics this stage file names")
	fl.IntVar(&partitions, "partitions", 1, "partitions of each topic (with -f: of the input topics)")
	fl.BoolVar(&compact, "compact", false, "cleanup.policy=compact (a config topic)")
	fl.StringSliceVar(&configs, "config", nil, "a topic config key=value (repeatable)")
	return cmd
}

// topicSession checks the topic's name, parses the secret fields (loading
// the keyring they need) and connects: what produce and consume share.
func topicSession(ctx context.Context, f *Factory, topic string, specs []string, flag, keyring, passwordFile string) ([]topicio.Field, *secret.Keyring, *kgo.Client, error) {
	if err := stagefile.CheckNames("", []string{topic}); err != nil {
		return nil, nil, nil, err
	}
	fields, kr, err := secretFields(specs, flag, keyringPath(keyring, f.Getenv), passwordFilePath(passwordFile, f.Getenv), f.IO)
	if err != nil {
		return nil, nil, nil, err
	}
	cl, err := f.KafkaClient(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	return fields, kr, cl, nil
}

// secretFields parses --encrypt/--decrypt values and loads the keyring
// they need.
func secretFields(specs []string, flag, keyring, passwordFile string, io *ui.IOStreams) ([]topicio.Field, *secret.Keyring, error) {
	if len(specs) == 0 {
		return nil, nil, nil
	}
	var fields []topicio.Field
	for _, s := range specs {
		fld, err := topicio.ParseField(s)
		if err != nil {
			return nil, nil, exitcode.Usagef("--%s: %w", flag, err)
		}
		fields = append(fields, fld)
	}
	if keyring == "" {
		return nil, nil, exitcode.Usagef("--%s needs the keyring: --keyring FILE or %s", flag, EnvKeyring)
	}
	kr, err := loadOptionalKeyring(io, keyring, passwordFile)
	if err != nil {
		return nil, nil, err
	}
	return fields, kr, nil
}

func newCmdTopicProduce(f *Factory) *cobra.Command {
	var (
		encrypt      []string
		keyring      string
		passwordFile string
	)
	cmd := &cobra.Command{
		Use:   "produce TOPIC [--encrypt FIELD[:scope]]... < lines.jsonl",
		Short: "Write JSON lines from standard input to a topic, secret fields sealed",
		Long: `Read one record a line from standard input and write it to TOPIC:

  {"key": "sensor-1", "value": {"temp": 21.5}, "headers": {"h": "v"}}

key may be absent or null (no key), value null writes a tombstone; the
value is written in the canonical JSON a stage writes. The partition is
Kafka's default for the key (murmur2), as every Flechtwerk producer's.
--encrypt api_key:api seals the value's top-level field api_key into a
flenc:jwe: token bound to scope api with the keyring's sealing key (a
config record for an extractor, say). Records are written idempotently;
a bad line stops the run naming its line, after the lines before it were
written.`,
		Example: `  echo '{"key":"s1","value":{"temp":21.5}}' | flecht topic produce sensors.raw
  echo '{"key":"api","value":{"url":"https://x","api_key":"sk-1"}}' | flecht topic produce configs --encrypt api_key:api --keyring keyring.json`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			topic := args[0]
			fields, kr, cl, err := topicSession(cmd.Context(), f, topic, encrypt, "encrypt", keyring, passwordFile)
			if err != nil {
				return err
			}
			defer cl.Close()
			if err := acl.RequireProduce(cmd.Context(), cl, topic); err != nil {
				return err
			}
			n, err := topicio.Produce(cmd.Context(), cl, topic, f.IO.In, fields, kr)
			if err != nil {
				return err
			}
			return f.Printer().Print(map[string]any{"topic": topic, "records": n}, func(h *ui.Human) error {
				h.Printf("%d records written to %s\n", n, topic)
				return nil
			})
		},
	}
	cmd.Flags().StringSliceVar(&encrypt, "encrypt", nil, "seal this top-level field of each value: NAME or NAME:scope (repeatable)")
	addKeyringFlag(cmd, &keyring)
	addPasswordFileFlag(cmd, &passwordFile)
	return cmd
}

func newCmdTopicConsume(f *Factory) *cobra.Command {
	var (
		decrypt      []string
		keyring      string
		passwordFile string
		since        string
		offset       int64
		maxRecords   int
	)
	cmd := &cobra.Command{
		Use:   "consume TOPIC [--since DURATION | --offset N] [--max N] [--decrypt FIELD[:scope]]...",
		Short: "Print a topic's committed records as JSON lines, secret fields opened",
		Long: `Read TOPIC read_committed, as a stage reads it, from the log start (or
the first record of the last --since, or --offset N of every partition)
to its end as it is when the command starts, and print one JSON line a
record: topic, partition, offset, timestamp, key, value (JSON; a value that
is not JSON as a string, one that is not UTF-8 in value_base64) and
headers. Records of aborted transactions and transaction markers are not
shown. --decrypt api_key:api opens that top-level field for whoever holds
the keyring; a field that does not open stays as it is and the line names
the error kind in errors. --max stops after N records.`,
		Example: `  flecht topic consume sensors.refined --since 10m
  flecht topic consume configs --decrypt api_key:api --keyring keyring.json | jq .value
  flecht topic consume sensors.raw --offset 100 --max 5`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			topic := args[0]
			if since != "" && cmd.Flags().Changed("offset") {
				return exitcode.UsageError(errors.New("give --since or --offset, not both"))
			}
			fields, kr, cl, err := topicSession(cmd.Context(), f, topic, decrypt, "decrypt", keyring, passwordFile)
			if err != nil {
				return err
			}
			defer cl.Close()
			start := kafkax.FromLogStart
			switch {
			case since != "":
				d, err := budget.ParseDuration(since)
				if err != nil || d <= 0 {
					return exitcode.Usagef("--since %q: want a duration such as 10m", since)
				}
				if start, err = topicio.Since(cmd.Context(), cl, topic, time.Now().Add(-d)); err != nil {
					return err
				}
			case cmd.Flags().Changed("offset"):
				start = func(_ kafkax.TopicPartition, _ kafkax.Bounds) int64 { return offset }
			}
			return topicio.Consume(cmd.Context(), cl, topic, start, maxRecords, fields, kr, f.IO.Out)
		},
	}
	cmd.Flags().StringSliceVar(&decrypt, "decrypt", nil, "open this top-level field of each value: NAME or NAME:scope (repeatable)")
	cmd.Flags().StringVar(&since, "since", "", "start at the first record of the last DURATION (10m, 2h, 7d)")
	cmd.Flags().Int64Var(&offset, "offset", 0, "start every partition at offset N (clamped to its log)")
	cmd.Flags().IntVar(&maxRecords, "max", 0, "stop after N records (0: read to the end)")
	addKeyringFlag(cmd, &keyring)
	addPasswordFileFlag(cmd, &passwordFile)
	return cmd
}
