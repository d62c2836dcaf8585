package cli

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/flecht-dev/flecht/internal/devenv"
	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/ui"
)

// DevOptions are the inputs of `flecht dev`.
type DevOptions struct {
	IO         *ui.IOStreams
	Printer    func() *ui.Printer
	Logger     func() *slog.Logger
	KafkaPort  int
	MQTTPort   int
	Partitions int
	Topics     []string
	DataDir    string
	// Ready, when set, is called with the running env (tests).
	Ready func(*devenv.Env)
}

// DevInfo is what `flecht dev` prints once both brokers listen.
type DevInfo struct {
	Kafka   string `json:"kafka"`
	MQTT    string `json:"mqtt"`
	MQTTURL string `json:"mqtt_url"`
	Export  string `json:"export"`
}

// NewCmdDev builds `flecht dev`.
func NewCmdDev(f *Factory, runF func(*DevOptions) error) *cobra.Command {
	opts := &DevOptions{IO: f.IO, Printer: f.Printer, Logger: f.Logger}
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run an embedded Kafka and MQTT 5 broker on 127.0.0.1 until Ctrl-C",
		Long: `Start an embedded Kafka broker (franz-go's kfake: transactions, consumer
groups, admin requests) and an embedded MQTT 5 broker (mochi-mqtt) on
127.0.0.1, print their addresses and the export line a second terminal
needs, and run until Ctrl-C or SIGTERM.

Nothing to install: it is the quickest way to try flecht, kcat or any Kafka
or MQTT client. It is a convenience, not a production broker and not the
proof of delivery: data lives in memory (or --data-dir), there is one broker
and no replication, and the MQTT broker's redelivery order differs from
Mosquitto's. Topics are not auto-created: create them with --topic or any
admin client.`,
		Example: `  flecht dev
  flecht dev --kafka-port 0 --mqtt-port 0 -o json     # any free ports, machine-readable
  flecht dev --topic sensors.raw:6 --topic sensors.refined:6`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(opts)
			}
			return runDev(cmd.Context(), opts)
		},
	}
	cmd.Flags().IntVar(&opts.KafkaPort, "kafka-port", devenv.DefaultKafkaPort, "Kafka port on 127.0.0.1 (0 = any free port)")
	cmd.Flags().IntVar(&opts.MQTTPort, "mqtt-port", devenv.DefaultMQTTPort, "MQTT port on 127.0.0.1 (0 = any free port)")
	cmd.Flags().IntVar(&opts.Partitions, "partitions", 1, "default partition count of topics created without one")
	cmd.Flags().StringArrayVar(&opts.Topics, "topic", nil, "create a topic at start, NAME or NAME:PARTITIONS (repeatable)")
	cmd.Flags().StringVar(&opts.DataDir, "data-dir", "", "keep Kafka's data in this directory across restarts (default: memory)")
	return cmd
}

func parseTopicSpecs(specs []string, defaultPartitions int) ([]devenv.Topic, error) {
	var out []devenv.Topic
	for _, s := range specs {
		name, count, hasCount := strings.Cut(s, ":")
		n := defaultPartitions
		if hasCount {
			v, err := strconv.Atoi(count)
			if err != nil || v < 1 {
				return nil, fmt.Errorf("--topic %q: partitions must be a positive number", s)
			}
			n = v
		}
		if name == "" {
			return nil, fmt.Errorf("--topic %q: empty topic name", s)
		}
		out = append(out, devenv.Topic{Name: name, Partitions: int32(n)})
	}
	return out, nil
}

func runDev(ctx context.Context, opts *DevOptions) error {
	for _, p := range []struct {
		name string
		v    int
	}{{"--kafka-port", opts.KafkaPort}, {"--mqtt-port", opts.MQTTPort}} {
		if p.v < 0 || p.v > 65535 {
			return exitcode.UsageError(fmt.Errorf("%s %d is not a port (0-65535)", p.name, p.v))
		}
	}
	if opts.Partitions < 1 {
		return exitcode.UsageError(fmt.Errorf("--partitions must be at least 1"))
	}
	topics, err := parseTopicSpecs(opts.Topics, opts.Partitions)
	if err != nil {
		return exitcode.UsageError(err)
	}
	env, err := devenv.Start(ctx, devenv.Options{
		KafkaPort:         opts.KafkaPort,
		MQTTPort:          opts.MQTTPort,
		DefaultPartitions: opts.Partitions,
		Topics:            topics,
		DataDir:           opts.DataDir,
		Logger:            opts.Logger(),
	})
	if err != nil {
		return err
	}
	defer env.Close()

	info := DevInfo{
		Kafka:   env.KafkaAddr(),
		MQTT:    env.MQTTAddr(),
		MQTTURL: env.MQTTURL(),
		Export:  fmt.Sprintf("export FLECHT_BROKERS=%s FLECHT_MQTT_URL=%s", env.KafkaAddr(), env.MQTTURL()),
	}
	err = opts.Printer().Print(info, func(h *ui.Human) error {
		h.Printf("%s\n\n", h.Good("flecht dev is running")+h.Faint(" (embedded, in memory, 127.0.0.1 only)"))
		pairs := [][2]string{{"kafka", info.Kafka}, {"mqtt", info.MQTTURL}}
		if len(topics) > 0 {
			names := make([]string, len(topics))
			for i, t := range topics {
				names[i] = fmt.Sprintf("%s (%d)", t.Name, t.Partitions)
			}
			pairs = append(pairs, [2]string{"topics", strings.Join(names, ", ")})
		}
		h.KV(pairs...)
		h.Printf("\nIn another terminal:\n\n  %s\n  flecht cluster\n\n%s\n", info.Export, h.Faint("Ctrl-C stops it."))
		return nil
	})
	if err != nil {
		return err
	}
	if opts.Ready != nil {
		opts.Ready(env)
	}
	<-ctx.Done()
	if opts.Printer().Format == ui.FormatTable {
		fmt.Fprintln(opts.IO.ErrOut, "stopping")
	}
	return env.Close()
}
