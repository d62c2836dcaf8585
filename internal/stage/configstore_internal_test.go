package stage

import (
	"log/slog"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/metrics"
)

// A config record whose value is null, empty or exactly {} deletes its key,
// as upstream's store views do; anything else, { } included, is a config.
// config_store_bytes weighs UTF-8 keys plus canonical config bytes, on
// every change.
func TestConfigStoreDeletesAndWeighs(t *testing.T) {
	obs := metrics.New(nil)
	s := NewConfigStore([]string{"cfg"}, slog.New(slog.DiscardHandler), obs)
	put := func(key string, value []byte, drained bool) {
		t.Helper()
		s.apply(&kgo.Record{Topic: "cfg", Key: []byte(key), Value: value}, drained)
	}
	check := func(what string, entries, nbytes int, present ...string) {
		t.Helper()
		if s.Len() != entries || s.Bytes() != nbytes {
			t.Errorf("%s: %d entries, %d bytes; want %d, %d", what, s.Len(), s.Bytes(), entries, nbytes)
		}
		if got := metrics.Value(obs.ConfigEntries); got != float64(entries) {
			t.Errorf("%s: config_store_entries %v, want %d", what, got, entries)
		}
		if got := metrics.Value(obs.ConfigStoreBytes); got != float64(nbytes) {
			t.Errorf("%s: config_store_bytes %v, want %d", what, got, nbytes)
		}
		for _, k := range present {
			if _, ok := s.Get(k); !ok {
				t.Errorf("%s: %q is missing", what, k)
			}
		}
	}

	// Weights: the key's UTF-8 bytes plus what flecht writes for the value
	// (canonical: sorted, compact, numbers as Python writes them).
	put("a", []byte(`{"x": 1e2}`), false)    // 1 + len(`{"x":100.0}`) = 12
	put("gerät", []byte(`{"ü":"ß"}`), false) // 6 + len(`{"ü":"ß"}`) = 6 + 11 = 17
	put("null", nil, false)                  // a tombstone of a key never seen
	put("spaced", []byte(`{ }`), false)      // not a tombstone upstream: an empty config, 6 + 2
	check("bootstrap", 3, 12+17+8, "a", "gerät", "spaced")

	put("a", []byte(`{"x":1,"y":[true]}`), true) // overwritten: 1 + 18
	check("overwrite", 3, 19+17+8, "a")
	put("gerät", []byte(""), true)
	check(`"" deletes`, 2, 19+8, "a", "spaced")
	put("a", []byte("{}"), true)
	check("{} deletes", 1, 8, "spaced")
	put("spaced", nil, true)
	check("null deletes", 0, 0)

	// Undecodable records change nothing and do not count as applied.
	put("b", []byte(`{"v":1}`), true)
	before := metrics.Value(obs.ConfigMessagesIn)
	put("b", []byte(`{"v":`), true)
	put("b", []byte(`{"n":1E400}`), true)
	put(string([]byte{0xff}), []byte(`{"v":2}`), true)
	check("undecodable", 1, 1+7, "b")
	if got := metrics.Value(obs.ConfigMessagesIn); got != before {
		t.Errorf("config_messages_in_total counted %v skipped records", got-before)
	}
	// They count as invalid messages skipped on their topic, as the
	// skipped-records alert expects.
	if got := metrics.Value(obs.MessagesInvalid.WithLabelValues(metrics.OutcomeSkipped, "cfg")); got != 3 {
		t.Errorf(`messages_invalid_total{outcome="skipped",topic="cfg"} = %v, want the 3 undecodable records`, got)
	}
	// Drained records count, bootstrap records do not (as upstream).
	if got := metrics.Value(obs.ConfigMessagesIn); got != 5 {
		t.Errorf("config_messages_in_total = %v, want the 5 applied drained records", got)
	}
}
