package metrics

import (
	"testing"

	dto "github.com/prometheus/client_model/go"
)

// The duration histograms reach the 10-minute transaction timeout, as
// upstream's do: a page of several minutes lands in a bucket of its own
// instead of pinning every quantile at the ladder's top.
func TestDurationHistogramsReachTheTransactionTimeout(t *testing.T) {
	o := New(nil)
	o.MessageProcessing.Observe(400)
	o.BatchProcessing.Observe(400)
	o.PollCycle.Observe(400)
	families, err := o.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{
		"flechtwerk_message_processing_seconds": true,
		"flechtwerk_batch_processing_seconds":   true,
		"flechtwerk_poll_cycle_seconds":         true,
	}
	for _, mf := range families {
		if !want[mf.GetName()] {
			continue
		}
		delete(want, mf.GetName())
		h := mf.GetMetric()[0].GetHistogram()
		if got := cumulative(h, 300); got != 0 {
			t.Errorf("%s: %v samples at le=300, want 0", mf.GetName(), got)
		}
		if got := cumulative(h, 600); got != 1 {
			t.Errorf("%s: %v samples at le=600, want 1 (buckets %v)", mf.GetName(), got, bounds(h))
		}
		if b := bounds(h); b[0] != 0.005 {
			t.Errorf("%s: first bound %v, want upstream's 0.005", mf.GetName(), b[0])
		}
	}
	for name := range want {
		t.Errorf("%s not gathered", name)
	}
}

// cumulative is the count at the bucket whose bound is le, or -1 when
// there is no such bucket.
func cumulative(h *dto.Histogram, le float64) float64 {
	for _, b := range h.GetBucket() {
		if b.GetUpperBound() == le {
			return float64(b.GetCumulativeCount())
		}
	}
	return -1
}

func bounds(h *dto.Histogram) []float64 {
	var out []float64
	for _, b := range h.GetBucket() {
		out = append(out, b.GetUpperBound())
	}
	return out
}
