package metrics

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// ModuleMetrics are a transformer's WebAssembly module families (flecht),
// registered when a stage that runs a module first asks for them.
type ModuleMetrics struct {
	// Info is 1 for the module the instance runs: its file name, sha256
	// and ABI version. status and doctor read it from every instance to
	// tell a half-rolled-out deploy.
	Info *prometheus.GaugeVec // module, sha256, abi
	// Calls counts the calls into the module (each carries a batch of
	// records); Seconds is the time spent inside them.
	Calls   prometheus.Counter
	Seconds prometheus.Counter
}

// Module returns the module families, registering them on first use.
func (o *Observer) Module() *ModuleMetrics {
	o.flecht.moduleOnce.Do(func() {
		o.flecht.module = &ModuleMetrics{
			Info: o.gaugeVec("module_info",
				"The WebAssembly module this instance's transformer runs: 1, with its file name, sha256 and ABI version (flecht).", "module", "sha256", "abi"),
			Calls:   o.counter("module_calls_total", "Calls into the transformer's WebAssembly module: one per record, or a batch of records under isolation: task (flecht)."),
			Seconds: o.counter("module_seconds_total", "Time spent inside the transformer's WebAssembly module (flecht)."),
		}
	})
	return o.flecht.module
}

// RunsModule exports which module the stage runs.
func (m *ModuleMetrics) RunsModule(name, sha256 string, abi int) {
	m.Info.WithLabelValues(name, sha256, strconv.Itoa(abi)).Set(1)
}

// Called counts one call into the module that took d.
func (m *ModuleMetrics) Called(d time.Duration) {
	m.Calls.Inc()
	m.Seconds.Add(d.Seconds())
}
