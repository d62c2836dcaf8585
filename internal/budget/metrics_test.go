package budget

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

const histogramText = `# HELP flechtwerk_mqtt_ack_seconds Time from receiving a PUBLISH to acknowledging it.
# TYPE flechtwerk_mqtt_ack_seconds histogram
flechtwerk_mqtt_ack_seconds_bucket{application_id="a",le="0.05"} 10
flechtwerk_mqtt_ack_seconds_bucket{application_id="a",le="0.25"} 30
flechtwerk_mqtt_ack_seconds_bucket{application_id="a",le="+Inf"} 40
flechtwerk_mqtt_ack_seconds_sum{application_id="a"} 4
flechtwerk_mqtt_ack_seconds_count{application_id="a"} 40
flechtwerk_mqtt_ack_seconds_bucket{application_id="b",le="+Inf"} 60
flechtwerk_mqtt_ack_seconds_sum{application_id="b"} 11
flechtwerk_mqtt_ack_seconds_count{application_id="b"} 60
# TYPE flechtwerk_messages_in_total counter
flechtwerk_messages_in_total{topic="t"} 100
`

func TestScrapeAckLatency(t *testing.T) {
	var accept string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		accept = r.Header.Get("Accept")
		switch r.URL.Path {
		case "/metrics":
			w.Header().Set("Content-Type", "text/plain; version=0.0.4")
			w.Write([]byte(histogramText))
		case "/empty":
			w.Write([]byte("# TYPE flechtwerk_mqtt_ack_seconds histogram\nflechtwerk_mqtt_ack_seconds_bucket{le=\"+Inf\"} 0\nflechtwerk_mqtt_ack_seconds_sum 0\nflechtwerk_mqtt_ack_seconds_count 0\n"))
		case "/other":
			w.Write([]byte("# TYPE up gauge\nup 1\n"))
		case "/garbage":
			w.Write([]byte("this is { not prometheus\n"))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	ctx := context.Background()

	a, err := ScrapeAckLatency(ctx, srv.Client(), srv.URL+"/metrics", time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	// Nothing changed between the scrapes: the lifetime mean,
	// (4 + 11) / (40 + 60) over both series, and a note saying so.
	if a.Count != 100 || a.SumS != 15 || math.Abs(a.MeanS-0.15) > 1e-12 || a.Mean() != 150*time.Millisecond || a.URL != srv.URL+"/metrics" ||
		!a.Lifetime || !strings.Contains(a.Note, "acknowledged nothing in the 1ms between the scrapes: the mean is over its lifetime") {
		t.Errorf("%+v", a)
	}
	if !strings.HasPrefix(accept, "text/plain") {
		t.Errorf("Accept %q", accept)
	}
	for path, want := range map[string]string{
		"/empty":   "no observations yet",
		"/other":   "no flechtwerk_mqtt_ack_seconds histogram",
		"/garbage": "not Prometheus text format",
		"/missing": "HTTP 404",
	} {
		if _, err := ScrapeAckLatency(ctx, srv.Client(), srv.URL+path, time.Millisecond); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: want %q, got %v", path, want, err)
		}
	}
	srv.Close()
	if _, err := ScrapeAckLatency(ctx, nil, srv.URL+"/metrics", time.Millisecond); err == nil || !strings.Contains(err.Error(), "scraping") {
		t.Errorf("dead endpoint: %v", err)
	}
}

func TestParseAckLatencyUntypedAndSummary(t *testing.T) {
	a, err := ParseAckLatency(strings.NewReader("flechtwerk_mqtt_ack_seconds_sum 2\nflechtwerk_mqtt_ack_seconds_count 8\n"))
	if err != nil || a.MeanS != 0.25 {
		t.Errorf("untyped: %+v %v", a, err)
	}
	a, err = ParseAckLatency(strings.NewReader("# TYPE flechtwerk_mqtt_ack_seconds summary\nflechtwerk_mqtt_ack_seconds{quantile=\"0.5\"} 0.1\nflechtwerk_mqtt_ack_seconds_sum 3\nflechtwerk_mqtt_ack_seconds_count 10\n"))
	if err != nil || math.Abs(a.MeanS-0.3) > 1e-12 {
		t.Errorf("summary: %+v %v", a, err)
	}
}

// The latency is the mean over the acks between two scrapes, not since
// the bridge started: a bridge that was slow at first and is fast now
// reads as fast.
func TestScrapeAckLatencyUsesTheDelta(t *testing.T) {
	var mu sync.Mutex
	var totals [][2]float64 // count, sum: one per scrape
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		tot := totals[0]
		totals = totals[1:]
		mu.Unlock()
		fmt.Fprintf(w, "# TYPE flechtwerk_mqtt_ack_seconds histogram\nflechtwerk_mqtt_ack_seconds_bucket{le=\"+Inf\"} %g\nflechtwerk_mqtt_ack_seconds_sum %g\nflechtwerk_mqtt_ack_seconds_count %g\n", tot[0], tot[1], tot[0])
	}))
	defer srv.Close()
	scrape := func(before, after [2]float64) (*AckLatency, error) {
		mu.Lock()
		totals = [][2]float64{before, after}
		mu.Unlock()
		return ScrapeAckLatency(context.Background(), srv.Client(), srv.URL, 20*time.Millisecond)
	}

	// 100 acks in 50s (500ms each) before; 100 more in 10s since.
	a, err := scrape([2]float64{100, 50}, [2]float64{200, 60})
	if err != nil || a.Count != 100 || a.SumS != 10 || a.Mean() != 100*time.Millisecond || a.Lifetime || a.Note != "" || a.IntervalS != 0.02 {
		t.Errorf("%+v %v; want 100 acks in 10s = 100ms over the interval", a, err)
	}
	// No acks in between: the lifetime mean (60s / 200), said so.
	a, err = scrape([2]float64{200, 60}, [2]float64{200, 60})
	if err != nil || !a.Lifetime || a.Mean() != 300*time.Millisecond || !strings.Contains(a.Note, "acknowledged nothing in the 20ms between the scrapes") {
		t.Errorf("%+v %v", a, err)
	}
	// Counts went back: the bridge restarted; the mean since then.
	a, err = scrape([2]float64{200, 60}, [2]float64{50, 5})
	if err != nil || !a.Lifetime || a.Mean() != 100*time.Millisecond || !strings.Contains(a.Note, "restarted") {
		t.Errorf("%+v %v", a, err)
	}
	// Nothing acknowledged ever.
	if _, err := scrape([2]float64{0, 0}, [2]float64{0, 0}); err == nil || !strings.Contains(err.Error(), "no observations yet") {
		t.Errorf("no acks: %v", err)
	}
	// A cancelled wait ends the scrape.
	mu.Lock()
	totals = [][2]float64{{1, 1}}
	mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := ScrapeAckLatency(ctx, srv.Client(), srv.URL, time.Hour); err == nil {
		t.Error("a cancelled scrape returned no error")
	}
}
