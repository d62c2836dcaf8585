package stage

import (
	"context"
	"encoding/json"
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

// ConfigStore is the per-process table of config records (docs/contract.md §6): every
// partition of every config topic, read without a group, bootstrapped to
// the end offsets captured at startup, then drained each cycle. The latest
// value per wire key wins; a null, empty or {} value removes it
// (attr.IsStoreTombstone). A record that does not decode is logged,
// counted in messages_invalid_total{outcome="skipped",topic} (so the
// skipped-records alert sees it) and skipped, whatever the stage's
// invalid_messages: a config table cannot crash-loop its readers (upstream
// applies the stage's policy, crash by default).
type ConfigStore struct {
	topics []string
	log    *slog.Logger
	obs    *metrics.Observer

	mu      sync.RWMutex
	entries map[string]attr.Config
	weights map[string]int // per key: UTF-8 key bytes plus the config's canonical bytes
	nbytes  int            // the sum of weights
	cl      *kgo.Client
}

// NewConfigStore returns an empty store for the topics.
func NewConfigStore(topics []string, log *slog.Logger, obs *metrics.Observer) *ConfigStore {
	return &ConfigStore{topics: topics, log: log, obs: obs, entries: map[string]attr.Config{}, weights: map[string]int{}}
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

// Bytes is the store's wire footprint: the UTF-8 keys plus every config's
// canonical bytes, as the Python library weighs its store
// (flechtwerk_config_store_bytes). The process holds a small multiple.
func (s *ConfigStore) Bytes() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.nbytes
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
		s.apply(r, false)
		return nil
	})
	if err != nil {
		return fmt.Errorf("config topics: %w", err)
	}
	if s.obs != nil {
		s.obs.ConfigRestored.Add(float64(s.Len()))
		s.mu.RLock()
		s.publish()
		s.mu.RUnlock()
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
	fs.EachRecord(func(r *kgo.Record) { s.apply(r, true) })
	return nil
}

// Close stops draining.
func (s *ConfigStore) Close() {
	if s.cl != nil {
		s.cl.Close()
	}
}

// skipped counts a config record that did not decode.
func (s *ConfigStore) skipped(topic string) {
	if s.obs != nil {
		s.obs.Invalid(metrics.OutcomeSkipped, topic)
	}
}

// apply puts or deletes one record's key. Records applied after the
// bootstrap (drained) count in config_messages_in_total, as upstream counts
// the updates it applied; a record skipped as undecodable changed nothing
// and does not count.
func (s *ConfigStore) apply(r *kgo.Record, drained bool) {
	key, err := attr.DecodeKey(r.Key)
	if err != nil {
		s.log.Warn("config record skipped", "topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "error", err)
		s.skipped(r.Topic)
		return
	}
	var cfg attr.Config
	weight := 0
	deleted := attr.IsStoreTombstone(r.Value)
	if !deleted {
		cfg, _, err = attr.Decode[attr.Config](r.Value)
		var canonical []byte
		if err == nil {
			canonical, err = cfg.Bytes()
		}
		if err != nil {
			s.log.Warn("config record skipped", "topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "key", key, "error", err)
			s.skipped(r.Topic)
			return
		}
		weight = len(key) + len(canonical)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nbytes -= s.weights[key]
	if deleted {
		delete(s.entries, key)
		delete(s.weights, key)
	} else {
		s.entries[key] = cfg
		s.weights[key] = weight
		s.nbytes += weight
	}
	if s.obs != nil {
		if drained {
			s.obs.ConfigMessagesIn.WithLabelValues(r.Topic).Inc()
		}
		s.publish()
	}
}

// publish sets the store's gauges; s.mu is held.
func (s *ConfigStore) publish() {
	s.obs.ConfigEntries.Set(float64(len(s.entries)))
	s.obs.ConfigStoreBytes.Set(float64(s.nbytes))
}

var cfgSuspended = attr.New("suspended", attr.BOOL).Optional()

// Suspended reads a source config's "suspended" field: true holds the
// config without polling or subscribing it. Anything but a JSON boolean is
// an error for that config alone, the same in every source stage: "yes"
// read as false would start a config its owner meant to stop.
func Suspended(c attr.Config) (bool, error) {
	s, _, err := cfgSuspended.Get(c)
	if err != nil {
		v, _ := attr.At(c, []string{"suspended"})
		raw, _ := json.Marshal(v)
		return false, fmt.Errorf("suspended is %s: write true or false (a JSON boolean)", raw)
	}
	return s, nil
}
