package mqtt

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/kafkax"
)

// Reasons a message is ACKed without being written (mqtt_messages_dropped_total).
const (
	dropPoison       = "poison"
	dropUnsubscribed = "unsubscribed"
	dropStale        = "stale"
	unmatchedTopic   = "(unmatched)"
)

// relayBatch takes up to maxBatch buffered messages, writes the relayable
// ones in one Kafka transaction, and only after it committed ACKs every
// taken message in the order received. It returns how many it took.
func (b *Bridge) relayBatch(ctx context.Context, relays map[string]*Relay) (int, error) {
	b.mu.Lock()
	cur := b.sess
	latched := b.latched
	var taken, held []*inbound
	for _, m := range b.inbox {
		switch {
		case cur == nil || m.sess != cur:
			// Its connection is gone, so it cannot be ACKed any more: the
			// broker resends it on the resumed session. Nothing was written.
		case len(taken) >= b.maxBatch:
			held = append(held, m)
		case !latched && matchRelay(relays, m.pub.Topic) == nil:
			// Before the first reconciliation an unmatched message may
			// belong to a config not yet read: hold it, un-ACKed.
			held = append(held, m)
		default:
			taken = append(taken, m)
		}
	}
	b.inbox = held
	b.mu.Unlock()
	if len(taken) == 0 {
		return 0, nil
	}

	type outcome struct {
		rec    *kgo.Record
		filter string
		drop   string
	}
	outcomes := make([]outcome, len(taken))
	var records []*kgo.Record
	for i, m := range taken {
		p := m.pub
		if p.Duplicate() {
			if h, ok := b.committed[p.PacketID]; ok && h == contentHash(p) {
				delete(b.committed, p.PacketID)
				outcomes[i].drop = "committed" // written before the reconnect: ACK only
				continue
			}
		}
		r := matchRelay(relays, p.Topic)
		if r == nil {
			outcomes[i].drop, outcomes[i].filter = dropStale, unmatchedTopic
			for f := range b.unsubscribed {
				if Match(f, p.Topic) {
					outcomes[i].drop, outcomes[i].filter = dropUnsubscribed, f
					break
				}
			}
			continue
		}
		outcomes[i].filter = r.Filter
		b.obs.MQTTIn.WithLabelValues(r.Filter).Inc()
		key, value, err := r.Build(p.Topic, p.Payload, m.received)
		if err != nil {
			outcomes[i].drop = dropPoison
			b.log.Warn("mqtt message dropped", "reason", dropPoison, "mqtt_topic", p.Topic, "config", r.ConfigKey, "error", err)
			continue
		}
		raw, err := value.Bytes()
		if err != nil {
			outcomes[i].drop = dropPoison
			continue
		}
		rec := &kgo.Record{Topic: r.Output, Key: []byte(key), Value: raw, Timestamp: m.received}
		rec.Partition = kafkax.Partition(rec.Key, b.counts[r.Output])
		outcomes[i].rec = rec
		records = append(records, rec)
	}

	if len(records) > 0 {
		if err := b.commit(ctx, records); err != nil {
			return len(taken), err
		}
	}

	// ACK in receive order (paho sends them in that order anyway).
	for i, m := range taken {
		o := outcomes[i]
		switch {
		case o.rec != nil:
			b.obs.MessageOut(o.rec.Topic, len(o.rec.Value))
		case o.drop == "committed":
		default:
			b.obs.MQTTDropped.WithLabelValues(o.drop, o.filter).Inc()
		}
		if err := m.sess.client.Ack(m.pub); err != nil {
			// The connection dropped after the commit: remember the
			// message so its redelivery is ACKed, not written twice.
			if o.rec != nil || o.drop == "committed" {
				b.committed[m.pub.PacketID] = contentHash(m.pub)
			}
			b.log.Debug("ack failed; the broker will resend", "packet_id", m.pub.PacketID, "error", err)
			continue
		}
		b.obs.MQTTAck.Observe(time.Since(m.received).Seconds())
	}
	b.updateBuffered()
	return len(taken), nil
}

// commit writes records in one transaction.
func (b *Bridge) commit(ctx context.Context, records []*kgo.Record) error {
	if err := b.prod.BeginTransaction(); err != nil {
		return fmt.Errorf("begin transaction: %w", err)
	}
	var mu sync.Mutex
	var firstErr error
	for _, rec := range records {
		b.prod.Produce(ctx, rec, func(_ *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			}
		})
	}
	if err := b.prod.Flush(ctx); err != nil {
		firstErr = errors.Join(firstErr, err)
	}
	if firstErr != nil {
		abortCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_ = b.prod.EndTransaction(abortCtx, kgo.TryAbort)
		return fmt.Errorf("producing to Kafka: %w", firstErr)
	}
	if err := b.prod.EndTransaction(ctx, kgo.TryCommit); err != nil {
		return fmt.Errorf("committing to Kafka: %w", err)
	}
	b.obs.TxnCommitted.Inc()
	return nil
}

func (b *Bridge) updateBuffered() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.obs.MQTTBuffered.Reset()
	counts := map[string]int{}
	for _, m := range b.inbox {
		counts[m.pub.Topic]++
	}
	for f := range b.subscribed {
		n := 0
		for t, c := range counts {
			if Match(f, t) {
				n += c
			}
		}
		b.obs.MQTTBuffered.WithLabelValues(f).Set(float64(n))
	}
}

func matchRelay(relays map[string]*Relay, topic string) *Relay {
	for f, r := range relays {
		if Match(f, topic) {
			return r
		}
	}
	return nil
}
