package kafkax

import (
	"context"
	"sync"

	"github.com/twmb/franz-go/pkg/kadm"
)

// PartitionCounts remembers topics' partition counts for producers that
// place records themselves (Kafka's murmur2 partition of the key, or an
// explicit partition checked against the count). A count is looked up once;
// a topic that grows later keeps its old count until the process restarts,
// as with Kafka's own clients between metadata refreshes.
type PartitionCounts struct {
	adm *kadm.Client
	mu  sync.Mutex
	n   map[string]int
}

// NewPartitionCounts returns an empty cache that looks topics up with adm.
func NewPartitionCounts(adm *kadm.Client) *PartitionCounts {
	return &PartitionCounts{adm: adm, n: map[string]int{}}
}

// Set records a count already known (from a startup check).
func (c *PartitionCounts) Set(topic string, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[topic] = n
}

// Get returns topic's partition count, looking it up on first use. A
// missing topic is a MissingTopicsError.
func (c *PartitionCounts) Get(ctx context.Context, topic string) (int, error) {
	c.mu.Lock()
	n, ok := c.n[topic]
	c.mu.Unlock()
	if ok {
		return n, nil
	}
	n, err := CommonPartitionCount(ctx, c.adm, topic)
	if err != nil {
		return 0, err
	}
	c.Set(topic, n)
	return n, nil
}
