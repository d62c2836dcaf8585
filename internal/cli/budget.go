package cli

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/flecht-dev/flecht/internal/budget"
	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/profile"
	"github.com/flecht-dev/flecht/internal/stagefile"
	"github.com/flecht-dev/flecht/internal/textfmt"
	"github.com/flecht-dev/flecht/internal/ui"
)

// BudgetOptions are the inputs of `flecht budget`. Values stay as typed on
// the command line and are parsed by runBudget, so that every bad value is
// a usage error naming its flag.
type BudgetOptions struct {
	IO      *ui.IOStreams
	Printer func() *ui.Printer
	Now     func() time.Time

	SessionExpiry string
	StageFile     string
	QueueLimit    string
	MosquittoConf string
	MessageSize   string
	Rate          string
	Measure       string
	Since         string
	Window        string
	Replicas      int
	Inflight      string
	AckLatency    string
	MetricsURL    string
	// MetricsInterval is the time between the two scrapes of MetricsURL.
	MetricsInterval string
	// MinBudget is the least budget that is no finding (exit 4).
	MinBudget string

	// MeasureRate reads a topic's rate (--measure); planned and add drive
	// the progress indicator.
	MeasureRate func(ctx context.Context, topic string, since, window time.Duration, now time.Time, planned, add func(int64)) (*budget.Measurement, error)
	// ScrapeAckLatency reads the bridge's ack latency (--metrics-url),
	// scraping twice interval apart.
	ScrapeAckLatency func(ctx context.Context, url string, interval time.Duration) (*budget.AckLatency, error)
}

// BudgetReport is what `flecht budget` prints: the computed budget plus
// where the measured inputs came from.
type BudgetReport struct {
	*budget.Result
	StageFile   string                `json:"stage_file,omitempty"`
	Measurement *budget.Measurement   `json:"measurement,omitempty"`
	Mosquitto   *budget.MosquittoConf `json:"mosquitto_conf,omitempty"`
	AckScrape   *budget.AckLatency    `json:"ack_latency_scrape,omitempty"`
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
	opts := &BudgetOptions{IO: f.IO, Printer: f.Printer, Now: time.Now}
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
	fl.StringVar(&opts.Since, "since", "", "with --measure: how far back to read (default "+defaultSince+")")
	fl.StringVar(&opts.Window, "window", "", "with --measure: the window the peak rate is averaged over (default "+defaultWindow+")")
	fl.IntVar(&opts.Replicas, "replicas", 1, "replicas of the bridge (above 1 the expiry trade inverts)")
	fl.StringVar(&opts.Inflight, "inflight", "", "the broker's in-flight window of un-acked messages (Mosquitto max_inflight_messages, default 20; a stage file's receive_maximum replaces it)")
	fl.StringVar(&opts.AckLatency, "ack-latency", "", "the bridge's receive→ack time, e.g. 150ms")
	fl.StringVar(&opts.MetricsURL, "metrics-url", "", "scrape the ack latency from a running bridge's Prometheus endpoint")
	fl.StringVar(&opts.MinBudget, "min-budget", "", "the least outage budget you accept, e.g. 30m: a shorter one is a finding (exit 4) that says what reaches it")
	fl.StringVar(&opts.MetricsInterval, "metrics-interval", "", "with --metrics-url: the time between its two scrapes (default "+defaultMetricsInterval+")")
	cmd.AddCommand(NewCmdBudgetProbe(f, nil))
	return cmd
}

func parseCount(flag, s string) (int64, error) {
	v, err := strconv.ParseInt(strings.NewReplacer("_", "", ",", "").Replace(strings.TrimSpace(s)), 10, 64)
	if err != nil || v < 0 {
		return 0, exitcode.UsageError(fmt.Errorf("--%s %q: want a whole number of messages, 0 or more", flag, s))
	}
	return v, nil
}

func usagef(format string, args ...any) error {
	return exitcode.UsageError(fmt.Errorf(format, args...))
}

// Defaults of the flags that only mean something with another flag; they
// are empty in the options so that giving one alone is caught.
const (
	defaultSince           = "7d"
	defaultWindow          = "1m"
	defaultMetricsInterval = "10s"
)

// maxSessionExpiry is MQTT's largest Session Expiry Interval, in seconds
// (a four-byte integer; this value means "never expires").
const maxSessionExpiry = 4294967295 * time.Second

// budgetInputs collects what runBudget computes from, and the report's
// side of it.
type budgetInputs struct {
	in       budget.Inputs
	rep      *BudgetReport
	warnings []string
	// receiveMax is the stage file's mqtt.receive_maximum (0: none).
	receiveMax int
	// since and windowLen are --since and --window, checked; now is
	// when the measurement ends.
	since, windowLen time.Duration
	now              time.Time
}

func runBudget(ctx context.Context, opts *BudgetOptions) error {
	if err := checkBudgetFlags(opts); err != nil {
		return err
	}
	b := &budgetInputs{rep: &BudgetReport{}, in: budget.Inputs{Replicas: opts.Replicas}}
	for _, step := range []func(context.Context, *BudgetOptions) error{
		b.sessionExpiry, b.limits, b.window, b.rate, b.ackLatency,
	} {
		if err := step(ctx, opts); err != nil {
			return err
		}
	}
	if b.in.AckLatency > 0 && b.in.Inflight == 0 && !b.in.InflightUnlimited {
		b.warnings = append(b.warnings, "give --inflight or --mosquitto-conf to turn the ack latency into an online capacity")
	}
	if opts.MinBudget != "" {
		d, err := budget.ParseDuration(opts.MinBudget)
		if err != nil || d <= 0 {
			return usagef("--min-budget %q: want a duration above 0 such as 30m", opts.MinBudget)
		}
		b.in.MinBudget = d
	}
	rep := b.rep
	rep.Result = budget.Compute(b.in)
	rep.Warnings = append(rep.Warnings, b.warnings...)
	if err := opts.Printer().Print(rep, func(h *ui.Human) error { return printBudget(h, rep) }); err != nil {
		return err
	}
	// A finding fails a pipeline's gate, as doctor's and lint's do.
	if n := len(rep.Findings); n > 0 {
		return exitcode.FindingsError(fmt.Errorf("%d finding(s): %s", n, rep.Findings[0].Message))
	}
	return nil
}

// checkBudgetFlags refuses flags that need another one, and combinations
// that exclude each other, before anything is read.
func checkBudgetFlags(opts *BudgetOptions) error {
	switch {
	case opts.Replicas < 1:
		return usagef("--replicas must be at least 1, got %d", opts.Replicas)
	case opts.Rate != "" && opts.Measure != "":
		return usagef("--rate and --measure exclude each other")
	case opts.Measure == "" && opts.Since != "":
		return usagef("--since needs --measure TOPIC: it says how far back to read the topic")
	case opts.Measure == "" && opts.Window != "":
		return usagef("--window needs --measure TOPIC: it is the window the measured peak is averaged over")
	case opts.AckLatency != "" && opts.MetricsURL != "":
		return usagef("--ack-latency and --metrics-url exclude each other")
	case opts.MetricsURL == "" && opts.MetricsInterval != "":
		return usagef("--metrics-interval needs --metrics-url URL: it is the time between its two scrapes")
	case opts.MessageSize != "" && opts.MosquittoConf == "":
		return usagef("--message-size counts the broker's max_queued_bytes in messages: give --mosquitto-conf FILE with max_queued_bytes, or drop --message-size")
	}
	return nil
}

// sessionExpiry: the flag, else the stage file, else the default. The
// stage file also gives the Receive Maximum.
func (b *budgetInputs) sessionExpiry(_ context.Context, opts *BudgetOptions) error {
	b.in.SessionExpiry, b.in.SessionExpirySource = stagefile.DefaultSessionExpiry, "default"
	if opts.StageFile != "" {
		st, err := stagefile.Load(opts.StageFile)
		if err != nil {
			return exitcode.UsageError(err)
		}
		if st.Kind != stagefile.KindMQTT {
			return usagef("%s is a %s stage: -f takes an mqtt stage file", opts.StageFile, st.Kind)
		}
		b.rep.StageFile = opts.StageFile
		b.in.SessionExpiry, b.in.SessionExpirySource = st.SessionExpiry(), "stage-file"
		b.receiveMax = st.MQTT.ReceiveMax()
	}
	if opts.SessionExpiry != "" {
		d, err := budget.ParseDuration(opts.SessionExpiry)
		if err != nil {
			return usagef("--session-expiry: %v", err)
		}
		if err := checkSessionExpiry(opts.SessionExpiry, d); err != nil {
			return err
		}
		b.in.SessionExpiry, b.in.SessionExpirySource = d, "flag"
	}
	if b.in.SessionExpiry <= 0 {
		return usagef("a session expiry of 0 ends the session at every disconnect: the budget is zero")
	}
	return nil
}

// checkSessionExpiry holds --session-expiry to what CONNECT can carry: a
// whole number of seconds, at most MQTT's maximum (0 is refused later,
// wherever it comes from).
func checkSessionExpiry(flag string, d time.Duration) error {
	switch {
	case d == 0:
		return nil
	case d < time.Second:
		return usagef("--session-expiry %s: MQTT counts the session expiry in whole seconds; give 1s or more", flag)
	case d%time.Second != 0:
		return usagef("--session-expiry %s: MQTT counts the session expiry in whole seconds; give %s or %s", flag,
			textfmt.FormatDuration(d.Truncate(time.Second)), textfmt.FormatDuration(d.Truncate(time.Second)+time.Second))
	case d > maxSessionExpiry:
		return usagef("--session-expiry %s is above MQTT's maximum of 4294967295s (about 136 years, which means never)", flag)
	}
	return nil
}

// limits: the queue and in-flight limits from the flags, else from
// mosquitto.conf.
func (b *budgetInputs) limits(_ context.Context, opts *BudgetOptions) error {
	in := &b.in
	if opts.MosquittoConf != "" {
		if err := b.mosquittoConf(opts.MosquittoConf); err != nil {
			return err
		}
	}
	if opts.QueueLimit != "" {
		v, err := parseCount("queue-limit", opts.QueueLimit)
		if err != nil {
			return err
		}
		in.QueueLimit, in.QueueLimitSource = v, "flag"
	}
	if opts.QueueLimit == "" && opts.MosquittoConf == "" {
		return usagef("give --queue-limit N or --mosquitto-conf FILE (or measure the broker with 'flecht budget probe')")
	}
	if opts.MessageSize != "" {
		v, err := budget.ParseSize(opts.MessageSize)
		if err != nil || v <= 0 {
			return usagef("--message-size %q: want a size such as 512B or 2KiB", opts.MessageSize)
		}
		if in.QueueBytes == 0 {
			return usagef("--message-size counts max_queued_bytes in messages, but %s sets no max_queued_bytes: drop --message-size", opts.MosquittoConf)
		}
		in.MessageSize = v
	}
	if opts.Inflight != "" {
		v, err := parseCount("inflight", opts.Inflight)
		if err != nil {
			return err
		}
		if v > budget.MaxInflight {
			return usagef("--inflight %s: an in-flight window is at most %d in MQTT (0 for none)", opts.Inflight, budget.MaxInflight)
		}
		in.Inflight, in.InflightSource, in.InflightUnlimited = int(v), "flag", v == 0
	}
	b.applyReceiveMaximum()
	return nil
}

func (b *budgetInputs) mosquittoConf(path string) error {
	in := &b.in
	conf, err := budget.LoadMosquittoConf(path)
	if err != nil {
		return exitcode.UsageError(err)
	}
	b.rep.Mosquitto = conf
	b.warnings = append(b.warnings, conf.Warnings...)
	in.QueueLimit, in.QueueLimitSource = conf.MaxQueuedMessages, "mosquitto-conf"
	if !conf.IsSet("max_queued_messages") {
		in.QueueLimitSource = "mosquitto-conf (Mosquitto's default)"
	}
	in.QueueBytes = conf.MaxQueuedBytes
	in.Inflight, in.InflightSource = conf.MaxInflightMessages, "mosquitto-conf"
	in.InflightUnlimited = conf.MaxInflightMessages == 0
	if exp := conf.PersistentClientExpirationS; exp > 0 && exp < in.SessionExpiry.Seconds() {
		b.warnings = append(b.warnings, fmt.Sprintf("mosquitto.conf sets persistent_client_expiration %s, shorter than the session expiry %s: Mosquitto may remove the session sooner",
			textfmt.FormatDuration(time.Duration(exp)*time.Second), textfmt.FormatDuration(in.SessionExpiry)))
	}
	return nil
}

// applyReceiveMaximum makes the stage's Receive Maximum the window, as the
// bridge sends it in CONNECT and Mosquitto 2.0 then uses it instead of
// max_inflight_messages, larger or smaller (measured on 2.0.11 in
// e2e/mqtt_bridge_test.go). The broker's window applies only when the
// stage sets none (the stage file refuses values outside 1..65535).
func (b *budgetInputs) applyReceiveMaximum() {
	in, rm := &b.in, b.receiveMax
	if rm == 0 {
		return
	}
	source := "stage-file receive_maximum"
	if in.Inflight > 0 && in.Inflight != rm {
		source += fmt.Sprintf(" (Mosquitto 2.0 uses it instead of the broker's %d; EMQX would use the smaller)", in.Inflight)
	} else if in.InflightUnlimited {
		source += " (the broker sets no window of its own)"
	}
	in.Inflight, in.InflightSource, in.InflightUnlimited = rm, source, false
}

// window checks --since and --window against each other before anything
// is read: the window must be a whole number of buckets the span allows.
func (b *budgetInputs) window(_ context.Context, opts *BudgetOptions) error {
	if opts.Measure == "" {
		return nil
	}
	since, err := budget.ParseDuration(orDefault(opts.Since, defaultSince))
	if err != nil || since <= 0 {
		return usagef("--since %q: want a duration such as 7d or 12h", opts.Since)
	}
	window, err := budget.ParseDuration(orDefault(opts.Window, defaultWindow))
	if err != nil || window < time.Millisecond {
		return usagef("--window %q: want a duration of 1ms or more, such as 1m", opts.Window)
	}
	// The span is --since, or less when that reaches before 1970.
	now := opts.Now()
	span := now.Sub(budget.MeasureFrom(now, since))
	if window > span {
		return usagef("--window %s is longer than --since %s", orDefault(opts.Window, defaultWindow), textfmt.FormatDuration(span))
	}
	var we *budget.WindowError
	if err := budget.CheckWindow(span, window); errors.As(err, &we) {
		we.WindowName, we.SpanName = "--window", "--since"
		return exitcode.UsageError(we)
	}
	b.since, b.windowLen, b.now = since, window, now
	return nil
}

// rate: the flag, or measured from a topic.
func (b *budgetInputs) rate(ctx context.Context, opts *BudgetOptions) error {
	in := &b.in
	switch {
	case opts.Rate != "":
		r, err := budget.ParseRate(opts.Rate)
		if err != nil {
			return usagef("--rate: %v", err)
		}
		in.Rate, in.RateSource = r, "flag"
		return nil
	case opts.Measure == "":
		return usagef("give --rate R (e.g. 10/s) or --measure TOPIC")
	}
	p := ui.NewProgress(opts.IO, "reading "+opts.Measure)
	m, err := opts.MeasureRate(ctx, opts.Measure, b.since, b.windowLen, b.now, p.SetTotal, p.Add)
	p.Done()
	if err != nil {
		return err
	}
	b.rep.Measurement = m
	in.Rate, in.RateSource, in.MeanRate, in.Backlog = m.PeakPerS, "measured-peak", m.MeanPerS, m.Backlog
	if m.Records == 0 {
		b.warnings = append(b.warnings, fmt.Sprintf("%s has no records stamped in the last %s: the measured rate is 0", opts.Measure, textfmt.FormatDuration(b.since)))
	}
	if m.OutOfRange > 0 {
		b.warnings = append(b.warnings, fmt.Sprintf("%s: %d records read were stamped outside the measured span (producer clocks?) and not counted", opts.Measure, m.OutOfRange))
	}
	// A window of few buckets slides in coarse steps: a burst as long as
	// the window can fall across two of them.
	if steps := m.WindowS / m.ResolutionS; m.ResolutionS > 0 && steps < 10 {
		b.warnings = append(b.warnings, fmt.Sprintf("over --since %s the peak window slides in steps of %s, %.0f per window: a burst as long as the window may read up to %.0f%% low; a shorter --since gives finer steps",
			textfmt.FormatDuration(b.since), textfmt.FormatDuration(time.Duration(m.ResolutionS*float64(time.Second))), steps, 100/steps))
	}
	return nil
}

// ackLatency: the flag, or scraped twice from a running bridge.
func (b *budgetInputs) ackLatency(ctx context.Context, opts *BudgetOptions) error {
	in := &b.in
	switch {
	case opts.AckLatency != "":
		d, err := budget.ParseDuration(opts.AckLatency)
		if err != nil || d <= 0 {
			return usagef("--ack-latency %q: want a duration such as 150ms", opts.AckLatency)
		}
		in.AckLatency, in.AckLatencySource = d, "flag"
	case opts.MetricsURL != "":
		if u, err := url.Parse(opts.MetricsURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return usagef("--metrics-url %q: want the bridge's metrics endpoint, such as http://bridge:9090/metrics", opts.MetricsURL)
		}
		interval, err := budget.ParseDuration(orDefault(opts.MetricsInterval, defaultMetricsInterval))
		if err != nil || interval <= 0 {
			return usagef("--metrics-interval %q: want a duration such as 10s", opts.MetricsInterval)
		}
		if opts.IO.IsStderrTTY() {
			fmt.Fprintf(opts.IO.ErrOut, "\rscraping %s twice, %s apart…\x1b[K", textfmt.Escape(opts.MetricsURL), textfmt.FormatDuration(interval))
			defer fmt.Fprint(opts.IO.ErrOut, "\r\x1b[K")
		}
		a, err := opts.ScrapeAckLatency(ctx, opts.MetricsURL, interval)
		if err != nil {
			return err
		}
		b.rep.AckScrape = a
		in.AckLatency, in.AckLatencySource = a.Mean(), "metrics"
		if a.Lifetime {
			in.AckLatencySource = "metrics, lifetime mean"
		}
		if a.Note != "" {
			b.warnings = append(b.warnings, a.Note)
		}
	}
	return nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
func printBudget(h *ui.Human, rep *BudgetReport) error {
	r := rep.Result
	binding := "the session expiry binds"
	if r.Binding == budget.BindingQueue {
		binding = "the queue binds"
	}
	h.Printf("%s %s (%s)\n\n", h.Bold("Outage budget:"), h.Bold(textfmt.FormatDuration(r.Budget())), binding)

	queue := "unlimited"
	if r.QueueLimit != nil {
		queue = budget.Messages(*r.QueueLimit)
	}
	fill := "never"
	if r.QueueFillS != nil {
		fill = textfmt.FormatDuration(time.Duration(*r.QueueFillS * float64(time.Second)))
	}
	rate := textfmt.FormatRate(r.RatePerS)
	if r.MeanRatePerS != nil {
		rate += ", mean " + textfmt.FormatRate(*r.MeanRatePerS)
	}
	pairs := [][2]string{
		{"session expiry", fmt.Sprintf("%s (%s)", textfmt.FormatDuration(time.Duration(r.SessionExpiryS*float64(time.Second))), r.SessionExpirySource)},
		{"queue limit", fmt.Sprintf("%s (%s)", queue, r.QueueLimitSource)},
	}
	if r.QueueBytesLimit > 0 {
		pairs = append(pairs, [2]string{"queue bytes", textfmt.FormatBytes(r.QueueBytesLimit) + " (max_queued_bytes)"})
	}
	pairs = append(pairs, [2]string{"message rate", fmt.Sprintf("%s (%s)", rate, r.RateSource)}, [2]string{"queue fills in", fill})
	if m := rep.Measurement; m != nil {
		peakAt := ""
		if m.PeakWindowStart != nil {
			peakAt = ", peak window from " + m.PeakWindowStart.Format(time.RFC3339)
		}
		pairs = append(pairs, [2]string{"measured", fmt.Sprintf("%s over %s: %s records in %s windows%s",
			m.Topic, textfmt.FormatDuration(time.Duration(m.SinceS*float64(time.Second))), textfmt.GroupDigits(m.Records),
			textfmt.FormatDuration(time.Duration(m.WindowS*float64(time.Second))), peakAt)})
	}
	if r.InflightWindow != nil {
		pairs = append(pairs, [2]string{"in-flight window", fmt.Sprintf("%d (%s)", *r.InflightWindow, r.InflightSource)})
	}
	if r.AckLatencyS != nil {
		pairs = append(pairs, [2]string{"ack latency", fmt.Sprintf("%s (%s)", textfmt.FormatDuration(time.Duration(*r.AckLatencyS*float64(time.Second))), r.AckLatencySource)})
	}
	if r.OnlineCapacityPerS != nil {
		c := textfmt.FormatRate(*r.OnlineCapacityPerS)
		if r.DrainS != nil {
			c += fmt.Sprintf("; a full queue drains in %s", textfmt.FormatDuration(time.Duration(*r.DrainS*float64(time.Second))))
		}
		pairs = append(pairs, [2]string{"online capacity", c})
	}
	if r.Replicas > 1 {
		pairs = append(pairs, [2]string{"replicas", strconv.Itoa(r.Replicas)})
	}
	h.KV(pairs...)
	h.Printf("\n%s\n", r.Advice)
	if r.ReplicaAdvice != "" {
		h.Printf("%s\n", r.ReplicaAdvice)
	}
	for _, w := range r.Warnings {
		h.Printf("%s %s\n", h.Warn("warning:"), w)
	}
	for _, f := range r.Findings {
		h.Printf("%s %s\n", h.Bad("finding:"), f.Message)
	}
	return nil
}

// payloadDesc names a probe's payload size next to its QoS ("" when the
// payload is the number alone).
func payloadDesc(size int) string {
	if size == 0 {
		return ""
	}
	return ", " + textfmt.FormatBytes(int64(size)) + " each"
}

// BudgetProbeOptions are the inputs of `flecht budget probe`.
type BudgetProbeOptions struct {
	IO          *ui.IOStreams
	Printer     func() *ui.Printer
	Getenv      func(string) string
	URL         string
	Username    string
	PasswordEnv string
	// CAFile, CertFile and KeyFile are --mqtt-ca-file, --mqtt-cert-file
	// and --mqtt-key-file.
	CAFile, CertFile, KeyFile string
	Count                     int
	QoS                       int
	PayloadSize               string
	Quiet                     string
	// Resolve gives the profile in use, for the MQTT settings no flag or
	// environment variable gives.
	Resolve func() (*profile.Resolved, error)
	Probe   func(ctx context.Context, o budget.ProbeOptions) (*budget.ProbeResult, error)
}

// NewCmdBudgetProbe builds `flecht budget probe`.
func NewCmdBudgetProbe(f *Factory, runF func(*BudgetProbeOptions) error) *cobra.Command {
	opts := &BudgetProbeOptions{IO: f.IO, Printer: f.Printer, Getenv: f.Getenv, Probe: budget.Probe, Resolve: f.Resolve}
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
	usage := func(format string, args ...any) error { return exitcode.UsageError(fmt.Errorf(format, args...)) }
	if opts.Count < 1 {
		return usage("--count must be at least 1, got %d", opts.Count)
	}
	if opts.QoS < 0 || opts.QoS > 2 {
		return usage("--qos must be 0, 1 or 2, got %d", opts.QoS)
	}
	quiet, err := budget.ParseDuration(opts.Quiet)
	if err != nil || quiet <= 0 {
		return usage("--quiet %q: want a duration such as 2s", opts.Quiet)
	}
	po := budget.ProbeOptions{URL: opts.URL, Username: opts.Username, Count: opts.Count, QoS: byte(opts.QoS), Quiet: quiet}
	if opts.PayloadSize != "" {
		n, err := budget.ParseSize(opts.PayloadSize)
		if err != nil || n < 1 || n > budget.MaxProbePayload {
			return usage("--payload-size %q: want a size from 1B to %s, such as 1KiB", opts.PayloadSize, textfmt.FormatBytes(budget.MaxProbePayload))
		}
		po.PayloadSize = int(n)
	}
	if opts.PasswordEnv != "" {
		if po.Password = opts.Getenv(opts.PasswordEnv); po.Password == "" {
			return usage("--password-env %s: the variable is empty or unset", opts.PasswordEnv)
		}
	}
	r, err := opts.Resolve()
	if err != nil {
		return err
	}
	conn := profile.ResolveMQTT("", profile.MQTTFlags("--mqtt", opts.URL, opts.CAFile, opts.CertFile, opts.KeyFile), profile.MQTTEnv(opts.Getenv), r.MQTTProfile())
	if conn.URL == "" {
		return usage("give --mqtt URL (or set %s, or mqtt.url in the profile)", profile.EnvMQTTURL)
	}
	if err := conn.Err(); err != nil {
		return exitcode.UsageError(err)
	}
	if po.TLS, err = conn.TLSConfig(); err != nil {
		return exitcode.UsageError(err)
	}
	po.URL, po.TLSPeer = conn.URL, conn.Peer()
	if m := r.MQTT; m != nil && conn.URLSource == profile.SourceProfile {
		// The profile's login goes with the profile's broker.
		if po.Username == "" {
			po.Username = m.Username
		}
		if po.Password == "" {
			if po.Password, err = m.Password.Resolve(opts.Getenv); err != nil {
				return err
			}
		}
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
	return opts.Printer().Print(res, func(h *ui.Human) error {
		limit := "not reached: every message came back"
		if res.QueueLimit != nil {
			limit = budget.Messages(int64(*res.QueueLimit))
		}
		removed := res.ClientID + ", removed"
		if !res.SessionRemoved {
			removed = h.Warn(res.ClientID + " NOT removed: connect as it with clean start and session expiry 0 to remove it")
		}
		pairs := [][2]string{
			{"broker", res.Broker},
			{"published", fmt.Sprintf("%s (QoS %d%s) to %s while offline", budget.Messages(int64(res.Published)), res.QoS, payloadDesc(res.PayloadSize), res.Topic)},
			{"received", fmt.Sprintf("%s (%d duplicates)", textfmt.GroupDigits(int64(res.Received)), res.Duplicates)},
			{"queue limit", limit},
			{"keeps", res.Keeps},
			{"lost", fmt.Sprintf("%s (%s)", budget.FormatRanges(res.Lost), textfmt.GroupDigits(int64(res.LostCount)))},
		}
		if res.SessionExpiryGrantedS != nil {
			pairs = append(pairs, [2]string{"expiry granted", textfmt.FormatDuration(time.Duration(*res.SessionExpiryGrantedS) * time.Second)})
		}
		pairs = append(pairs, [2]string{"probe session", removed})
		h.KV(pairs...)
		h.Printf("\n%s\n", res.Summary)
		if res.QueueLimit != nil && *res.QueueLimit > 0 {
			h.Printf("%s flecht budget --queue-limit %d --rate R\n", h.Faint("next:"), *res.QueueLimit)
		}
		return nil
	})
}
