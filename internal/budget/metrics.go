package budget

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// AckMetric is the histogram a flecht MQTT bridge exposes for the time from
// receiving a PUBLISH to acknowledging it (after the Kafka commit).
const AckMetric = "flechtwerk_mqtt_ack_seconds"

// AckLatency is the bridge's receive→ack time as scraped from its metrics.
type AckLatency struct {
	URL   string  `json:"url"`
	Count float64 `json:"count"`
	SumS  float64 `json:"sum_s"`
	MeanS float64 `json:"mean_s"`
}

// Mean returns the mean latency as a duration.
func (a *AckLatency) Mean() time.Duration { return fromSeconds(a.MeanS) }

// ScrapeAckLatency fetches a Prometheus text endpoint and returns the mean
// of the ack-latency histogram (_sum / _count over all its series).
func ScrapeAckLatency(ctx context.Context, client *http.Client, url string) (*AckLatency, error) {
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("--metrics-url %q: %w", url, err)
	}
	req.Header.Set("Accept", "text/plain; version=0.0.4")
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scraping %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scraping %s: HTTP %s", url, resp.Status)
	}
	a, err := ParseAckLatency(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("scraping %s: %w", url, err)
	}
	a.URL = url
	return a, nil
}

// ParseAckLatency reads the ack-latency histogram (or summary) from a
// Prometheus text exposition.
func ParseAckLatency(r io.Reader) (*AckLatency, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("not Prometheus text format: %w", err)
	}
	a := &AckLatency{}
	found := false
	if mf, ok := families[AckMetric]; ok {
		for _, m := range mf.GetMetric() {
			switch {
			case m.GetHistogram() != nil:
				a.Count += float64(m.GetHistogram().GetSampleCount())
				a.SumS += m.GetHistogram().GetSampleSum()
				found = true
			case m.GetSummary() != nil:
				a.Count += float64(m.GetSummary().GetSampleCount())
				a.SumS += m.GetSummary().GetSampleSum()
				found = true
			}
		}
	}
	// Without a # TYPE line the parts arrive as untyped families.
	if !found {
		sum, okSum := untypedTotal(families[AckMetric+"_sum"])
		count, okCount := untypedTotal(families[AckMetric+"_count"])
		if okSum && okCount {
			a.SumS, a.Count, found = sum, count, true
		}
	}
	if !found {
		return nil, fmt.Errorf("no %s histogram (is this a flecht MQTT bridge's metrics endpoint?)", AckMetric)
	}
	if a.Count <= 0 {
		return nil, fmt.Errorf("%s has no observations yet: the bridge has acknowledged nothing; scrape it under load or give --ack-latency", AckMetric)
	}
	a.MeanS = a.SumS / a.Count
	return a, nil
}

func untypedTotal(mf *dto.MetricFamily) (float64, bool) {
	if mf == nil || len(mf.GetMetric()) == 0 {
		return 0, false
	}
	var total float64
	for _, m := range mf.GetMetric() {
		switch {
		case m.GetUntyped() != nil:
			total += m.GetUntyped().GetValue()
		case m.GetCounter() != nil:
			total += m.GetCounter().GetValue()
		case m.GetGauge() != nil:
			total += m.GetGauge().GetValue()
		default:
			return 0, false
		}
	}
	return total, true
}
