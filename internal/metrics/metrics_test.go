package metrics

import (
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// specCatalog is SPEC §10: the upstream catalog's names, each with its extra
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

// beyondSpec are the metrics flecht registers besides SPEC §10's list, each
// a deliberate choice: adding one means adding it here.
var beyondSpec = map[string][]string{
	"config_store_restored_entries_total": nil, // in the upstream catalog
	"mqtt_ack_seconds":                    nil, // flecht: receive → ACK after commit
}

var (
	descName   = regexp.MustCompile(`fqName: "([^"]*)"`)
	descLabels = regexp.MustCompile(`variableLabels: \{([^}]*)\}`)
)

// registered lists every metric the observer holds, name → extra labels.
func registered(t *testing.T, o *Observer) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	v := reflect.ValueOf(o).Elem()
	for i := range v.NumField() {
		if !v.Type().Field(i).IsExported() {
			continue
		}
		c, ok := v.Field(i).Interface().(prometheus.Collector)
		if !ok {
			continue
		}
		ch := make(chan *prometheus.Desc, 4)
		c.Describe(ch)
		close(ch)
		for d := range ch {
			s := d.String()
			name := strings.TrimPrefix(descName.FindStringSubmatch(s)[1], namespace+"_")
			var labels []string
			if l := descLabels.FindStringSubmatch(s)[1]; l != "" {
				labels = strings.Split(l, ",")
			}
			out[name] = labels
		}
	}
	return out
}

func TestCatalogMatchesSpec(t *testing.T) {
	got := registered(t, New(map[string]string{"stage": "s"}))
	for name, labels := range specCatalog {
		have, ok := got[name]
		if !ok {
			t.Errorf("flechtwerk_%s is missing", name)
			continue
		}
		if !slices.Equal(have, labels) {
			t.Errorf("flechtwerk_%s has labels %v, want %v", name, have, labels)
		}
	}
	for name, labels := range got {
		if _, spec := specCatalog[name]; spec {
			continue
		}
		if want, ok := beyondSpec[name]; !ok || !slices.Equal(labels, want) {
			t.Errorf("flechtwerk_%s%v is in neither SPEC §10 nor the list of deliberate additions", name, labels)
		}
	}
}
