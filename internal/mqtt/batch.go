package mqtt

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/lineage"
	"github.com/flecht-dev/flecht/internal/metrics"
)

// Reasons a message is ACKed without being written (mqtt_messages_dropped_total).
const (
	dropPoison       = metrics.DropPoison
	dropUnsubscribed = metrics.DropUnsubscribed
	dropStale        = metrics.DropStale
	unmatchedTopic   = metrics.UnmatchedTopic
	// dropCommitted marks a redelivery of a message already committed: it
	// is ACKed, neither written nor counted as a drop.
	dropCommitted = "committed"
)

// relayBatch takes up to maxBatch buffered messages, writes the relayable
// ones in one Kafka transaction, and only after it committed ACKs every
// taken message in the order received. It returns how many it took.
func (b *Bridge) relayBatch(ctx context.Context, relays map[string]*Relay) (int, error) {
	b.mu.Lock()
	cur := b.sess
	latched := b.latched
	if cur != nil && cur != b.lastSess {
		if !cur.present {
			// A new session at the broker: nothing of the old one comes again.
			b.unacked.reset()
		}
		b.lastSess = cur
	}
	var taken, held []*inbound
	for _, m := range b.inbox {
		switch {
		case cur == nil || m.sess.gen > cur.gen:
			// Its connection is not the current one yet: the broker may
			// deliver right after CONNACK, before the connection loop
			// made it current. Keep it: dropping a message of a live
			// connection would leave it un-ACKed there for good, and as
			// paho sends ACKs only in receive order, no later ACK on that
			// connection would ever go out — the broker's window fills
			// and delivery stops.
			held = append(held, m)
		case m.sess != cur:
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
	redelivered := 0
	for i, m := range taken {
		p := m.pub
		if p.QoS > 0 && b.unacked.redelivery(p, m.sess.gen) {
			outcomes[i].drop = dropCommitted // written before the reconnect: ACK only
			redelivered++
			continue
		}
		r := matchRelay(relays, p.Topic)
		if r == nil {
			outcomes[i].drop, outcomes[i].filter = dropStale, unmatchedTopic
			if f, ok := b.removedFilter(p.Topic); ok {
				outcomes[i].drop, outcomes[i].filter = dropUnsubscribed, f
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
		rec := &kgo.Record{Topic: r.Output, Key: []byte(key), Value: raw, Timestamp: m.received,
			Headers: []kgo.RecordHeader{{Key: lineage.HeaderOrigin, Value: []byte(lineage.MQTTOrigin(p.Topic))}}}
		rec.Partition = kafkax.Partition(rec.Key, b.counts[r.Output])
		outcomes[i].rec = rec
		records = append(records, rec)
	}

	if len(records) > 0 {
		if err := b.commitRetrying(ctx, records); err != nil {
			return len(taken), err
		}
	}
	if redelivered > 0 {
		b.redelivered.Add(int64(redelivered))
		b.log.Info("redelivered messages were committed before the reconnect: ACKed without writing them again", "count", redelivered)
	}
	if b.afterCommit != nil {
		b.afterCommit()
	}

	// ACK in receive order (paho sends them in that order anyway).
	for i, m := range taken {
		o := outcomes[i]
		switch {
		case o.rec != nil:
			b.obs.MessageOut(o.rec.Topic, len(o.rec.Key)+len(o.rec.Value))
		case o.drop == dropCommitted:
		default:
			b.obs.MQTTDropped.WithLabelValues(o.drop, o.filter).Inc()
		}
		if m.pub.QoS > 0 && (o.rec != nil || o.drop == dropCommitted) {
			// Until paho has written its PUBACK, a redelivery of this
			// message is not written again.
			b.unacked.add(m.pub, m.sess.gen)
		}
		if err := m.sess.client.Ack(m.pub); err != nil {
			// The connection dropped after the commit: the broker resends
			// the message and the entry above keeps it from a second write.
			b.log.Debug("ack failed; the broker will resend", "packet_id", m.pub.PacketID, "error", err)
			continue
		}
		if m.pub.QoS > 0 {
			m.sess.marked.Add(1)
		}
		b.obs.MQTTAck.Observe(time.Since(m.received).Seconds())
	}
	if b.afterAck != nil {
		b.afterAck()
	}
	b.updateBuffered()
	return len(taken), nil
}

// errStopped: the stage was stopped while Kafka was failing a batch. The
// batch was aborted and stays un-ACKed in the MQTT broker's session, which
// delivers it to the next incarnation.
var errStopped = errors.New("stopped while Kafka was unavailable")

// commitRetrying commits records in one transaction, retrying retriable
// failures (a node killed, paused or restarting; a leader or coordinator
// moving; the whole cluster down) with a bounded backoff: each failed
// attempt is aborted and the same records are written again in a new
// transaction, so the batch's messages are ACKed only once it committed.
// A commit whose outcome was unknown may have committed, so its messages
// may be written twice (at least once, as after a crash between commit and
// ACK). A non-retriable error (a fence, a refused authorisation) ends the
// stage. Every attempt passes the same ctx: franz-go keeps the context of a
// record's first Produce in the record, and fails it whenever that one ends.
func (b *Bridge) commitRetrying(ctx context.Context, records []*kgo.Record) error {
	bo := kafkax.Backoff{Min: 100 * time.Millisecond, Max: 5 * time.Second}
	start := time.Now()
	// A batch fenced again and again is not the coordinator's hiccup.
	const maxReinits = 3
	reinits := 0
	for {
		err := b.commit(ctx, records)
		if err == nil {
			if bo.Attempts() > 0 {
				b.log.Info("Kafka is back: the batch committed after retries", "records", len(records),
					"attempts", bo.Attempts()+1, "took", time.Since(start).Round(time.Millisecond))
			}
			return nil
		}
		if kafkax.Fenced(err) && !b.fencedByTwin() && reinits < maxReinits {
			reinits++
			// Not another incarnation (see fencedByTwin): take the
			// transactional ID back and write the batch again.
			b.log.Warn("Kafka fenced the producer although no other bridge took this client id's MQTT session: "+
				"a transaction coordinator moved during a commit; initialising the producer again and retrying the batch",
				"transactional_id", b.TransactionalID(), "error", err)
			if ierr := b.initProducer(ctx); ierr != nil {
				err = ierr
			} else {
				continue
			}
		}
		if !kafkax.Retriable(err) {
			return err
		}
		if b.runCtx == nil || b.runCtx.Err() != nil {
			return errStopped
		}
		if werr := bo.Wait(b.runCtx, b.log, "committing a batch of "+strconv.Itoa(len(records))+" records", err); werr != nil {
			return errStopped
		}
	}
}

// commit writes records in one transaction; on failure the transaction is
// aborted (or, when a commit's outcome is unknown, the producer's epoch is
// bumped, which aborts it if it is still open).
func (b *Bridge) commit(ctx context.Context, records []*kgo.Record) error {
	// The ACKs of the last batch went out meanwhile, while its markers
	// were written: produce once they are (see kafkax.TxnSettler).
	b.settler.Settle(ctx)
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
	err := b.prod.EndTransaction(ctx, kgo.TryCommit)
	b.settler.Ended()
	if err != nil {
		// franz-go's documented recovery: end again with TryAbort, which
		// aborts, or settles an unconfirmed commit by re-initialising the
		// producer ID.
		abortCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_ = b.prod.EndTransaction(abortCtx, kgo.TryAbort)
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

// removedFilter finds the filter of a config that is no longer active and
// matches topic: one already unsubscribed, or one still subscribed whose
// UNSUBSCRIBE has not been answered yet. Its buffered messages are the
// removed config's tail (reason "unsubscribed"), not strays ("stale").
func (b *Bridge) removedFilter(topic string) (string, bool) {
	for f := range b.unsubscribed {
		if Match(f, topic) {
			return f, true
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for f := range b.subscribed {
		if Match(f, topic) {
			return f, true
		}
	}
	return "", false
}
