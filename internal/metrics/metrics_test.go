package metrics

import (
	"slices"
	"testing"

	dto "github.com/prometheus/client_model/go"
)

// specCatalog is docs/contract.md §10: the upstream catalog's names, each with its extra
// labels, so that existing dashboards keep working.
var specCatalog = map[string][]string{
	"messages_in_total":            {"topic"},
	"messages_out_total":           {"topic"},
	"messages_invalid_total":       {"outcome", "topic"},
	"message_in_bytes":             {"topic"},
	"message_out_bytes":            {"topic"},
	"message_in_max_bytes":         {"topic"},
	"message_out_max_bytes":        {"topic"},
	"message_processing_seconds":   nil,
	"batch_size":                   nil,
	"batch_processing_seconds":     nil,
	"transactions_committed_total": nil,
	"poll_cycle_seconds":           nil,
	"config_messages_in_total":     {"topic"},
	"config_store_entries":         nil,
	"active_configs":               nil,
	"tasks_assigned":               nil,
	"tokens_assigned":              nil,
	"state_restored_entries_total": {"partition"},
	"state_record_bytes":           nil,
	"state_record_max_bytes":       nil,
	"mqtt_messages_in_total":       {"topic"},
	"mqtt_messages_dropped_total":  {"reason", "topic"},
	"mqtt_buffered_messages":       {"topic"},
	"mqtt_connects_total":          nil,
	"mqtt_disconnects_total":       nil,
	"keyring_keys_loaded":          {"kid"},
	"secret_plaintext_reads_total": {"scope"},
	"secret_decrypts_total":        {"scope", "kid"},
}

// docs/contract.md §10's families are in the catalog, as upstream's, with the labels
// the spec gives them.
func TestCatalogCoversSpec(t *testing.T) {
	for name, labels := range specCatalog {
		row, ok := Lookup(name)
		if !ok || row.Origin != Upstream || !slices.Equal(row.Labels, labels) {
			t.Errorf("flechtwerk_%s%v: catalog row %+v", name, labels, row)
		}
	}
}

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
