package demo

import (
	"context"
	"errors"
	"math"
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/metrics"
)

// Sample is one report: totals since the demo started, rates over the
// last interval, and where to connect. Its JSON form is the line -o json
// prints once per interval (snake_case, stable).
type Sample struct {
	Time          time.Time `json:"time"`
	UptimeSeconds float64   `json:"uptime_seconds"`

	Published int64 `json:"published"`
	Relayed   int64 `json:"relayed"`
	Refined   int64 `json:"refined"`
	// Rates are per second over the last interval (over the whole run in
	// the last sample).
	PublishedPerSecond float64 `json:"published_per_second"`
	RelayedPerSecond   float64 `json:"relayed_per_second"`
	RefinedPerSecond   float64 `json:"refined_per_second"`

	// DuplicatesPublished and PoisonPublished are what the sensors sent on
	// purpose; Deduplicated is what the dedupe transformer dropped.
	DuplicatesPublished int64 `json:"duplicates_published"`
	PoisonPublished     int64 `json:"poison_published"`
	Deduplicated        int64 `json:"deduplicated"`
	// Dropped counts messages dropped without forwarding, by reason: the
	// bridge's (poison, stale, unsubscribed) and the transformer's
	// skipped invalid records ("invalid").
	Dropped map[string]int64 `json:"dropped"`

	// Lag is the transformer group's lag on sensors.raw (end offset minus
	// committed offset, summed over partitions), nil when unknown.
	Lag *int64 `json:"lag"`
	// Transactions committed by each stage.
	Transactions Transactions `json:"transactions_committed"`

	Kafka   string `json:"kafka"`
	MQTTURL string `json:"mqtt_url"`
	// Stopped marks the last sample, taken after every stage stopped.
	Stopped bool `json:"stopped,omitempty"`
}

// stop marks the last sample and turns its rates into averages over the
// whole run: its own interval is a fraction cut short by Ctrl-C.
func (s *Sample) stop() {
	s.Stopped = true
	if up := s.UptimeSeconds; up > 0 {
		s.PublishedPerSecond = rate(s.Published, up)
		s.RelayedPerSecond = rate(s.Relayed, up)
		s.RefinedPerSecond = rate(s.Refined, up)
	}
}

// Transactions are the transactions committed by each stage.
type Transactions struct {
	Bridge int64 `json:"bridge"`
	Dedupe int64 `json:"dedupe"`
}

// sampler reads the stages' observers and the group's lag.
type sampler struct {
	pub            *publisher
	bridge, dedupe *metrics.Observer
	adm            *kadm.Client
	kafka, mqttURL string
	start          time.Time

	prev *Sample
}

func (s *sampler) sample(ctx context.Context) Sample {
	now := time.Now()
	in := int64(metrics.Value(s.dedupe.MessagesIn.WithLabelValues(RawTopic)))
	out := int64(metrics.Value(s.dedupe.MessagesOut.WithLabelValues(RefinedTopic)))
	invalid := int64(metrics.Value(s.dedupe.MessagesInvalid))
	dropped := byLabel(s.bridge.MQTTDropped, "reason")
	if invalid > 0 {
		dropped["invalid"] += invalid
	}
	cur := Sample{
		Time:                now,
		UptimeSeconds:       math.Round(now.Sub(s.start).Seconds()*1000) / 1000,
		Published:           s.pub.published.Load(),
		Relayed:             int64(metrics.Value(s.bridge.MessagesOut.WithLabelValues(RawTopic))),
		Refined:             out,
		DuplicatesPublished: s.pub.duplicates.Load(),
		PoisonPublished:     s.pub.poison.Load(),
		Deduplicated:        max(in-out-invalid, 0),
		Dropped:             dropped,
		Lag:                 s.lag(ctx),
		Transactions: Transactions{
			Bridge: int64(metrics.Value(s.bridge.TxnCommitted)),
			Dedupe: int64(metrics.Value(s.dedupe.TxnCommitted)),
		},
		Kafka:   s.kafka,
		MQTTURL: s.mqttURL,
	}
	prevTime, prev := s.start, Sample{}
	if s.prev != nil {
		prevTime, prev = s.prev.Time, *s.prev
	}
	if dt := now.Sub(prevTime).Seconds(); dt > 0 {
		cur.PublishedPerSecond = rate(cur.Published-prev.Published, dt)
		cur.RelayedPerSecond = rate(cur.Relayed-prev.Relayed, dt)
		cur.RefinedPerSecond = rate(cur.Refined-prev.Refined, dt)
	}
	s.prev = &cur
	return cur
}

// rate is delta per second, to two decimals.
func rate(delta int64, seconds float64) float64 {
	if delta <= 0 || seconds <= 0 {
		return 0
	}
	return round2(float64(delta) / seconds)
}

func round2(x float64) float64 { return math.Round(x*100) / 100 }

// lag is end offset minus committed offset (the log start where nothing
// is committed yet), summed over sensors.raw's partitions — what flecht
// status and kafka-consumer-groups report. Each transaction's commit marker
// takes an offset of its own, so a caught-up partition may show 1.
func (s *sampler) lag(ctx context.Context) *int64 {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	ends, err := s.adm.ListEndOffsets(ctx, RawTopic)
	if err != nil || ends.Error() != nil {
		return nil
	}
	starts, err := s.adm.ListStartOffsets(ctx, RawTopic)
	if err != nil || starts.Error() != nil {
		return nil
	}
	committed, err := s.adm.FetchOffsets(ctx, DedupeApp)
	if errors.Is(err, kerr.GroupIDNotFound) {
		committed, err = nil, nil // the group has not committed yet
	}
	if err != nil {
		return nil
	}
	var total int64
	ends.Each(func(e kadm.ListedOffset) {
		start := int64(0)
		if st, ok := starts.Lookup(e.Topic, e.Partition); ok {
			start = st.Offset
		}
		c, ok := committed.Lookup(e.Topic, e.Partition)
		total += kafkax.OffsetLag(e.Offset, kafkax.ReadPosition(start, c.At, ok && c.Err == nil && c.At >= 0))
	})
	return &total
}

// byLabel sums a counter vector's series by one label's value.
func byLabel(c prometheus.Collector, label string) map[string]int64 {
	out := map[string]int64{}
	ch := make(chan prometheus.Metric, 16)
	go func() { c.Collect(ch); close(ch) }()
	for m := range ch {
		var pb dto.Metric
		if m.Write(&pb) != nil || pb.Counter == nil {
			continue
		}
		for _, lp := range pb.GetLabel() {
			if lp.GetName() == label {
				out[lp.GetValue()] += int64(pb.Counter.GetValue())
			}
		}
	}
	return out
}

// sortedKeys returns a map's keys in order, for stable output.
func sortedKeys(m map[string]int64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
