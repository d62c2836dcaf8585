package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// maxTracker keeps a gauge at the largest value observed.
type maxTracker struct {
	mu  sync.Mutex
	max int
}

func (m *maxTracker) observe(g prometheus.Gauge, v int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if v > m.max {
		m.max = v
		g.Set(float64(v))
	}
}

// maxPerTopic keeps one gauge series per topic at the largest value
// observed for that topic (the upstream gauges carry a topic label).
type maxPerTopic struct {
	mu  sync.Mutex
	max map[string]int
}

func (m *maxPerTopic) observe(g *prometheus.GaugeVec, topic string, v int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.max == nil {
		m.max = map[string]int{}
	}
	if cur, seen := m.max[topic]; !seen || v > cur {
		m.max[topic] = v
		g.WithLabelValues(topic).Set(float64(v))
	}
}
