package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/budget"
	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/replay"
	"github.com/flecht-dev/flecht/internal/secret"
	"github.com/flecht-dev/flecht/internal/stagefile"
	"github.com/flecht-dev/flecht/internal/textfmt"
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

// TopicCreateResult is what `flecht topic create` prints.
type TopicCreateResult struct {
	Topics []TopicCreated `json:"topics"`
}

// TopicCreated is one topic: created now, or there already.
type TopicCreated struct {
	Topic      string            `json:"topic"`
	Role       string            `json:"role,omitempty"` // input, output, config with -f
	Partitions int               `json:"partitions"`
	Created    bool              `json:"created"`
	Configs    map[string]string `json:"configs,omitempty"`
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
			want, err := topicsToCreate(args, stageFile, partitions, compact, configs)
			if err != nil {
				return err
			}
			cl, err := f.KafkaClient(cmd.Context())
			if err != nil {
				return err
			}
			defer cl.Close()
			res, err := createTopics(cmd.Context(), kadm.NewClient(cl), want)
			if err != nil {
				return err
			}
			return f.Printer().Print(res, func(h *ui.Human) error {
				rows := make([][]string, len(res.Topics))
				for i, t := range res.Topics {
					state := "exists"
					if t.Created {
						state = h.Good("created")
					}
					rows[i] = []string{t.Topic, t.Role, fmt.Sprint(t.Partitions), state}
				}
				h.Table([]string{"topic", "role", "partitions", ""}, rows)
				return nil
			})
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&stageFile, "file", "f", "", "create the topics this stage file names")
	fl.IntVar(&partitions, "partitions", 1, "partitions of each topic (with -f: of the input topics)")
	fl.BoolVar(&compact, "compact", false, "cleanup.policy=compact (a config topic)")
	fl.StringSliceVar(&configs, "config", nil, "a topic config key=value (repeatable)")
	return cmd
}

// topicsToCreate is what the arguments ask for, checked.
func topicsToCreate(args []string, stageFile string, partitions int, compact bool, configs []string) ([]TopicCreated, error) {
	usage := func(format string, a ...any) error { return exitcode.UsageError(fmt.Errorf(format, a...)) }
	if partitions < 1 || partitions > 1<<20 {
		return nil, usage("--partitions %d: want 1 or more", partitions)
	}
	cfg := map[string]string{}
	for _, c := range configs {
		k, v, ok := strings.Cut(c, "=")
		if !ok || k == "" {
			return nil, usage("--config %q: want key=value", c)
		}
		cfg[k] = v
	}
	if compact {
		cfg["cleanup.policy"] = "compact"
	}
	switch {
	case stageFile != "" && len(args) > 0:
		return nil, usage("give topics or -f stage.yaml, not both")
	case stageFile == "" && len(args) == 0:
		return nil, usage("give the topics to create, or -f stage.yaml")
	}
	var out []TopicCreated
	add := func(t, role string, n int, c map[string]string) {
		for _, have := range out {
			if have.Topic == t {
				return
			}
		}
		out = append(out, TopicCreated{Topic: t, Role: role, Partitions: n, Configs: c})
	}
	if stageFile == "" {
		if err := checkNames("", args); err != nil {
			return nil, err
		}
		for _, t := range textfmt.Dedupe(args) {
			add(t, "", partitions, cfg)
		}
		return out, nil
	}
	st, err := stagefile.Load(stageFile)
	if err != nil {
		return nil, exitcode.UsageError(err)
	}
	for _, t := range st.InputTopics {
		add(t, "input", partitions, cfg)
	}
	for _, t := range st.ConfigTopics {
		add(t, "config", partitions, map[string]string{"cleanup.policy": "compact"})
	}
	if st.Kind == stagefile.KindTransformer {
		outs, err := stageOutputs(st)
		if err != nil {
			return nil, exitcode.UsageError(fmt.Errorf("stage %s: %w", st.Path, err))
		}
		for _, o := range outs {
			if o.Role == replay.RoleOutput {
				add(o.Topic, "output", partitions, cfg)
			}
		}
	}
	return out, nil
}

func createTopics(ctx context.Context, adm *kadm.Client, want []TopicCreated) (*TopicCreateResult, error) {
	names := make([]string, len(want))
	for i, t := range want {
		names[i] = t.Topic
	}
	listed, err := adm.ListTopics(ctx, names...)
	if err != nil {
		return nil, fmt.Errorf("listing topics: %w", err)
	}
	res := &TopicCreateResult{Topics: []TopicCreated{}}
	for _, t := range want {
		if d, ok := listed[t.Topic]; ok && d.Err == nil {
			t.Partitions, t.Configs = len(d.Partitions), nil
			res.Topics = append(res.Topics, t)
			continue
		}
		if err := kafkax.CreateTopic(ctx, adm, t.Topic, int32(t.Partitions), t.Configs); err != nil {
			return res, fmt.Errorf("creating %s: %w", t.Topic, err)
		}
		t.Created = true
		res.Topics = append(res.Topics, t)
	}
	return res, nil
}

// topicSession checks the topic's name, parses the secret fields (loading
// the keyring they need) and connects: what produce and consume share.
func topicSession(ctx context.Context, f *Factory, topic string, specs []string, flag, keyring, passwordFile string) ([]topicio.Field, *secret.Keyring, *kgo.Client, error) {
	if err := checkNames("", []string{topic}); err != nil {
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
			return nil, nil, exitcode.UsageError(fmt.Errorf("--%s: %w", flag, err))
		}
		fields = append(fields, fld)
	}
	if keyring == "" {
		return nil, nil, exitcode.UsageError(fmt.Errorf("--%s needs the keyring: --keyring FILE or %s", flag, EnvKeyring))
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
			n, err := produceLines(cmd.Context(), cl, topic, f.IO, fields, kr)
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

func produceLines(ctx context.Context, cl *kgo.Client, topic string, io *ui.IOStreams, fields []topicio.Field, kr *secret.Keyring) (int, error) {
	if _, err := kafkax.DescribeTopics(ctx, kadm.NewClient(cl), topic); err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(io.In)
	sc.Buffer(make([]byte, 64<<10), 8<<20)
	var batch []*kgo.Record
	written, line := 0, 0
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		if err := cl.ProduceSync(ctx, batch...).FirstErr(); err != nil {
			return fmt.Errorf("writing to %s: %w (%d records written before)", topic, err, written)
		}
		written += len(batch)
		batch = batch[:0]
		return nil
	}
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		rec, err := topicio.Record(topic, []byte(text), fields, kr)
		if err != nil {
			if ferr := flush(); ferr != nil {
				return written, ferr
			}
			return written, exitcode.UsageError(fmt.Errorf("line %d: %w (%d records written before it)", line, err, written))
		}
		batch = append(batch, rec)
		if len(batch) == 500 {
			if err := flush(); err != nil {
				return written, err
			}
		}
	}
	if err := sc.Err(); err != nil {
		return written, fmt.Errorf("reading standard input: %w", err)
	}
	return written, flush()
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
					return exitcode.UsageError(fmt.Errorf("--since %q: want a duration such as 10m", since))
				}
				after, err := kafkax.OffsetsAfter(cmd.Context(), kadm.NewClient(cl), time.Now().Add(-d).UnixMilli(), topic)
				if err != nil {
					return err
				}
				start = kafkax.FromOffsets(after)
			case cmd.Flags().Changed("offset"):
				start = func(_ kafkax.TopicPartition, _ kafkax.Bounds) int64 { return offset }
			}
			return consumeLines(cmd.Context(), cl, topic, start, maxRecords, fields, kr, f.IO)
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

// errEnough ends a read that printed --max records.
var errEnough = errors.New("enough records")

func consumeLines(ctx context.Context, cl *kgo.Client, topic string, start kafkax.StartFunc, maxRecords int, fields []topicio.Field, kr *secret.Keyring, io *ui.IOStreams) error {
	enc := json.NewEncoder(io.Out)
	enc.SetEscapeHTML(false)
	n := 0
	_, err := kafkax.ReadFrom(ctx, cl, []string{topic}, start, nil, func(r *kgo.Record) error {
		if err := enc.Encode(topicio.Line(r, fields, kr)); err != nil {
			return err
		}
		n++
		if maxRecords > 0 && n >= maxRecords {
			return errEnough
		}
		return nil
	})
	if errors.Is(err, errEnough) {
		err = nil
	}
	return err
}
