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
