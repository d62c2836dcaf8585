package budget

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/stagefile"
	"github.com/flecht-dev/flecht/internal/textfmt"
)

// Flags are what `flecht budget` was given, as typed, and how to reach
// the systems they name.
type Flags struct {
	SessionExpiry   string
	StageFile       string
	QueueLimit      string
	MosquittoConf   string
	MessageSize     string
	Rate            string
	Measure         string
	Since           string
	Window          string
	Replicas        int
	Inflight        string
	AckLatency      string
	MetricsURL      string
	MetricsInterval string // the time between the two scrapes of MetricsURL
	MinBudget       string // the least budget that is no finding
	Now             func() time.Time

	// MeasureRate reads a topic's rate (Measure); planned and add drive a
	// progress indicator.
	MeasureRate func(ctx context.Context, topic string, since, window time.Duration, now time.Time, planned, add func(int64)) (*Measurement, error)
	// ScrapeAckLatency reads the bridge's ack latency (MetricsURL),
	// scraping twice interval apart.
	ScrapeAckLatency func(ctx context.Context, url string, interval time.Duration) (*AckLatency, error)
	// Progress shows the progress of a long read; Waiting says what is
	// being waited for. Each returns what ends it.
	Progress func(label string) (planned, add func(int64), done func())
	Waiting  func(what string) (done func())
}

// Report is the computed budget plus where the measured inputs came from:
// what `flecht budget` prints.
type Report struct {
	*Result
	StageFile   string         `json:"stage_file,omitempty"`
	Measurement *Measurement   `json:"measurement,omitempty"`
	Mosquitto   *MosquittoConf `json:"mosquitto_conf,omitempty"`
	AckScrape   *AckLatency    `json:"ack_latency_scrape,omitempty"`
}

// Defaults of the flags that only mean something with another flag; they
// are empty in the options so that giving one alone is caught.
const (
	DefaultSince           = "7d"
	DefaultWindow          = "1m"
	DefaultMetricsInterval = "10s"
)

// maxSessionExpiry is MQTT's largest Session Expiry Interval, in seconds
// (a four-byte integer; this value means "never expires").
const maxSessionExpiry = 4294967295 * time.Second

// inputs collects what Plan computes from, and the report's side of it.
type inputs struct {
	in       Inputs
	rep      *Report
	warnings []string
	// receiveMax is the stage file's mqtt.receive_maximum (0: none).
	receiveMax int
	// since and windowLen are --since and --window, checked; now is
	// when the measurement ends.
	since, windowLen time.Duration
	now              time.Time
}

// Plan resolves every input from the flags and the systems they name (a
// stage file, mosquitto.conf, a topic's record timestamps, a bridge's
// metrics) and computes the budget; a bad value is a usage error naming its
// flag.
func Plan(ctx context.Context, opts Flags) (*Report, error) {
	if err := checkFlags(opts); err != nil {
		return nil, err
	}
	b := &inputs{rep: &Report{}, in: Inputs{Replicas: opts.Replicas}}
	for _, step := range []func(context.Context, Flags) error{
		b.sessionExpiry, b.limits, b.window, b.rate, b.ackLatency,
	} {
		if err := step(ctx, opts); err != nil {
			return nil, err
		}
	}
	if b.in.AckLatency > 0 && b.in.Inflight == 0 && !b.in.InflightUnlimited {
		b.warnings = append(b.warnings, "give --inflight or --mosquitto-conf to turn the ack latency into an online capacity")
	}
	if opts.MinBudget != "" {
		d, err := ParseDuration(opts.MinBudget)
		if err != nil || d <= 0 {
			return nil, exitcode.Usagef("--min-budget %q: want a duration above 0 such as 30m", opts.MinBudget)
		}
		b.in.MinBudget = d
	}
	rep := b.rep
	rep.Result = Compute(b.in)
	rep.Warnings = append(rep.Warnings, b.warnings...)
	return rep, nil
}

func parseCount(flag, s string) (int64, error) {
	v, err := strconv.ParseInt(strings.NewReplacer("_", "", ",", "").Replace(strings.TrimSpace(s)), 10, 64)
	if err != nil || v < 0 {
		return 0, exitcode.Usagef("--%s %q: want a whole number of messages, 0 or more", flag, s)
	}
	return v, nil
}

// checkFlags refuses flags that need another one, and combinations
// that exclude each other, before anything is read.
func checkFlags(opts Flags) error {
	switch {
	case opts.Replicas < 1:
		return exitcode.Usagef("--replicas must be at least 1, got %d", opts.Replicas)
	case opts.Rate != "" && opts.Measure != "":
		return exitcode.Usagef("--rate and --measure exclude each other")
	case opts.Measure == "" && opts.Since != "":
		return exitcode.Usagef("--since needs --measure TOPIC: it says how far back to read the topic")
	case opts.Measure == "" && opts.Window != "":
		return exitcode.Usagef("--window needs --measure TOPIC: it is the window the measured peak is averaged over")
	case opts.AckLatency != "" && opts.MetricsURL != "":
		return exitcode.Usagef("--ack-latency and --metrics-url exclude each other")
	case opts.MetricsURL == "" && opts.MetricsInterval != "":
		return exitcode.Usagef("--metrics-interval needs --metrics-url URL: it is the time between its two scrapes")
	case opts.MessageSize != "" && opts.MosquittoConf == "":
		return exitcode.Usagef("--message-size counts the broker's max_queued_bytes in messages: give --mosquitto-conf FILE with max_queued_bytes, or drop --message-size")
	}
	return nil
}

// sessionExpiry: the flag, else the stage file, else the default. The
// stage file also gives the Receive Maximum.
func (b *inputs) sessionExpiry(_ context.Context, opts Flags) error {
	b.in.SessionExpiry, b.in.SessionExpirySource = stagefile.DefaultSessionExpiry, "default"
	if opts.StageFile != "" {
		st, err := stagefile.Load(opts.StageFile)
		if err != nil {
			return exitcode.UsageError(err)
		}
		if st.Kind != stagefile.KindMQTT {
			return exitcode.Usagef("%s is a %s stage: -f takes an mqtt stage file", opts.StageFile, st.Kind)
		}
		b.rep.StageFile = opts.StageFile
		b.in.SessionExpiry, b.in.SessionExpirySource = st.SessionExpiry(), "stage-file"
		b.receiveMax = st.MQTT.ReceiveMax()
	}
	if opts.SessionExpiry != "" {
		d, err := ParseDuration(opts.SessionExpiry)
		if err != nil {
			return exitcode.Usagef("--session-expiry: %v", err)
		}
		if err := checkSessionExpiry(opts.SessionExpiry, d); err != nil {
			return err
		}
		b.in.SessionExpiry, b.in.SessionExpirySource = d, "flag"
	}
	if b.in.SessionExpiry <= 0 {
		return exitcode.Usagef("a session expiry of 0 ends the session at every disconnect: the budget is zero")
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
		return exitcode.Usagef("--session-expiry %s: MQTT counts the session expiry in whole seconds; give 1s or more", flag)
	case d%time.Second != 0:
		return exitcode.Usagef("--session-expiry %s: MQTT counts the session expiry in whole seconds; give %s or %s", flag,
			textfmt.FormatDuration(d.Truncate(time.Second)), textfmt.FormatDuration(d.Truncate(time.Second)+time.Second))
	case d > maxSessionExpiry:
		return exitcode.Usagef("--session-expiry %s is above MQTT's maximum of 4294967295s (about 136 years, which means never)", flag)
	}
	return nil
}

// limits: the queue and in-flight limits from the flags, else from
// mosquitto.conf.
func (b *inputs) limits(_ context.Context, opts Flags) error {
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
		return exitcode.Usagef("give --queue-limit N or --mosquitto-conf FILE (or measure the broker with 'flecht budget probe')")
	}
	if opts.MessageSize != "" {
		v, err := ParseSize(opts.MessageSize)
		if err != nil || v <= 0 {
			return exitcode.Usagef("--message-size %q: want a size such as 512B or 2KiB", opts.MessageSize)
		}
		if in.QueueBytes == 0 {
			return exitcode.Usagef("--message-size counts max_queued_bytes in messages, but %s sets no max_queued_bytes: drop --message-size", opts.MosquittoConf)
		}
		in.MessageSize = v
	}
	if opts.Inflight != "" {
		v, err := parseCount("inflight", opts.Inflight)
		if err != nil {
			return err
		}
		if v > MaxInflight {
			return exitcode.Usagef("--inflight %s: an in-flight window is at most %d in MQTT (0 for none)", opts.Inflight, MaxInflight)
		}
		in.Inflight, in.InflightSource, in.InflightUnlimited = int(v), "flag", v == 0
	}
	b.applyReceiveMaximum()
	return nil
}

func (b *inputs) mosquittoConf(path string) error {
	in := &b.in
	conf, err := LoadMosquittoConf(path)
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
func (b *inputs) applyReceiveMaximum() {
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
func (b *inputs) window(_ context.Context, opts Flags) error {
	if opts.Measure == "" {
		return nil
	}
	since, err := ParseDuration(orDefault(opts.Since, DefaultSince))
	if err != nil || since <= 0 {
		return exitcode.Usagef("--since %q: want a duration such as 7d or 12h", opts.Since)
	}
	window, err := ParseDuration(orDefault(opts.Window, DefaultWindow))
	if err != nil || window < time.Millisecond {
		return exitcode.Usagef("--window %q: want a duration of 1ms or more, such as 1m", opts.Window)
	}
	// The span is --since, or less when that reaches before 1970.
	now := opts.Now()
	span := now.Sub(MeasureFrom(now, since))
	if window > span {
		return exitcode.Usagef("--window %s is longer than --since %s", orDefault(opts.Window, DefaultWindow), textfmt.FormatDuration(span))
	}
	var we *WindowError
	if err := CheckWindow(span, window); errors.As(err, &we) {
		we.WindowName, we.SpanName = "--window", "--since"
		return exitcode.UsageError(we)
	}
	b.since, b.windowLen, b.now = since, window, now
	return nil
}

// rate: the flag, or measured from a topic.
func (b *inputs) rate(ctx context.Context, opts Flags) error {
	in := &b.in
	switch {
	case opts.Rate != "":
		r, err := ParseRate(opts.Rate)
		if err != nil {
			return exitcode.Usagef("--rate: %v", err)
		}
		in.Rate, in.RateSource = r, "flag"
		return nil
	case opts.Measure == "":
		return exitcode.Usagef("give --rate R (e.g. 10/s) or --measure TOPIC")
	}
	planned, add, done := opts.Progress("reading " + opts.Measure)
	m, err := opts.MeasureRate(ctx, opts.Measure, b.since, b.windowLen, b.now, planned, add)
	done()
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
func (b *inputs) ackLatency(ctx context.Context, opts Flags) error {
	in := &b.in
	switch {
	case opts.AckLatency != "":
		d, err := ParseDuration(opts.AckLatency)
		if err != nil || d <= 0 {
			return exitcode.Usagef("--ack-latency %q: want a duration such as 150ms", opts.AckLatency)
		}
		in.AckLatency, in.AckLatencySource = d, "flag"
	case opts.MetricsURL != "":
		if u, err := url.Parse(opts.MetricsURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return exitcode.Usagef("--metrics-url %q: want the bridge's metrics endpoint, such as http://bridge:9090/metrics", opts.MetricsURL)
		}
		interval, err := ParseDuration(orDefault(opts.MetricsInterval, DefaultMetricsInterval))
		if err != nil || interval <= 0 {
			return exitcode.Usagef("--metrics-interval %q: want a duration such as 10s", opts.MetricsInterval)
		}
		defer opts.Waiting(fmt.Sprintf("scraping %s twice, %s apart…", textfmt.Escape(opts.MetricsURL), textfmt.FormatDuration(interval)))()
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
