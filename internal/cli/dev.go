package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/flecht-dev/flecht/internal/demo"
	"github.com/flecht-dev/flecht/internal/devenv"
	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/show"
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
	// Demo runs the demo pipeline on the brokers (internal/demo).
	Demo bool
	// Ready, when set, is called with the running env (tests).
	Ready func(*devenv.Env)
	// demoInterval overrides the demo's report interval (tests).
	demoInterval time.Duration
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
admin client.

--demo also runs a whole pipeline on them, in this process: a few simulated
sensors publish JSON readings (now and then a re-sent reading and a payload
that is not JSON) to sensors/<device>/events; the mqtt-relay bridge writes
them into sensors.raw (3 partitions) from the config record "sensors" on
sensors.config, ACKing each message after its Kafka transaction committed;
and a dedupe transformer (id data.reading_id) refines sensors.raw into
sensors.refined, exactly once. On a terminal a live view shows the rates,
drops by reason, deduplicated readings, the transformer's lag and the
transactions, refreshed every second; without one (or with -o json) it
prints one summary line (or JSON object) per second. Ctrl-C stops it all.`,
		Example: `  flecht dev
  flecht dev --demo                                   # the pipeline, with a live view
  flecht dev --demo --kafka-port 0 --mqtt-port 0 -o json | jq .refined
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
	cmd.Flags().BoolVar(&opts.Demo, "demo", false, "also run the demo pipeline (sensors → MQTT → sensors.raw → dedupe → sensors.refined) with a live view")
	return cmd
}

func runDev(ctx context.Context, opts *DevOptions) error {
	for _, p := range []struct {
		name string
		v    int
	}{{"--kafka-port", opts.KafkaPort}, {"--mqtt-port", opts.MQTTPort}} {
		if p.v < 0 || p.v > 65535 {
			return exitcode.Usagef("%s %d is not a port (0-65535)", p.name, p.v)
		}
	}
	if opts.Partitions < 1 {
		return exitcode.Usagef("--partitions must be at least 1")
	}
	topics, err := devenv.ParseTopics(opts.Topics, opts.Partitions)
	if err != nil {
		return exitcode.UsageError(err)
	}
	logger := opts.Logger()
	var d *demo.Demo
	if opts.Demo {
		if d, err = newDemo(opts); err != nil {
			return err
		}
		logger = d.Logger(logger) // in the live view, warnings go on screen
	}
	env, err := devenv.Start(ctx, devenv.Options{
		KafkaPort:         opts.KafkaPort,
		MQTTPort:          opts.MQTTPort,
		DefaultPartitions: opts.Partitions,
		Topics:            topics,
		DataDir:           opts.DataDir,
		Logger:            logger,
	})
	if err != nil {
		return err
	}
	defer env.Close()
	if d != nil {
		if opts.Ready != nil {
			opts.Ready(env)
		}
		return errors.Join(d.Run(ctx, env), env.Close())
	}

	info := env.Info()
	err = opts.Printer().Print(info, func(h *ui.Human) error { return show.DevRunning(h, info, topics) })
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

// newDemo prepares `flecht dev --demo`: a live view on a terminal, a line
// per interval without one, a JSON object per interval with -o json.
func newDemo(opts *DevOptions) (*demo.Demo, error) {
	o := demo.Options{Out: opts.IO.Out, Color: opts.IO.ColorEnabled(), Interval: opts.demoInterval, Log: opts.Logger()}
	switch format := opts.Printer().Format; {
	case format == ui.FormatJSON:
		o.Mode = demo.JSON
	case format == ui.FormatYAML:
		return nil, exitcode.UsageError(errors.New("--demo prints a live view, summary lines or JSON lines (-o json), not YAML"))
	case opts.IO.IsStdoutTTY():
		o.Mode = demo.Live
	default:
		o.Mode = demo.Lines
	}
	return demo.New(o), nil
}
