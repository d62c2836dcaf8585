package kafkax

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/flecht-dev/flecht/internal/health"
)

// SessionWatch follows whether a long-running stage is still in contact
// with Kafka, from what its own client sees (franz-go hooks), so that
// readiness turns within the session timeout of an outage whatever the
// stage's loops are doing. Franz-go's own signal, a group session that
// failed (OnPartitionsLost), comes only after a heartbeat retried for a
// whole session timeout, and a consumer that blocks rebalances while it
// polls hears of it only once its poll loop is free: a transformer whose
// tasks were starting when Kafka went away stayed ready for most of a
// minute.
//
// Contact is an answer to a request the watch counts: for a group member
// every request to its group coordinator (a heartbeat comes every few
// seconds), for the MQTT bridge, which has no group, any answer at all.
// The session counts as gone when nothing answered for longer than the
// limit (the group session timeout, after which the coordinator drops the
// member anyway), unless a join is in flight: the coordinator holds a
// JoinGroup until every member rejoined, up to the rebalance timeout.
//
// Every method is safe for concurrent use.
type SessionWatch struct {
	limit     time.Duration
	joinLimit time.Duration
	group     bool
	now       func() time.Time

	mu       sync.Mutex
	since    time.Time // the last answer, or when the watch began
	answered bool      // an answer arrived since the watch began
	joining  time.Time // a JoinGroup or SyncGroup written and not answered yet
	failures int       // failed attempts since the last answer
	lastErr  error
}

// NewSessionWatch watches a group member whose session times out after
// limit and whose joins may take up to joinLimit (the rebalance timeout).
func NewSessionWatch(limit, joinLimit time.Duration) *SessionWatch {
	return newSessionWatch(limit, joinLimit, true, time.Now)
}

// NewContactWatch watches a client that is in no group (the MQTT
// bridge's producer): any answer of any broker is contact.
func NewContactWatch(limit time.Duration) *SessionWatch {
	return newSessionWatch(limit, 0, false, time.Now)
}

func newSessionWatch(limit, joinLimit time.Duration, group bool, now func() time.Time) *SessionWatch {
	return &SessionWatch{limit: limit, joinLimit: joinLimit, group: group, now: now, since: now()}
}

// Opt installs the watch's hooks on a client.
func (w *SessionWatch) Opt() kgo.Opt { return kgo.WithHooks(w) }

// counted reports whether an answer to a request with this key is contact.
func (w *SessionWatch) counted(key int16) bool {
	if !w.group {
		return true
	}
	switch kmsg.Key(key) {
	case kmsg.Heartbeat, kmsg.JoinGroup, kmsg.SyncGroup, kmsg.OffsetCommit, kmsg.OffsetFetch,
		kmsg.TxnOffsetCommit, kmsg.LeaveGroup, kmsg.ConsumerGroupHeartbeat:
		return true
	}
	return false
}

// OnBrokerWrite notes a join written: the coordinator may hold it.
func (w *SessionWatch) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if err != nil || !w.group || (kmsg.Key(key) != kmsg.JoinGroup && kmsg.Key(key) != kmsg.SyncGroup) {
		return
	}
	w.mu.Lock()
	w.joining = w.now()
	w.mu.Unlock()
}

// OnBrokerE2E notes an answer, or a request that failed on the wire.
func (w *SessionWatch) OnBrokerE2E(_ kgo.BrokerMetadata, key int16, e2e kgo.BrokerE2E) {
	if !w.counted(key) {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if k := kmsg.Key(key); k == kmsg.JoinGroup || k == kmsg.SyncGroup {
		w.joining = time.Time{}
	}
	if err := e2e.Err(); err != nil {
		w.failedLocked(err)
		return
	}
	w.since, w.answered, w.failures, w.lastErr = w.now(), true, 0, nil
}

// OnBrokerConnect notes a connection that could not be made: a broker
// down or unreachable.
func (w *SessionWatch) OnBrokerConnect(meta kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	if err == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.failedLocked(fmt.Errorf("connecting to broker %s:%d: %w", meta.Host, meta.Port, err))
}

// OnGroupManageError notes a group session that failed (franz-go
// rejoins after a backoff).
func (w *SessionWatch) OnGroupManageError(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.failedLocked(err)
}

func (w *SessionWatch) failedLocked(err error) {
	w.failures++
	w.lastErr = err
}

// SessionState is what a SessionWatch sees at one moment.
type SessionState struct {
	// OK: an answer came within the limit, or a join is in flight.
	OK bool
	// Silent is how long nothing answered (since the watch began, before
	// the first answer).
	Silent time.Duration
	// Failures counts the failed attempts since the last answer; Err is
	// the last of them.
	Failures int
	Err      error
	// Answered: an answer came since the watch began.
	Answered bool
}

// State reports what the watch sees now.
func (w *SessionWatch) State() SessionState {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.now()
	s := SessionState{Silent: now.Sub(w.since), Failures: w.failures, Err: w.lastErr, Answered: w.answered}
	joining := !w.joining.IsZero() && now.Sub(w.joining) <= w.joinLimit
	s.OK = s.Silent <= w.limit || joining
	return s
}

// Limit is how long the watch allows without an answer.
func (w *SessionWatch) Limit() time.Duration { return w.limit }

// How often Follow looks, and how often it repeats that the session is
// still gone.
const (
	followEvery  = 250 * time.Millisecond
	followRepeat = 15 * time.Second
)

// Follow keeps ready in step with the watch until ctx ends and logs each
// change: at once when contact is lost (with why), every 15 s while it
// stays lost (with the failed attempts so far, a growing count), and
// "Kafka is back: …" when an answer comes again. what names the stage's
// session in those lines ("the session in group sensors-count"). ping,
// when set, is a client with the watch's hooks that is asked for the
// cluster's brokers whenever nothing answered for a third of the limit: a
// client in no group may have nothing else to send.
func (w *SessionWatch) Follow(ctx context.Context, log *slog.Logger, ready *health.Condition, what string, ping *kgo.Client) {
	f := w.follower(log, ready, what)
	t := time.NewTicker(followEvery)
	defer t.Stop()
	var pinging atomic.Bool
	for {
		s := f.step()
		if ping != nil && s.Silent > w.limit/3 && pinging.CompareAndSwap(false, true) {
			go func() {
				defer pinging.Store(false)
				pctx, cancel := context.WithTimeout(ctx, max(w.limit/3, time.Second))
				defer cancel()
				req := kmsg.NewPtrMetadataRequest()
				req.Topics = []kmsg.MetadataRequestTopic{} // the brokers only
				_, _ = ping.Request(pctx, req)             // the hooks see how it went
			}()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// follower is Follow's state between two looks.
type follower struct {
	w              *SessionWatch
	log            *slog.Logger
	ready          *health.Condition
	what, peer     string
	lostAt, saidAt time.Time
	failures       int // while lost: the failed attempts last seen
	// last is what the previous look saw: an answer after failures
	// that had lasted a third of the limit is a recovery too, though
	// short of a loss.
	last SessionState
}

func (w *SessionWatch) follower(log *slog.Logger, ready *health.Condition, what string) *follower {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	peer := "Kafka"
	if w.group {
		peer = "the group coordinator"
	}
	return &follower{w: w, log: log, ready: ready, what: what, peer: peer}
}

// step looks once: it sets readiness and logs what changed.
func (f *follower) step() SessionState {
	w := f.w
	s := w.State()
	now := w.now()
	if !s.OK {
		f.failures = s.Failures
	}
	prev := f.last
	f.last = s
	switch {
	case !s.OK && f.lostAt.IsZero():
		f.lostAt, f.saidAt = now.Add(-s.Silent), now
		f.ready.Set(false, w.lostDetail(s, f.peer, f.what))
		f.log.Warn(fmt.Sprintf("no answer from %s for %s (the session timeout): %s is gone; not ready, retrying", f.peer, s.Silent.Round(time.Second), f.what),
			"attempt", max(s.Failures, 1), "error", errText(s.Err))
	case !s.OK:
		f.ready.Set(false, w.lostDetail(s, f.peer, f.what))
		if now.Sub(f.saidAt) >= followRepeat {
			f.saidAt = now
			f.log.Warn(fmt.Sprintf("still no answer from %s: %s is gone; not ready, retrying", f.peer, f.what),
				"attempt", max(s.Failures, 1), "since", now.Sub(f.lostAt).Round(time.Second), "error", errText(s.Err))
		}
	case !f.lostAt.IsZero():
		f.log.Info(fmt.Sprintf("Kafka is back: %s answers again (%s)", f.peer, f.what),
			"unreachable_for", now.Sub(f.lostAt).Round(time.Millisecond), "failed_attempts", f.failures)
		f.lostAt = time.Time{}
		f.ready.Set(true, w.okDetail(s, f.peer, f.what))
	case prev.Failures > 0 && s.Failures == 0 && prev.Silent >= w.limit/3:
		f.log.Info(fmt.Sprintf("Kafka is back: %s answers again (%s)", f.peer, f.what),
			"unreachable_for", prev.Silent.Round(time.Millisecond), "failed_attempts", prev.Failures)
		f.ready.Set(true, w.okDetail(s, f.peer, f.what))
	default:
		f.ready.Set(true, w.okDetail(s, f.peer, f.what))
	}
	return s
}

func (w *SessionWatch) lostDetail(s SessionState, peer, what string) string {
	d := fmt.Sprintf("%s is gone: no answer from %s for %s (limit %s), %d failed attempt(s)",
		what, peer, s.Silent.Round(time.Second), w.limit, s.Failures)
	if s.Err != nil {
		d += "; last error: " + s.Err.Error()
	}
	return d
}

func (w *SessionWatch) okDetail(s SessionState, peer, what string) string {
	if !s.Answered {
		return fmt.Sprintf("%s: waiting for the first answer of %s (limit %s)", what, peer, w.limit)
	}
	return fmt.Sprintf("%s: %s answered %s ago (limit %s)", what, peer, s.Silent.Round(100*time.Millisecond), w.limit)
}

func errText(err error) string {
	if err == nil {
		return "none seen"
	}
	return err.Error()
}
