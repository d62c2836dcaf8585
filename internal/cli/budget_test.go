package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/boundedread/hostile"
	"github.com/flecht-dev/flecht/internal/budget"
	"github.com/flecht-dev/flecht/internal/devenv/devenvtest"
	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/ui"
)

func writeFile(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

const mqttStage = `application_id: bridge
kind: mqtt
config_topics: [bridge-config]
extract: {builtin: relay}
mqtt:
  url: mqtt://127.0.0.1:1883
  session_expiry: 2h
  receive_maximum: 10
`

func TestBudgetCommand(t *testing.T) {
	r := run(t, nil, "", "budget", "--session-expiry", "24h", "--queue-limit", "10000", "--rate", "10/s")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	for _, want := range []string{
		"Outage budget: 16m40s (the queue binds)",
		"10,000 messages (flag)",
		"the queue fills in 16m40s; raise the broker's queue to 864,000 or accept a 16m40s budget",
	} {
		if !strings.Contains(r.out, want) {
			t.Errorf("output lacks %q:\n%s", want, r.out)
		}
	}

	r = run(t, nil, "", "budget", "--session-expiry", "24h", "--queue-limit", "10_000", "--rate", "600/min", "--replicas", "2", "-o", "json")
	var rep map[string]any
	if err := json.Unmarshal([]byte(r.out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, r.out)
	}
	if rep["budget_s"] != 1000.0 || rep["binding"] != "queue" || rep["rate_per_s"] != 10.0 || rep["rate_source"] != "flag" ||
		rep["session_expiry_s"] != 86400.0 || rep["queue_limit"] != 10000.0 || !strings.Contains(rep["replica_advice"].(string), "with 2 replicas") {
		t.Errorf("%s", r.out)
	}
	if _, ok := rep["online_capacity_per_s"]; ok {
		t.Errorf("online capacity without its inputs: %s", r.out)
	}
}

func TestBudgetUsageErrors(t *testing.T) {
	transformer := writeFile(t, "t.yaml", "application_id: x\nkind: transformer\ninput_topics: [a]\ntransform: {builtin: count}\n")
	noBytes := writeFile(t, "nobytes.conf", "max_queued_messages 100\n")
	badInflight := writeFile(t, "inflight.conf", "max_inflight_messages 70000\n")
	for args, want := range map[string]string{
		"--rate 10/s":                                                                    "give --queue-limit N or --mosquitto-conf FILE",
		"--queue-limit 10":                                                               "give --rate R",
		"--queue-limit 10 --rate 10":                                                     "give a unit",
		"--queue-limit ten --rate 10/s":                                                  "--queue-limit \"ten\"",
		"--queue-limit 10 --rate 1/s --replicas 0":                                       "--replicas must be at least 1",
		"--queue-limit 10 --rate 1/s --measure t":                                        "exclude each other",
		"--queue-limit 10 --rate 1/s --session-expiry 1fortnight":                        "--session-expiry",
		"--queue-limit 10 --rate 1/s --session-expiry 0":                                 "budget is zero",
		"--queue-limit 10 --measure t --window 2h --since 1h":                            "longer than --since",
		"--queue-limit 10 --measure t --since yesterday":                                 "--since",
		"--queue-limit 10 --rate 1/s --ack-latency 1s --metrics-url http://127.0.0.1:1/": "exclude each other",
		"--queue-limit 10 --rate 1/s --message-size lots":                                "--message-size",
		// Flags that need another flag.
		"--queue-limit 10 --rate 1/s --since 7d":                          "--since needs --measure TOPIC",
		"--queue-limit 10 --rate 1/s --window 1m":                         "--window needs --measure TOPIC",
		"--queue-limit 10 --rate 1/s --message-size 1KiB":                 "--message-size counts the broker's max_queued_bytes in messages: give --mosquitto-conf FILE",
		"--queue-limit 10 --rate 1/s --metrics-interval 1s":               "--metrics-interval needs --metrics-url URL",
		"--mosquitto-conf " + noBytes + " --rate 1/s --message-size 1KiB": "sets no max_queued_bytes: drop --message-size",
		// What CONNECT can carry.
		"--queue-limit 10 --rate 1/s --session-expiry 500ms":                        "MQTT counts the session expiry in whole seconds; give 1s or more",
		"--queue-limit 10 --rate 1/s --session-expiry 1.5s":                         "whole seconds; give 1s or 2s",
		"--queue-limit 10 --rate 1/s --session-expiry 49711d":                       "above MQTT's maximum of 4294967295s",
		"--queue-limit 10 --rate 1/s --inflight 65536":                              "--inflight 65536: an in-flight window is at most 65535",
		"--queue-limit 10 --rate 1/s --metrics-url http://[::1":                     "--metrics-url \"http://[::1\": want the bridge's metrics endpoint",
		"--queue-limit 10 --rate 1/s --metrics-url bridge:9090":                     "--metrics-url \"bridge:9090\"",
		"--queue-limit 10 --rate 1/s --metrics-url http://b/m --metrics-interval 0": "--metrics-interval",
		"--rate 1/s --mosquitto-conf " + badInflight:                                "max_inflight_messages 70000 is above 65535, and Mosquitto refuses to start with it",
		// Windows the span cannot resolve are refused before reading.
		"--queue-limit 10 --measure t --since 7d --window 10ms":   "--window 10ms is finer than --since 7d can resolve in 2,000,000 buckets: give --window 303ms or more, or --since 5h33m20s or less",
		"--queue-limit 10 --measure t --since 30d --window 1s":    "give --window 2s or more, or --since 23d3h33m20s or less",
		"--queue-limit 10 --measure t --since 100000d":            "--window 1m is finer than --since ",
		"--queue-limit 10 --measure t --window 500us":             "--window \"500us\": want a duration of 1ms or more",
		"--queue-limit 10 --rate 1/s -f " + transformer:           "is a transformer stage",
		"--queue-limit 10 --rate 1/s -f /nonexistent/stage.yaml":  "stage file /nonexistent/stage.yaml: no such file or directory",
		"--rate 1/s --mosquitto-conf /nonexistent/mosquitto.conf": "mosquitto.conf /nonexistent/mosquitto.conf: no such file or directory",
	} {
		r := run(t, nil, "", append([]string{"budget"}, strings.Fields(args)...)...)
		if r.code != exitcode.Usage || !strings.Contains(r.err, want) {
			t.Errorf("%s: exit %d, stderr %q; want 2 and %q", args, r.code, r.err, want)
		}
	}
}

func TestBudgetFromStageFileAndMosquittoConf(t *testing.T) {
	stage := writeFile(t, "bridge.yaml", mqttStage)
	conf := writeFile(t, "mosquitto.conf", "# test\nmax_queued_messages 100\nmax_queued_bytes 65536\nmax_inflight_messages 20\npersistent_client_expiration 1h\ninclude_dir /nonexistent/flecht.d\n")
	r := run(t, nil, "", "budget", "-f", stage, "--mosquitto-conf", conf, "--rate", "1/s", "--message-size", "1KiB", "--ack-latency", "100ms", "-o", "json")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	var rep budget.Report
	if err := json.Unmarshal([]byte(r.out), &rep); err != nil {
		t.Fatal(err)
	}
	// 64 KiB of 1 KiB messages: 64, fewer than 100; the stage asks for 2h.
	if rep.SessionExpiryS != 7200 || rep.SessionExpirySource != "stage-file" || *rep.QueueLimit != 64 || rep.QueueLimitSource != "max_queued_bytes / message size" {
		t.Errorf("%s", r.out)
	}
	// The stage's Receive Maximum 10 is below the broker's 20.
	if *rep.InflightWindow != 10 || !strings.HasPrefix(rep.InflightSource, "stage-file receive_maximum") || *rep.OnlineCapacityPerS != 100 {
		t.Errorf("window %v from %q, capacity %v", *rep.InflightWindow, rep.InflightSource, rep.OnlineCapacityPerS)
	}
	if rep.Mosquitto == nil || rep.Mosquitto.MaxQueuedMessages != 100 || rep.StageFile != stage {
		t.Errorf("%s", r.out)
	}
	joined := strings.Join(rep.Warnings, "\n")
	if !strings.Contains(joined, "persistent_client_expiration 1h, shorter than the session expiry 2h") || !strings.Contains(joined, "include_dir /nonexistent/flecht.d ignored") {
		t.Errorf("warnings:\n%s", joined)
	}

	// A conf without the setting: Mosquitto's default 1000, named as such;
	// --session-expiry beats the stage file; --queue-limit beats the conf.
	empty := writeFile(t, "empty.conf", "listener 1883\n")
	r = run(t, nil, "", "budget", "-f", stage, "--session-expiry", "30m", "--mosquitto-conf", empty, "--rate", "1/s", "-o", "json")
	rep = budget.Report{}
	_ = json.Unmarshal([]byte(r.out), &rep)
	if rep.Result == nil || *rep.QueueLimit != 1000 || rep.QueueLimitSource != "mosquitto-conf (Mosquitto's default)" || rep.SessionExpirySource != "flag" || rep.SessionExpiryS != 1800 {
		t.Errorf("%s", r.out)
	}
	r = run(t, nil, "", "budget", "--mosquitto-conf", empty, "--queue-limit", "5", "--rate", "1/s", "-o", "json")
	rep = budget.Report{}
	_ = json.Unmarshal([]byte(r.out), &rep)
	if rep.Result == nil || *rep.QueueLimit != 5 || rep.QueueLimitSource != "flag" {
		t.Errorf("%s", r.out)
	}
}

// The stage's Receive Maximum is the window whenever the bridge sends it,
// above the broker's max_inflight_messages as well as below: Mosquitto 2.0
// uses it instead (e2e TestMosquittoResendsUnackedWithDupAndSamePacketID:
// 50 beats 20). The broker's window applies only when the stage sets none.
func TestBudgetReceiveMaximumIsTheWindow(t *testing.T) {
	conf := writeFile(t, "mosquitto.conf", "max_inflight_messages 20\n")
	unlimited := writeFile(t, "unlimited.conf", "max_inflight_messages 0\n")
	stage := func(rm int) string {
		return writeFile(t, fmt.Sprintf("bridge-%d.yaml", rm), strings.Replace(mqttStage, "receive_maximum: 10", fmt.Sprintf("receive_maximum: %d", rm), 1))
	}
	noRM := writeFile(t, "bridge-none.yaml", strings.Replace(mqttStage, "  receive_maximum: 10\n", "", 1))
	for _, tc := range []struct {
		name, stage, conf string
		extra             []string
		window            int
		source, warning   string
	}{
		{"above the broker's", stage(50), conf, nil, 50, "stage-file receive_maximum (Mosquitto 2.0 uses it instead of the broker's 20; EMQX would use the smaller)", ""},
		{"below the broker's", stage(10), conf, nil, 10, "stage-file receive_maximum (Mosquitto 2.0 uses it instead", ""},
		{"broker unlimited", stage(50), unlimited, nil, 50, "stage-file receive_maximum (the broker sets no window of its own)", ""},
		{"above --inflight", stage(50), conf, []string{"--inflight", "30"}, 50, "instead of the broker's 30", ""},
		{"none sent", noRM, conf, nil, 20, "mosquitto-conf", ""},
	} {
		args := append([]string{"budget", "-f", tc.stage, "--mosquitto-conf", tc.conf, "--rate", "100/s", "--ack-latency", "100ms", "-o", "json"}, tc.extra...)
		r := run(t, nil, "", args...)
		var rep budget.Report
		if err := json.Unmarshal([]byte(r.out), &rep); err != nil || rep.Result == nil {
			t.Fatalf("%s: exit %d %v\n%s", tc.name, r.code, err, r.err)
		}
		if rep.InflightWindow == nil || *rep.InflightWindow != tc.window || !strings.Contains(rep.InflightSource, tc.source) ||
			rep.OnlineCapacityPerS == nil || *rep.OnlineCapacityPerS != float64(tc.window)*10 {
			t.Errorf("%s: %s; want window %d from %q", tc.name, r.out, tc.window, tc.source)
		}
		if tc.warning != "" && !strings.Contains(strings.Join(rep.Warnings, "\n"), tc.warning) {
			t.Errorf("%s: warnings %q lack %q", tc.name, rep.Warnings, tc.warning)
		}
	}
}

// A byte limit counts messages rounded up (Mosquitto admits one while the
// bytes are below the limit), and one message is "1 message".
func TestBudgetByteLimitInMessages(t *testing.T) {
	conf := writeFile(t, "mosquitto.conf", "max_queued_bytes 2000\n")
	r := run(t, nil, "", "budget", "--mosquitto-conf", conf, "--message-size", "1024B", "--rate", "1/s", "--session-expiry", "1h")
	if r.code != 0 || !strings.Contains(r.out, "2 messages (max_queued_bytes / message size)") {
		t.Errorf("exit %d\n%s%s", r.code, r.out, r.err)
	}
	r = run(t, nil, "", "budget", "--queue-limit", "1", "--rate", "1/s", "--session-expiry", "1h")
	if r.code != 0 || !strings.Contains(r.out, "1 message (flag)") {
		t.Errorf("exit %d\n%s%s", r.code, r.out, r.err)
	}
}

func TestBudgetMeasuredRateAndScrapedLatency(t *testing.T) {
	io, _, out, errOut := ui.Test()
	peakAt := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	var gotSince, gotWindow, gotInterval time.Duration
	opts := &BudgetOptions{
		IO: io, Printer: func() *ui.Printer { return ui.NewPrinter(io, ui.FormatTable) }, Flags: budget.Flags{
			Now:        func() time.Time { return peakAt.Add(time.Hour) },
			QueueLimit: "1000", Measure: "sensors.raw", Since: "2d", Window: "30s", Replicas: 1,
			Inflight: "20", MetricsURL: "http://bridge/metrics", MetricsInterval: "3s",
			MeasureRate: func(_ context.Context, topic string, since, window time.Duration, _ time.Time, planned, add func(int64)) (*budget.Measurement, error) {
				gotSince, gotWindow = since, window
				planned(10)
				add(10)
				return &budget.Measurement{Topic: topic, SinceS: since.Seconds(), WindowS: window.Seconds(), Records: 10, PeakPerS: 250, MeanPerS: 40, PeakWindowStart: &peakAt, ResolutionS: 10}, nil
			},
			ScrapeAckLatency: func(_ context.Context, url string, interval time.Duration) (*budget.AckLatency, error) {
				gotInterval = interval
				return &budget.AckLatency{URL: url, Count: 10, SumS: 1, MeanS: 0.1}, nil
			},
		}}
	// Above the online capacity, data is lost while connected: a finding,
	// exit 4, for a pipeline's gate.
	if err := runBudget(context.Background(), opts); exitcode.Code(err) != exitcode.Findings {
		t.Fatalf("over capacity: %v (exit %d), want exit 4", err, exitcode.Code(err))
	}
	if gotSince != 48*time.Hour || gotWindow != 30*time.Second || gotInterval != 3*time.Second {
		t.Errorf("since %v window %v interval %v", gotSince, gotWindow, gotInterval)
	}
	for _, want := range []string{
		"250/s, mean 40/s (measured-peak)",
		"sensors.raw over 2d: 10 records in 30s windows, peak window from 2025-03-01T12:00:00Z",
		"ack latency:       100ms (metrics)",
		"online capacity:   200/s",
		"finding: the rate 250/s exceeds the online capacity of 200/s",
		// 10s buckets in a 30s window: coarse, and said so.
		"warning: over --since 2d the peak window slides in steps of 10s, 3 per window: a burst as long as the window may read up to 33% low",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if errOut.Len() != 0 {
		t.Errorf("progress drawn without a terminal: %q", errOut)
	}
}

// --measure and --metrics-url against real (embedded) systems.
func TestBudgetMeasureAndMetricsEndToEnd(t *testing.T) {
	env := devenvtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := devenvtest.KafkaClient(t, env)
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 2, 1, nil, "raw"); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	var recs []*kgo.Record
	for i := range 600 { // 10 minutes at 1/s, then one minute at 20/s
		recs = append(recs, &kgo.Record{Topic: "raw", Key: []byte(fmt.Sprint(i % 5)), Timestamp: now.Add(-20*time.Minute + time.Duration(i)*time.Second)})
	}
	for i := range 1200 {
		recs = append(recs, &kgo.Record{Topic: "raw", Key: []byte(fmt.Sprint(i % 5)), Timestamp: now.Add(-5*time.Minute + time.Duration(i)*50*time.Millisecond)})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// Scraped twice: 4 acks in 2s before, 4 more in 2s between (500ms).
	var scrapes atomic.Int32
	metrics := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		n := scrapes.Add(1) * 4
		fmt.Fprintf(w, "# TYPE flechtwerk_mqtt_ack_seconds histogram\nflechtwerk_mqtt_ack_seconds_bucket{le=\"+Inf\"} %d\nflechtwerk_mqtt_ack_seconds_sum %d\nflechtwerk_mqtt_ack_seconds_count %d\n", n, n/2, n)
	}))
	defer metrics.Close()

	r := run(t, nil, "", "budget", "-b", env.KafkaAddr(), "--queue-limit", "1000", "--measure", "raw", "--since", "1h", "--inflight", "20",
		"--metrics-url", metrics.URL, "--metrics-interval", "20ms", "-o", "json")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	var rep budget.Report
	if err := json.Unmarshal([]byte(r.out), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Measurement == nil || rep.Measurement.Records != 1800 || rep.RateSource != "measured-peak" || rep.RatePerS < 19 || rep.RatePerS > 20.5 {
		t.Errorf("measurement: %s", r.out)
	}
	if *rep.AckLatencyS != 0.5 || rep.AckLatencySource != "metrics" || *rep.OnlineCapacityPerS != 40 || rep.AckScrape.URL != metrics.URL {
		t.Errorf("ack latency: %s", r.out)
	}
	// A --since before 1970 reads from the epoch, not an error from Kafka.
	r = run(t, nil, "", "budget", "-b", env.KafkaAddr(), "--queue-limit", "1000", "--measure", "raw", "--since", "100000d", "--window", "1h", "-o", "json")
	rep = budget.Report{}
	if err := json.Unmarshal([]byte(r.out), &rep); r.code != 0 || err != nil || rep.Measurement.Records != 1800 || !rep.Measurement.From.Equal(time.Unix(0, 0)) {
		t.Errorf("--since 100000d: exit %d %s\n%s", r.code, r.err, r.out)
	}
	r = run(t, nil, "", "budget", "-b", env.KafkaAddr(), "--queue-limit", "1000", "--measure", "nope")
	if r.code != exitcode.Failure || !strings.Contains(r.err, `topic "nope" does not exist`) {
		t.Errorf("missing topic: exit %d %q", r.code, r.err)
	}
}

func TestBudgetProbeCommand(t *testing.T) {
	env := devenvtest.Start(t)
	r := run(t, nil, "", "budget", "probe", "--mqtt", "mqtt://"+env.MQTTAddr(), "--count", "50", "--quiet", "300ms", "-o", "json")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	var res budget.ProbeResult
	if err := json.Unmarshal([]byte(r.out), &res); err != nil {
		t.Fatal(err)
	}
	if res.Published != 50 || res.Received != 50 || res.QueueLimit != nil || !res.SessionRemoved || res.Keeps != "unknown" {
		t.Errorf("%s", r.out)
	}
	// The profile's MQTT URL is used when --mqtt is not given.
	dir := t.TempDir()
	cfg := filepath.Join(dir, "flecht", "config.yaml")
	os.MkdirAll(filepath.Dir(cfg), 0o700)
	os.WriteFile(cfg, []byte("current_profile: dev\nprofiles:\n  dev:\n    mqtt: {url: \"mqtt://"+env.MQTTAddr()+"\"}\n"), 0o600)
	r = run(t, map[string]string{"XDG_CONFIG_HOME": dir}, "", "budget", "probe", "--count", "5", "--quiet", "200ms")
	if r.code != 0 || !strings.Contains(r.out, "every message came back") || !strings.Contains(r.out, "mqtt://"+env.MQTTAddr()) {
		t.Errorf("profile URL: exit %d\n%s\n%s", r.code, r.out, r.err)
	}
	// Realistic message sizes, for a queue limited by bytes.
	r = run(t, nil, "", "budget", "probe", "--mqtt", "mqtt://"+env.MQTTAddr(), "--count", "1", "--quiet", "200ms", "--payload-size", "1KiB")
	if r.code != 0 || !strings.Contains(r.out, "1 message (QoS 1, 1 KiB each)") || !strings.Contains(r.out, "all 1 message came back: the queue holds at least that many") {
		t.Errorf("--payload-size: exit %d\n%s\n%s", r.code, r.out, r.err)
	}

	for args, want := range map[string]string{
		"--count 10":                                    "give --mqtt URL",
		"--mqtt mqtt://127.0.0.1:1 --qos 3":             "--qos must be 0, 1 or 2",
		"--mqtt mqtt://127.0.0.1:1 --count 0":           "--count must be at least 1",
		"--mqtt mqtt://127.0.0.1:1 --quiet soon":        "--quiet",
		"--mqtt ws://127.0.0.1:1":                       "not supported",
		"--mqtt mqtt://u:hunter2@127.0.0.1:1":           "must not hold a password",
		"--mqtt mqtt://127.0.0.1:1 --password-env NOPE": "--password-env NOPE",
		"--mqtt mqtt://127.0.0.1:1 --payload-size lots": "--payload-size \"lots\": want a size from 1B to 255.9 MiB",
		"--mqtt mqtt://127.0.0.1:1 --payload-size 0":    "--payload-size",
		"--mqtt mqtt://127.0.0.1:1 --payload-size 1GiB": "--payload-size",
	} {
		r := run(t, nil, "", append([]string{"budget", "probe"}, strings.Fields(args)...)...)
		if r.code != exitcode.Usage || !strings.Contains(r.err, want) {
			t.Errorf("%s: exit %d %q; want 2 and %q", args, r.code, r.err, want)
		}
		if strings.Contains(r.err, "hunter2") {
			t.Errorf("%s: the error shows the password: %q", args, r.err)
		}
	}
}

// On a terminal, --measure shows its progress on standard error and
// erases it before the report.
func TestBudgetMeasureProgressOnATerminal(t *testing.T) {
	io, _, out, errOut := ui.Test()
	io.SetTTY(false, false, true)
	opts := &BudgetOptions{
		IO: io, Printer: func() *ui.Printer { return ui.NewPrinter(io, ui.FormatJSON) }, Flags: budget.Flags{Now: time.Now,
			QueueLimit: "1000", Measure: "sensors.raw", Since: "1h", Window: "1m", Replicas: 1,
			MeasureRate: func(_ context.Context, topic string, _, _ time.Duration, _ time.Time, planned, add func(int64)) (*budget.Measurement, error) {
				planned(4000)
				add(1000)
				return &budget.Measurement{Topic: topic, Records: 1000, PeakPerS: 5}, nil
			},
		}}
	if err := runBudget(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(errOut.String(), "reading sensors.raw [") || !strings.Contains(errOut.String(), "0/4,000") || !strings.HasSuffix(errOut.String(), "\r\x1b[K") {
		t.Errorf("progress %q", errOut)
	}
	if strings.Contains(out.String(), "\r") {
		t.Errorf("progress leaked into the report: %q", out)
	}
}

// A Receive Maximum MQTT cannot carry is a stage-file error, for budget as
// for the bridge.
func TestBudgetRefusesReceiveMaximumOutsideMQTTsRange(t *testing.T) {
	conf := writeFile(t, "mosquitto.conf", "max_inflight_messages 20\n")
	stage := writeFile(t, "bridge.yaml", strings.Replace(mqttStage, "receive_maximum: 10", "receive_maximum: 70000", 1))
	r := run(t, nil, "", "budget", "-f", stage, "--mosquitto-conf", conf, "--rate", "100/s", "--ack-latency", "100ms")
	if r.code != exitcode.Usage || !strings.Contains(r.err, "use 1 to 65535") {
		t.Fatalf("exit %d, stderr %q; want 2 naming MQTT's range", r.code, r.err)
	}
}

// A --mosquitto-conf or -f that names something else (/dev/zero, a huge
// file, a directory) is refused after a bounded read, exit 2, naming the
// file and its limit, where /dev/zero crashed the process out of memory.
func TestBudgetHostilePaths(t *testing.T) {
	for _, p := range hostile.Paths(t) {
		r := run(t, nil, "", "budget", "--rate", "10/s", "--mosquitto-conf", p.Path)
		if r.code != exitcode.Usage || !strings.Contains(r.err, "mosquitto.conf "+p.Path) {
			t.Errorf("--mosquitto-conf %s: exit %d %q", p.Name, r.code, r.err)
		}
		if !p.Missing && p.Name != "directory" && !strings.Contains(r.err, "larger than 1 MiB") {
			t.Errorf("--mosquitto-conf %s: the limit is not named: %q", p.Name, r.err)
		}
		r = run(t, nil, "", "budget", "--queue-limit", "10", "--rate", "1/s", "-f", p.Path)
		if r.code != exitcode.Usage || !strings.Contains(r.err, "stage file "+p.Path) {
			t.Errorf("-f %s: exit %d %q", p.Name, r.code, r.err)
		}
	}
}

// --min-budget gates a pipeline: a shorter budget exits 4 naming what
// reaches the target, a long enough one exits 0, and a bad value is a
// usage error.
func TestBudgetMinBudgetGates(t *testing.T) {
	base := []string{"budget", "--rate", "200/s", "--queue-limit", "1000", "--session-expiry", "1h"}
	r := run(t, nil, "", append(base, "--min-budget", "10m")...)
	if r.code != exitcode.Findings || !strings.Contains(r.out, "finding: the outage budget is 5s, below the 10m asked for (--min-budget): raise the broker's queue (max_queued_messages) to 120,000") {
		t.Errorf("below: exit %d\n%s%s", r.code, r.out, r.err)
	}
	r = run(t, nil, "", append(base, "--min-budget", "10m", "-o", "json")...)
	if r.code != exitcode.Findings || !strings.Contains(r.out, `"kind": "below_min_budget"`) && !strings.Contains(r.out, `"kind":"below_min_budget"`) {
		t.Errorf("json: exit %d\n%s", r.code, r.out)
	}
	if r := run(t, nil, "", append(base, "--min-budget", "5s")...); r.code != 0 {
		t.Errorf("at the target: exit %d\n%s%s", r.code, r.out, r.err)
	}
	if r := run(t, nil, "", append(base, "--min-budget", "soon")...); r.code != exitcode.Usage || !strings.Contains(r.err, "--min-budget") {
		t.Errorf("bad value: exit %d %s", r.code, r.err)
	}
}
