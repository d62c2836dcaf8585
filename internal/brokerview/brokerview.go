// Package brokerview samples, from the brokers, what a running stage
// cannot see from inside and exports it beside its own metrics: the lag of
// the input partitions this instance owns (end offset minus the group's
// committed offset, as `flecht status` counts it) and how long each of its
// transactional IDs has had a transaction open. A consumer stuck before
// its commit keeps its own counters flat, which looks like a quiet input;
// the lag it leaves behind grows, and only the broker knows that.
//
// Each instance exports only what it owns: the partitions its group member
// is assigned (a transformer's tasks, an extractor's tokens) and their
// transactional IDs <application_id>-<n>, or, for an MQTT bridge, its one
// ID <application_id>-<client_id>. So a fleet's series never overlap.
package brokerview

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/metrics"
	"github.com/flecht-dev/flecht/internal/stagefile"
)

// DefaultInterval is how often a stage samples: a quarter of a typical
// alert's 1-minute window.
const DefaultInterval = 15 * time.Second

// Options say what to sample.
type Options struct {
	Admin         *kadm.Client
	ApplicationID string
	ClientID      string
	// Kind is the stage's kind (stagefile.Kind*).
	Kind string
	// InputTopics are a transformer's inputs: the lag of the partitions
	// this instance owns in them is exported.
	InputTopics []string
	Gauges      *metrics.BrokerView
	Interval    time.Duration
	Log         *slog.Logger
	// Now replaces time.Now (tests).
	Now func() time.Time
}

// Run samples every Interval until ctx ends; the first samples come after
// 1, 2, 4, ... seconds, so a stage that just joined its group shows its
// lag at once. A failed sample is logged (at debug level: a broker away is
// reported by the stage itself) and the gauges keep their last values
// until the next one succeeds.
func Run(ctx context.Context, o Options) {
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	wait := min(time.Second, o.Interval)
	for {
		if err := Sample(ctx, o); err != nil && ctx.Err() == nil && o.Log != nil {
			o.Log.Debug("sampling lag and transactions from the brokers", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, o.Interval)
	}
}

// Sample takes one sample and sets the gauges to it.
func Sample(ctx context.Context, o Options) error {
	now := time.Now
	if o.Now != nil {
		now = o.Now
	}
	owned, err := ownedNumbers(ctx, o)
	if err != nil {
		return err
	}
	lags, err := lag(ctx, o, owned)
	if err != nil {
		return err
	}
	ids := transactionalIDs(o, owned)
	txns, err := transactions(ctx, o.Admin, ids, now())
	if err != nil {
		return err
	}
	o.Gauges.ConsumerLag.Reset()
	for tp, n := range lags {
		o.Gauges.ConsumerLag.WithLabelValues(tp.Topic, strconv.Itoa(int(tp.Partition))).Set(float64(n))
	}
	o.Gauges.TransactionOpen.Reset()
	o.Gauges.TransactionTimeout.Reset()
	for id, t := range txns {
		o.Gauges.TransactionOpen.WithLabelValues(id).Set(t.open.Seconds())
		o.Gauges.TransactionTimeout.WithLabelValues(id).Set(t.timeout.Seconds())
	}
	return nil
}

// ownedNumbers are the partition numbers assigned to this instance's group
// member (tasks or tokens), by topic; nil for a stage without a group.
func ownedNumbers(ctx context.Context, o Options) (map[string][]int32, error) {
	if o.Kind == stagefile.KindMQTT {
		return nil, nil
	}
	g, err := kafkax.DescribeGroup(ctx, o.Admin, o.ApplicationID)
	if err != nil {
		return nil, err
	}
	owned := map[string][]int32{}
	for _, m := range g.Members {
		if m.ClientID != o.ClientID {
			continue
		}
		for _, a := range m.Assigned {
			owned[a.Topic] = append(owned[a.Topic], a.Partitions...)
		}
	}
	return owned, nil
}

// lag is the offset lag (kafkax.OffsetLag) of each owned input partition.
func lag(ctx context.Context, o Options, owned map[string][]int32) (map[kafkax.TopicPartition]int64, error) {
	out := map[kafkax.TopicPartition]int64{}
	var topics []string
	for _, t := range o.InputTopics {
		if len(owned[t]) > 0 {
			topics = append(topics, t)
		}
	}
	if len(topics) == 0 {
		return out, nil
	}
	committed, err := o.Admin.FetchOffsets(ctx, o.ApplicationID)
	if err != nil {
		return nil, fmt.Errorf("committed offsets of %s: %w", o.ApplicationID, err)
	}
	starts, err := o.Admin.ListStartOffsets(ctx, topics...)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("start offsets: %w", err)
	}
	ends, err := o.Admin.ListEndOffsets(ctx, topics...)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("end offsets: %w", err)
	}
	for _, t := range topics {
		for _, p := range owned[t] {
			end, ok := ends.Lookup(t, p)
			if !ok {
				continue
			}
			start := int64(0)
			if s, ok := starts.Lookup(t, p); ok {
				start = s.Offset
			}
			c, ok := committed.Lookup(t, p)
			pos := kafkax.ReadPosition(start, c.At, ok && c.Err == nil && c.At >= 0)
			out[kafkax.TopicPartition{Topic: t, Partition: p}] = kafkax.OffsetLag(end.Offset, pos)
		}
	}
	return out, nil
}

// transactionalIDs are the IDs this instance owns: <app>-<n> for each
// owned partition number, or <app>-<client_id> for an MQTT bridge.
func transactionalIDs(o Options, owned map[string][]int32) []string {
	if o.Kind == stagefile.KindMQTT {
		return []string{o.ApplicationID + "-" + o.ClientID}
	}
	var ns []int32
	for _, ps := range owned {
		for _, p := range ps {
			if !slices.Contains(ns, p) {
				ns = append(ns, p)
			}
		}
	}
	slices.Sort(ns)
	ids := make([]string, len(ns))
	for i, n := range ns {
		ids[i] = stagefile.TransactionalID(o.ApplicationID, n)
	}
	return ids
}

type txn struct{ open, timeout time.Duration }

// transactions describes ids; an ID the coordinator does not know (never
// used yet) is left out.
func transactions(ctx context.Context, adm *kadm.Client, ids []string, now time.Time) (map[string]txn, error) {
	out := map[string]txn{}
	if len(ids) == 0 {
		return out, nil
	}
	described, err := adm.DescribeTransactions(ctx, ids...)
	if err != nil && len(described) == 0 {
		var ae *kadm.AuthError
		if errors.As(err, &ae) {
			return out, nil // not allowed to look: export nothing rather than fail the lag
		}
		return nil, fmt.Errorf("describing transactions: %w", err)
	}
	for _, id := range ids {
		d, ok := described[id]
		if !ok || d.Err != nil {
			continue
		}
		t := txn{timeout: time.Duration(d.TimeoutMillis) * time.Millisecond}
		if kafkax.TransactionPending(d.State) && d.StartTimestamp > 0 {
			t.open = max(now.Sub(time.UnixMilli(d.StartTimestamp)), 0)
		}
		out[id] = t
	}
	return out, nil
}
