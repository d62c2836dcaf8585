package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Value reads the current value of a counter or gauge (for tests and
// status views): 0 when unset.
func Value(c prometheus.Collector) float64 {
	ch := make(chan prometheus.Metric, 16)
	go func() { c.Collect(ch); close(ch) }()
	var sum float64
	for m := range ch {
		var pb dto.Metric
		if m.Write(&pb) != nil {
			continue
		}
		switch {
		case pb.Counter != nil:
			sum += pb.Counter.GetValue()
		case pb.Gauge != nil:
			sum += pb.Gauge.GetValue()
		case pb.Histogram != nil:
			sum += float64(pb.Histogram.GetSampleCount())
		}
	}
	return sum
}
