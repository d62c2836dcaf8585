package stage

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/attr"
	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/metrics"
)

// ConfigStore is the per-process table of config records (SPEC §6): every
// partition of every config topic, read without a group, bootstrapped to
// the end offsets captured at startup, then drained each cycle. The latest
// value per wire key wins; a tombstone removes it. A record that does not
// decode is logged and skipped — a config table cannot crash-loop its
// readers, and the bad record is visible in the log.
type ConfigStore struct {
	topics []string
	log    *slog.Logger
	obs    *metrics.Observer

	mu      sync.RWMutex
	entries map[string]attr.Config
	cl      *kgo.Client
}

// NewConfigStore returns an empty store for the topics.
func NewConfigStore(topics []string, log *slog.Logger, obs *metrics.Observer) *ConfigStore {
	return &ConfigStore{topics: topics, log: log, obs: obs, entries: map[string]attr.Config{}}
}

// Suspended reports whether a config says suspended: true: held in the
// store but not polled or subscribed (SPEC §2).
func Suspended(c attr.Config) bool {
	v, _ := attr.At(c, []string{"suspended"})
	b, _ := v.(bool)
	return b
}

// Get returns the config under key.
func (s *ConfigStore) Get(key string) (attr.Config, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	c, ok := s.entries[key]
	return c, ok
}

// Len is the number of entries held.
func (s *ConfigStore) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.entries)
}

// Snapshot returns a copy of all entries (extractors iterate it).
func (s *ConfigStore) Snapshot() map[string]attr.Config {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make(map[string]attr.Config, len(s.entries))
	for k, v := range s.entries {
		out[k] = v
	}
	return out
}

// Bootstrap reads every config topic to its current end, then starts a
// consumer positioned there for Drain. c builds the consumer client.
func (s *ConfigStore) Bootstrap(ctx context.Context, c *kafkax.Cluster, clientID string) error {
	if len(s.topics) == 0 {
		return nil
	}
	reader, err := c.Client(kgo.ClientID(clientID))
	if err != nil {
		return err
	}
	defer reader.Close()
	res, err := kafkax.ReadToEndFunc(ctx, reader, s.topics, func(r *kgo.Record) error {
		s.apply(r)
		return nil
	})
	if err != nil {
		return fmt.Errorf("config topics: %w", err)
	}
	if s.obs != nil {
		s.obs.ConfigRestored.Add(float64(s.Len()))
	}
	start := map[string]map[int32]kgo.Offset{}
	for tp, b := range res.Bounds {
		if start[tp.Topic] == nil {
			start[tp.Topic] = map[int32]kgo.Offset{}
		}
		start[tp.Topic][tp.Partition] = kgo.NewOffset().At(b.End)
	}
	s.cl, err = c.Client(kgo.ClientID(clientID), kgo.ConsumePartitions(start))
	return err
}

// Drain applies whatever arrived since the last call, without waiting.
func (s *ConfigStore) Drain(ctx context.Context) error {
	if s.cl == nil {
		return nil
	}
	// franz-go returns nothing at all for an already-canceled context, so
	// give it a moment: buffered records come back at once, and an idle
	// drain costs a millisecond.
	done, cancel := context.WithTimeout(ctx, time.Millisecond)
	defer cancel()
	fs := s.cl.PollFetches(done)
	for _, fe := range fs.Errors() {
		if errors.Is(fe.Err, context.Canceled) || errors.Is(fe.Err, context.DeadlineExceeded) {
			continue
		}
		return fmt.Errorf("config topic %s/%d: %w", fe.Topic, fe.Partition, fe.Err)
	}
	fs.EachRecord(s.apply)
	return nil
}

// Close stops draining.
func (s *ConfigStore) Close() {
	if s.cl != nil {
		s.cl.Close()
	}
}

func (s *ConfigStore) apply(r *kgo.Record) {
	if s.obs != nil {
		s.obs.ConfigMessagesIn.WithLabelValues(r.Topic).Inc()
	}
	key, err := attr.DecodeKey(r.Key)
	if err != nil {
		s.log.Warn("config record skipped", "topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "error", err)
		return
	}
	cfg, tomb, err := attr.Decode[attr.Config](r.Value)
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case err != nil:
		s.log.Warn("config record skipped", "topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "key", key, "error", err)
		return
	case tomb:
		delete(s.entries, key)
	default:
		s.entries[key] = cfg
	}
	if s.obs != nil {
		s.obs.ConfigEntries.Set(float64(len(s.entries)))
	}
}
