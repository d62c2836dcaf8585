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
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

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
		"--queue-limit 10 --rate 1/s -f " + transformer:                                  "is a transformer stage",
		"--queue-limit 10 --rate 1/s -f /nonexistent/stage.yaml":                         "reading stage file",
		"--rate 1/s --mosquitto-conf /nonexistent/mosquitto.conf":                        "reading mosquitto.conf",
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
	var rep BudgetReport
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
	rep = BudgetReport{}
	_ = json.Unmarshal([]byte(r.out), &rep)
	if rep.Result == nil || *rep.QueueLimit != 1000 || rep.QueueLimitSource != "mosquitto-conf (Mosquitto's default)" || rep.SessionExpirySource != "flag" || rep.SessionExpiryS != 1800 {
		t.Errorf("%s", r.out)
	}
	r = run(t, nil, "", "budget", "--mosquitto-conf", empty, "--queue-limit", "5", "--rate", "1/s", "-o", "json")
	rep = BudgetReport{}
	_ = json.Unmarshal([]byte(r.out), &rep)
	if rep.Result == nil || *rep.QueueLimit != 5 || rep.QueueLimitSource != "flag" {
		t.Errorf("%s", r.out)
	}
}

func TestBudgetMeasuredRateAndScrapedLatency(t *testing.T) {
	io, _, out, errOut := ui.Test()
	peakAt := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	var gotSince, gotWindow time.Duration
	opts := &BudgetOptions{
		IO: io, Printer: func() *ui.Printer { return ui.NewPrinter(io, ui.FormatTable) },
		Now:        func() time.Time { return peakAt.Add(time.Hour) },
		QueueLimit: "1000", Measure: "sensors.raw", Since: "2d", Window: "30s", Replicas: 1,
		Inflight: "20", MetricsURL: "http://bridge/metrics",
		MeasureRate: func(_ context.Context, topic string, since, window time.Duration, _ time.Time, planned, add func(int64)) (*budget.Measurement, error) {
			gotSince, gotWindow = since, window
			planned(10)
			add(10)
			return &budget.Measurement{Topic: topic, SinceS: since.Seconds(), WindowS: window.Seconds(), Records: 10, PeakPerS: 250, MeanPerS: 40, PeakWindowStart: &peakAt}, nil
		},
		ScrapeAckLatency: func(_ context.Context, url string) (*budget.AckLatency, error) {
			return &budget.AckLatency{URL: url, Count: 10, SumS: 1, MeanS: 0.1}, nil
		},
	}
	if err := runBudget(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	if gotSince != 48*time.Hour || gotWindow != 30*time.Second {
		t.Errorf("since %v window %v", gotSince, gotWindow)
	}
	for _, want := range []string{
		"250/s, mean 40/s (measured-peak)",
		"sensors.raw over 2d: 10 records in 30s windows, peak window from 2025-03-01T12:00:00Z",
		"ack latency:       100ms (metrics)",
		"online capacity:   200/s",
		"warning: the rate 250/s exceeds the online capacity of 200/s",
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
	metrics := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, "# TYPE flechtwerk_mqtt_ack_seconds histogram\nflechtwerk_mqtt_ack_seconds_bucket{le=\"+Inf\"} 4\nflechtwerk_mqtt_ack_seconds_sum 2\nflechtwerk_mqtt_ack_seconds_count 4\n")
	}))
	defer metrics.Close()

	r := run(t, nil, "", "budget", "-b", env.KafkaAddr(), "--queue-limit", "1000", "--measure", "raw", "--since", "1h", "--inflight", "20", "--metrics-url", metrics.URL, "-o", "json")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	var rep BudgetReport
	if err := json.Unmarshal([]byte(r.out), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Measurement == nil || rep.Measurement.Records != 1800 || rep.RateSource != "measured-peak" || rep.RatePerS < 19 || rep.RatePerS > 20.5 {
		t.Errorf("measurement: %s", r.out)
	}
	if *rep.AckLatencyS != 0.5 || rep.AckLatencySource != "metrics" || *rep.OnlineCapacityPerS != 40 || rep.AckScrape.URL != metrics.URL {
		t.Errorf("ack latency: %s", r.out)
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

	for args, want := range map[string]string{
		"--count 10":                                    "give --mqtt URL",
		"--mqtt mqtt://127.0.0.1:1 --qos 3":             "--qos must be 0, 1 or 2",
		"--mqtt mqtt://127.0.0.1:1 --count 0":           "--count must be at least 1",
		"--mqtt mqtt://127.0.0.1:1 --quiet soon":        "--quiet",
		"--mqtt ws://127.0.0.1:1":                       "not supported",
		"--mqtt mqtt://127.0.0.1:1 --password-env NOPE": "--password-env NOPE",
	} {
		r := run(t, nil, "", append([]string{"budget", "probe"}, strings.Fields(args)...)...)
		if r.code != exitcode.Usage || !strings.Contains(r.err, want) {
			t.Errorf("%s: exit %d %q; want 2 and %q", args, r.code, r.err, want)
		}
	}
}

// On a terminal, --measure shows its progress on standard error and
// erases it before the report.
func TestBudgetMeasureProgressOnATerminal(t *testing.T) {
	io, _, out, errOut := ui.Test()
	io.SetTTY(false, false, true)
	opts := &BudgetOptions{
		IO: io, Printer: func() *ui.Printer { return ui.NewPrinter(io, ui.FormatJSON) }, Now: time.Now,
		QueueLimit: "1000", Measure: "sensors.raw", Since: "1h", Window: "1m", Replicas: 1,
		MeasureRate: func(_ context.Context, topic string, _, _ time.Duration, _ time.Time, planned, add func(int64)) (*budget.Measurement, error) {
			planned(4000)
			add(1000)
			return &budget.Measurement{Topic: topic, Records: 1000, PeakPerS: 5}, nil
		},
	}
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
