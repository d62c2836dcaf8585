package extract_test

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/metrics"
)

// A config whose "suspended" is not a boolean is refused, not polled: the
// bridge refuses the same record the same way (its "yes" is no "false").
func TestRunnerRefusesANonBooleanSuspended(t *testing.T) {
	configs := map[string]int{"a": 30}
	f := newEngineFixture(t, 1, configs)
	rec := &kgo.Record{Topic: "ext.config", Key: []byte("bad"), Value: []byte(`{"output_topic":"ext.raw","total":30,"suspended":"yes"}`)}
	if err := f.cl.ProduceSync(context.Background(), rec).FirstErr(); err != nil {
		t.Fatal(err)
	}
	e := f.start("x-0")
	f.wait("config a's items", func() bool { n, _ := f.items(); return len(n) >= 30 })
	f.wait("config a done", func() bool { return f.finished(configs) })
	e.stop(t)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.seen["bad"] != nil {
		t.Error(`a config with "suspended": "yes" was polled`)
	}
	if got := metrics.Value(e.obs.ActiveConfigs); got != 1 {
		t.Errorf("active_configs %v, want 1", got)
	}
}
