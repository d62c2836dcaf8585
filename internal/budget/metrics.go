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

	"github.com/flecht-dev/flecht/internal/textfmt"
)

// AckMetric is the histogram a flecht MQTT bridge exposes for the time from
// receiving a PUBLISH to acknowledging it (after the Kafka commit).
const AckMetric = "flechtwerk_mqtt_ack_seconds"

// AckLatency is the bridge's receive→ack time as scraped from its metrics:
// the mean over the acks between two scrapes an interval apart, or over
// the bridge's lifetime when none happened in between (Lifetime says so).
type AckLatency struct {
	URL       string  `json:"url"`
	IntervalS float64 `json:"interval_s"`
	Count     float64 `json:"count"`
	SumS      float64 `json:"sum_s"`
	MeanS     float64 `json:"mean_s"`
	Lifetime  bool    `json:"lifetime,omitempty"`
	// Note says why the lifetime mean was used.
	Note string `json:"note,omitempty"`
}

// Mean returns the mean latency as a duration.
func (a *AckLatency) Mean() time.Duration { return fromSeconds(a.MeanS) }

// ScrapeAckLatency scrapes a Prometheus text endpoint twice, interval
// apart, and returns the mean of the ack-latency histogram over the acks
// in between: the latency now, not since the bridge started. With no acks
// in between it falls back to the lifetime mean (_sum / _count) and says
// so.
func ScrapeAckLatency(ctx context.Context, client *http.Client, url string, interval time.Duration) (*AckLatency, error) {
	before, err := scrapeAckTotals(ctx, client, url)
	if err != nil {
		return nil, err
	}
	wait := time.NewTimer(interval)
	defer wait.Stop()
	select {
	case <-wait.C:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	after, err := scrapeAckTotals(ctx, client, url)
	if err != nil {
		return nil, err
	}
	a := &AckLatency{URL: url, IntervalS: interval.Seconds(), Count: after.Count - before.Count, SumS: after.SumS - before.SumS}
	switch {
	case a.Count < 0 || a.SumS < 0:
		a.Note = fmt.Sprintf("%s went back between the scrapes (the bridge restarted?): the mean is over its acks since then", AckMetric)
	case a.Count > 0:
		a.MeanS = a.SumS / a.Count
		return a, nil
	default:
		a.Note = fmt.Sprintf("the bridge acknowledged nothing in the %s between the scrapes: the mean is over its lifetime, which may not be its latency now", textfmt.FormatDuration(interval))
	}
	if after.Count <= 0 {
		return nil, noAcks()
	}
	a.Count, a.SumS, a.MeanS, a.Lifetime = after.Count, after.SumS, after.SumS/after.Count, true
	return a, nil
}

// scrapeAckTotals fetches the endpoint once and returns the histogram's
// totals (no mean: the count may be 0).
func scrapeAckTotals(ctx context.Context, client *http.Client, url string) (*AckLatency, error) {
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
	a, err := parseAckTotals(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("scraping %s: %w", url, err)
	}
	a.URL = url
	return a, nil
}

// ParseAckLatency reads the ack-latency histogram (or summary) from a
// Prometheus text exposition and returns its lifetime mean.
func ParseAckLatency(r io.Reader) (*AckLatency, error) {
	a, err := parseAckTotals(r)
	if err != nil {
		return nil, err
	}
	if a.Count <= 0 {
		return nil, noAcks()
	}
	a.MeanS, a.Lifetime = a.SumS/a.Count, true
	return a, nil
}

func noAcks() error {
	return fmt.Errorf("%s has no observations yet: the bridge has acknowledged nothing; scrape it under load or give --ack-latency", AckMetric)
}

// parseAckTotals sums the histogram's _sum and _count over its series.
func parseAckTotals(r io.Reader) (*AckLatency, error) {
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
