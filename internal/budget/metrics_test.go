package budget

import (
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
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

	a, err := ScrapeAckLatency(ctx, srv.Client(), srv.URL+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	// (4 + 11) / (40 + 60) over both series.
	if a.Count != 100 || a.SumS != 15 || math.Abs(a.MeanS-0.15) > 1e-12 || a.Mean() != 150*time.Millisecond || a.URL != srv.URL+"/metrics" {
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
		if _, err := ScrapeAckLatency(ctx, srv.Client(), srv.URL+path); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: want %q, got %v", path, want, err)
		}
	}
	srv.Close()
	if _, err := ScrapeAckLatency(ctx, nil, srv.URL+"/metrics"); err == nil || !strings.Contains(err.Error(), "scraping") {
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
