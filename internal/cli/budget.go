package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/flecht-dev/flecht/internal/budget"
	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/profile"
	"github.com/flecht-dev/flecht/internal/show"
	"github.com/flecht-dev/flecht/internal/textfmt"
	"github.com/flecht-dev/flecht/internal/ui"
)

// BudgetOptions are the inputs of `flecht budget`. Values stay as typed on
// the command line and are parsed by budget.Plan, so that every bad value is
// a usage error naming its flag.
type BudgetOptions struct {
	IO      *ui.IOStreams
	Printer func() *ui.Printer
	// Flags are the values as typed, and how to read the systems they
	// name (budget.Plan parses and reads them).
	budget.Flags
}

const budgetLong = `Compute how long an MQTT stage may be down before the MQTT broker drops
data:

    budget = min(session_expiry, queue_limit / message_rate)

session_expiry is what the bridge asks for in CONNECT (an MQTT stage file's
mqtt.session_expiry, 24h by default); queue_limit is the broker's per-session
queue, which no client can raise (Mosquitto max_queued_messages, default
1000; EMQX mqtt.max_mqueue_len). Whichever binds first is the budget; the
report names it and says what to change. Overflow is silent, and brokers
differ in which end they keep: 'flecht budget probe' measures both.

Every input can come from the real systems instead of a flag:
  --mosquitto-conf FILE   max_queued_messages, max_queued_bytes (with
                          --message-size) and max_inflight_messages
  --measure TOPIC         the peak and mean message rate of the bridge's raw
                          topic, from record timestamps over --since, in
                          sliding --window windows (reads only that span;
                          the longer --since, the longer the shortest
                          --window it can resolve)
  -f stage.yaml           the session expiry (and Receive Maximum) of an
                          MQTT stage file
  --metrics-url URL       the receive→ack latency of a running bridge
                          (histogram flechtwerk_mqtt_ack_seconds), over the
                          acks between two scrapes --metrics-interval apart

There is a second limit while the bridge is connected: ACKing after the
Kafka commit, it holds at most the in-flight window of un-acked messages,
so it sustains about window / ack latency. The window is the stage's
Receive Maximum when it sets one (Mosquitto 2.0 uses it instead of
max_inflight_messages), else the broker's max_inflight_messages. Above that
rate the queue fills while the bridge is connected, and overflows without
any outage if the rate stays up longer than queue / excess; with --measure
the report replays the measured arrivals to see whether they did.

With --replicas above 1 the trade inverts: a replica that stays down keeps
its share queuing in its own session until the session expires, and the
broker then drops that backlog; a short session expiry hands the share to
the survivors sooner.

Rates: 10/s, 600/min, 36000/h (decimals allowed). Durations: 90s, 15m, 24h,
7d.`

const budgetExample = `  flecht budget --session-expiry 24h --queue-limit 10000 --rate 10/s
  flecht budget -f bridge.yaml --mosquitto-conf /etc/mosquitto/mosquitto.conf --measure sensors.raw --since 7d
  flecht budget --queue-limit 1000 --rate 200/s --inflight 20 --ack-latency 150ms -o json
  flecht budget --queue-limit 5000 --rate 50/s --replicas 3 --session-expiry 5m`

// NewCmdBudget builds `flecht budget` and its probe subcommand.
func NewCmdBudget(f *Factory, runF func(*BudgetOptions) error) *cobra.Command {
	opts := &BudgetOptions{IO: f.IO, Printer: f.Printer, Flags: budget.Flags{Now: time.Now}}
	opts.MeasureRate = func(ctx context.Context, topic string, since, window time.Duration, now time.Time, planned, add func(int64)) (*budget.Measurement, error) {
		cl, _, err := f.Kafka(ctx)
		if err != nil {
			return nil, err
		}
		defer cl.Close()
		return budget.Measure(ctx, cl, topic, since, window, now, planned, add)
	}
	opts.ScrapeAckLatency = func(ctx context.Context, url string, interval time.Duration) (*budget.AckLatency, error) {
		return budget.ScrapeAckLatency(ctx, nil, url, interval)
	}
	cmd := &cobra.Command{
		Use:     "budget",
		Short:   "Size an MQTT stage's outage budget: how long the bridge may be down",
		Long:    budgetLong,
		Example: budgetExample,
		Args:    usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(opts)
			}
			return runBudget(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.SessionExpiry, "session-expiry", "", "the session expiry the bridge asks for (default: the stage file's, or 24h)")
	fl.StringVarP(&opts.StageFile, "file", "f", "", "take the session expiry and receive_maximum from this MQTT stage file")
	fl.StringVar(&opts.QueueLimit, "queue-limit", "", "the broker's per-session queue in messages (0 = unlimited)")
	fl.StringVar(&opts.MosquittoConf, "mosquitto-conf", "", "read the queue and in-flight limits from this mosquitto.conf")
	fl.StringVar(&opts.MessageSize, "message-size", "", "typical message size, to count --mosquitto-conf's max_queued_bytes in messages (e.g. 512B, 2KiB)")
	fl.StringVar(&opts.Rate, "rate", "", "message rate at peak: 10/s, 600/min, 36000/h")
	fl.StringVar(&opts.Measure, "measure", "", "measure the rate from this Kafka topic's record timestamps (the bridge's raw topic)")
	fl.StringVar(&opts.Since, "since", "", "with --measure: how far back to read (default "+budget.DefaultSince+")")
	fl.StringVar(&opts.Window, "window", "", "with --measure: the window the peak rate is averaged over (default "+budget.DefaultWindow+")")
	fl.IntVar(&opts.Replicas, "replicas", 1, "replicas of the bridge (above 1 the expiry trade inverts)")
	fl.StringVar(&opts.Inflight, "inflight", "", "the broker's in-flight window of un-acked messages (Mosquitto max_inflight_messages, default 20; a stage file's receive_maximum replaces it)")
	fl.StringVar(&opts.AckLatency, "ack-latency", "", "the bridge's receive→ack time, e.g. 150ms")
	fl.StringVar(&opts.MetricsURL, "metrics-url", "", "scrape the ack latency from a running bridge's Prometheus endpoint")
	fl.StringVar(&opts.MinBudget, "min-budget", "", "the least outage budget you accept, e.g. 30m: a shorter one is a finding (exit 4) that says what reaches it")
	fl.StringVar(&opts.MetricsInterval, "metrics-interval", "", "with --metrics-url: the time between its two scrapes (default "+budget.DefaultMetricsInterval+")")
	cmd.AddCommand(NewCmdBudgetProbe(f, nil))
	return cmd
}

func runBudget(ctx context.Context, opts *BudgetOptions) error {
	fl := opts.Flags
	fl.Progress = func(label string) (planned, add func(int64), done func()) {
		p := ui.NewProgress(opts.IO, label)
		return p.SetTotal, p.Add, p.Done
	}
	fl.Waiting = func(what string) (done func()) {
		if !opts.IO.IsStderrTTY() {
			return func() {}
		}
		fmt.Fprintf(opts.IO.ErrOut, "\r%s\x1b[K", what)
		return func() { fmt.Fprint(opts.IO.ErrOut, "\r\x1b[K") }
	}
	rep, err := budget.Plan(ctx, fl)
	if err != nil {
		return err
	}
	if err := opts.Printer().Print(rep, func(h *ui.Human) error { return show.Budget(h, rep) }); err != nil {
		return err
	}
	// A finding fails a pipeline's gate, as doctor's and lint's do.
	if n := len(rep.Findings); n > 0 {
		return exitcode.FindingsError(fmt.Errorf("%d finding(s): %s", n, rep.Findings[0].Message))
	}
	return nil
}

// BudgetProbeOptions are the inputs of `flecht budget probe`.
type BudgetProbeOptions struct {
	IO      *ui.IOStreams
	Printer func() *ui.Printer
	// ProbeFlags are the values as typed (budget.NewProbeOptions checks
	// them).
	budget.ProbeFlags
	// Resolve gives the profile in use, for the MQTT settings no flag or
	// environment variable gives.
	Resolve func() (*profile.Resolved, error)
	Probe   func(ctx context.Context, o budget.ProbeOptions) (*budget.ProbeResult, error)
}

// NewCmdBudgetProbe builds `flecht budget probe`.
func NewCmdBudgetProbe(f *Factory, runF func(*BudgetProbeOptions) error) *cobra.Command {
	opts := &BudgetProbeOptions{IO: f.IO, Printer: f.Printer, ProbeFlags: budget.ProbeFlags{Getenv: f.Getenv}, Probe: budget.Probe, Resolve: f.Resolve}
	cmd := &cobra.Command{
		Use:   "probe",
		Short: "Measure an MQTT broker's per-session queue limit and which end it keeps",
		Long: `Measure the MQTT broker's real per-session queue: open a persistent session
(MQTT 5, QoS 1 subscription) under a fresh random client id and topic, go
offline, publish --count numbered messages from a second client, reconnect
and count what arrives until --quiet passes without a message. Then remove
the session again (clean start with session expiry 0).

It reports queue_limit (how many messages the offline session kept), keeps
(oldest, newest or unknown: which end survives an overflow) and what was
lost. --count must exceed the limit to find it; the default 2,000 covers the
common defaults (Mosquitto 1,000, EMQX 1,000). Use queue_limit with
'flecht budget --queue-limit'.

Each message is its number, a few bytes. A broker that limits the queue by
bytes (Mosquitto max_queued_bytes) holds many more of those than of real
messages: give --payload-size with your typical message size, and the
limit found is in messages of that size.

The broker comes from --mqtt, FLECHT_MQTT_URL, else the profile's mqtt.url
(with its username and password). An mqtts:// broker is always verified:
against the system roots, or the private CA of --mqtt-ca-file
(FLECHT_MQTT_CA_FILE, the profile's mqtt.tls.ca_file); --mqtt-cert-file and
--mqtt-key-file (FLECHT_MQTT_CERT_FILE, FLECHT_MQTT_KEY_FILE, the profile's
mqtt.tls) present a client certificate for mutual TLS.`,
		Example: `  flecht budget probe --mqtt mqtt://127.0.0.1:1883
  flecht budget probe --mqtt mqtts://127.0.0.1:8883 --username probe --password-env MQTT_PASSWORD --count 20000 -o json
  flecht budget probe --mqtt mqtts://mqtt.internal:8883 --mqtt-ca-file ca.pem --mqtt-cert-file probe.pem --mqtt-key-file probe.key
  flecht budget probe --mqtt mqtt://127.0.0.1:1883 --payload-size 1KiB`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(opts)
			}
			return runBudgetProbe(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.URL, "mqtt", "", "MQTT broker URL: mqtt://host:port or mqtts://host:port (env FLECHT_MQTT_URL; default: the profile's)")
	fl.StringVar(&opts.Username, "username", "", "MQTT username")
	fl.StringVar(&opts.PasswordEnv, "password-env", "", "environment variable holding the MQTT password")
	addMQTTTLSFlags(cmd, &opts.CAFile, &opts.CertFile, &opts.KeyFile)
	fl.IntVar(&opts.Count, "count", 2000, "messages to publish to the offline session (more than the queue holds)")
	fl.IntVar(&opts.QoS, "qos", 1, "QoS of the subscription and the messages (0, 1 or 2)")
	fl.StringVar(&opts.PayloadSize, "payload-size", "", "pad each message to this size (e.g. 1KiB) to probe a queue limited by max_queued_bytes (default: the number alone, a few bytes)")
	fl.StringVar(&opts.Quiet, "quiet", "2s", "stop counting after this long without a message")
	return cmd
}

func runBudgetProbe(ctx context.Context, opts *BudgetProbeOptions) error {
	po, err := budget.NewProbeOptions(opts.ProbeFlags, opts.Resolve)
	if err != nil {
		return err
	}
	if opts.IO.IsStderrTTY() {
		po.Step = func(s string) { fmt.Fprintf(opts.IO.ErrOut, "\r%s…\x1b[K", textfmt.Escape(s)) }
	}
	res, err := opts.Probe(ctx, po)
	if po.Step != nil {
		fmt.Fprint(opts.IO.ErrOut, "\r\x1b[K")
	}
	if err != nil {
		return err
	}
	if res.QueueLimit != nil && *res.QueueLimit == 0 && po.QoS == 0 {
		res.Summary += "; at QoS 0 that is usual (Mosquitto queues QoS 0 only with queue_qos0_messages true)"
	}
	return opts.Printer().Print(res, func(h *ui.Human) error { return show.ProbeResult(h, res) })
}
