package mqtt

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eclipse/paho.golang/packets"
	"github.com/eclipse/paho.golang/paho"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/attr"
	"github.com/flecht-dev/flecht/internal/health"
	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/metrics"
	"github.com/flecht-dev/flecht/internal/stage"
	"github.com/flecht-dev/flecht/internal/stagefile"
)

// Options configure a bridge.
type Options struct {
	Stage    *stagefile.Stage
	Cluster  *kafkax.Cluster
	ClientID string
	Endpoint Endpoint
	Metrics  *metrics.Observer
	Log      *slog.Logger
	// MaxBatch bounds the messages one transaction carries (default 1000).
	MaxBatch int
	// Health gets the heartbeats of the relay loop and the connection
	// supervisor, and readiness: connected and subscribed.
	Health *health.Registry
}

// Bridge relays MQTT messages into Kafka, one transaction per batch, and
// acknowledges each message to the MQTT broker only after its transaction
// committed.
type Bridge struct {
	app            string
	clientID       string
	endpoint       Endpoint
	sessionExpiry  time.Duration
	receiveMaximum uint16
	pollInterval   time.Duration
	maxBatch       int
	cluster        *kafkax.Cluster
	obs            *metrics.Observer
	log            *slog.Logger
	configs        *stage.ConfigStore
	configTopics   []string

	prod  *kgo.Client
	admin *kadm.Client
	// settler holds the next transaction until the coordinator completed
	// the last one.
	settler *kafkax.TxnSettler
	// runCtx is Run's context: retries against a failing Kafka stop when
	// it ends.
	runCtx context.Context
	counts map[string]int // output topic partition counts

	mu      sync.Mutex
	sess    *session
	inbox   []*inbound
	wake    chan struct{}
	latched bool // the first reconciliation made the declared filters authoritative

	// subscribed is what this session is subscribed to (filter → config key).
	subscribed map[string]string
	// unsubscribed remembers filters dropped by reconciliation, so that
	// stragglers count as reason="unsubscribed" rather than "stale".
	unsubscribed map[string]bool
	// refusedAt is when the broker last refused a filter's SUBSCRIBE
	// (loop goroutine only).
	refusedAt map[string]time.Time
	// unacked holds the committed QoS 1 messages whose PUBACK paho has not
	// written yet, to tell their redeliveries (redelivery.go).
	unacked *unacked
	// lastSess is the session relayBatch saw last (loop goroutine only).
	lastSess *session
	// redelivered counts DUP arrivals recognised as already committed.
	redelivered atomic.Int64
	// takenOverAt is when (unix ns) the MQTT broker last said another
	// client took this client id's session over; 0 never.
	takenOverAt atomic.Int64
	// afterCommit and afterAck, when set (tests), run between a commit
	// and its ACKs, and after the ACKs were handed to paho.
	afterCommit, afterAck func()
	// beforeCurrent, when set (tests), runs after a CONNECT succeeded and
	// before its session becomes the current one.
	beforeCurrent func()

	loggedOnce map[string]bool

	// declared holds every filter the config topics still show a record
	// for, current or overwritten or tombstoned: what an earlier
	// incarnation may have left subscribed in the persistent session.
	declared map[string]bool
	// resumed is set when the broker resumed a session this process has
	// not subscribed in yet: its subscriptions are unknown until the next
	// reconciliation unsubscribes every declared filter no config holds.
	resumed    bool
	sawSession bool
	// resubscribe is set for each new connection: the next reconciliation
	// subscribes every active filter, not only the new ones.
	resubscribe bool
	// lastSubs is what the last reconciliation left subscribed: what a
	// new connection subscribes at once (subscribeEarly).
	lastSubs []paho.SubscribeOptions

	// relays are the active configs by filter, re-parsed when the config
	// topics are drained (loop goroutine only).
	relays     map[string]*Relay
	lastConfig time.Time
	// defaults are the stage file's mqtt-relay options.
	defaults RelayDefaults

	// relayBeat and connBeat are the heartbeats of the relay loop and the
	// connection supervisor; ready is met while the current connection is
	// subscribed to every active filter (reconciled is the session the
	// last complete reconciliation ran on).
	relayBeat, connBeat *health.Loop
	ready               *health.Condition
	reconciled          *session
	refusedNow          []string // filters the broker refused, for readiness (b.mu)
}

type inbound struct {
	pub      *paho.Publish
	sess     *session
	received time.Time
}

// NewBridge prepares a bridge for an mqtt stage; an error is a stage file
// the bridge cannot run (its extract: options).
func NewBridge(o Options) (*Bridge, error) {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Metrics == nil {
		o.Metrics = metrics.New(nil)
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = 1000
	}
	st := o.Stage
	defaults, err := ParseRelayDefaults(st.Extract)
	if err != nil {
		return nil, err
	}
	interval := time.Duration(st.PollInterval)
	if interval <= 0 {
		interval = 5 * time.Second
	}
	// 0: CONNECT carries no Receive Maximum and the broker's own window
	// (Mosquitto's max_inflight_messages) applies. The stage file checked
	// the range.
	var recvMax uint16
	if r := st.MQTT.ReceiveMax(); r > 0 && r <= 65535 {
		recvMax = uint16(r)
	}
	o.Metrics.MQTTSessionExpiry().Set(st.SessionExpiry().Seconds())
	return &Bridge{
		app: st.ApplicationID, clientID: o.ClientID, endpoint: o.Endpoint,
		sessionExpiry: st.SessionExpiry(), receiveMaximum: recvMax, pollInterval: interval,
		maxBatch: o.MaxBatch, cluster: o.Cluster, obs: o.Metrics, log: o.Log,
		configs: stage.NewConfigStore(st.ConfigTopics, o.Log, o.Metrics), configTopics: st.ConfigTopics,
		counts: map[string]int{}, wake: make(chan struct{}, 1),
		subscribed: map[string]string{}, unsubscribed: map[string]bool{}, unacked: newUnacked(),
		refusedAt: map[string]time.Time{}, defaults: defaults,
		// A cycle drains configs, reconciles (15 s at most) and commits a
		// batch (its transaction times out after a minute).
		relayBeat: o.Health.Loop("relay_loop", interval+2*time.Minute),
		// Dial, CONNECT and the early SUBSCRIBE each time out within 15 s.
		connBeat: o.Health.Loop("mqtt_connection", 2*time.Minute),
		ready:    o.Health.Condition("mqtt", "starting: config topics and the Kafka producer come first"),
	}, nil
}

// TransactionalID is the bridge's producer identity (docs/contract.md §1).
func (b *Bridge) TransactionalID() string { return b.app + "-" + b.clientID }

// Run relays until ctx ends (then it commits and ACKs the batch in hand,
// disconnects without unsubscribing, and returns nil) or something fails.
func (b *Bridge) Run(ctx context.Context) error {
	defer b.ready.Set(false, "stopped")
	admin, err := b.cluster.Client(kgo.ClientID(b.clientID))
	if err != nil {
		return err
	}
	defer admin.Close()
	if err := b.cluster.Ping(ctx, admin); err != nil {
		return err
	}
	b.admin = kadm.NewClient(admin)
	if err := b.configs.Bootstrap(ctx, b.cluster, b.clientID); err != nil {
		return err
	}
	defer b.configs.Close()
	if err := b.readDeclaredFilters(ctx, admin); err != nil {
		return err
	}

	if err := b.initProducer(ctx); err != nil {
		return err
	}
	defer func() { b.prod.Close() }()

	connCtx, stopConn := context.WithCancel(context.WithoutCancel(ctx))
	connDone := make(chan struct{})
	go func() { defer close(connDone); b.maintainConnection(connCtx) }()
	defer func() { stopConn(); <-connDone }()

	b.log.Info("mqtt bridge running", "application_id", b.app, "client_id", b.clientID,
		"broker", b.endpoint.hostPort(), "transactional_id", b.TransactionalID(), "session_expiry", b.sessionExpiry)
	work := context.WithoutCancel(ctx)
	b.runCtx = ctx
	ticker := time.NewTicker(b.pollInterval)
	defer ticker.Stop()
	for {
		b.relayBeat.Beat()
		select {
		case <-ctx.Done():
			// Commit and ACK a batch of what is already here; the rest
			// stays in the broker's session for the next incarnation.
			if err := b.cycle(work, false); !errors.Is(err, errStopped) {
				return err
			}
			return nil
		case <-b.wake:
			if err := b.cycle(work, false); err != nil {
				return stoppedOK(err)
			}
		case <-ticker.C:
			if err := b.cycle(work, true); err != nil {
				return stoppedOK(err)
			}
		}
	}
}

// initProducer creates the transactional producer and initialises it,
// which fences a previous incarnation and aborts its open transaction.
func (b *Bridge) initProducer(ctx context.Context) error {
	prod, err := b.cluster.Client(
		kgo.ClientID(b.clientID),
		kgo.TransactionalID(b.TransactionalID()),
		kgo.TransactionTimeout(time.Minute),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0),
	)
	if err != nil {
		return err
	}
	if _, _, err := prod.ProducerID(ctx); err != nil {
		prod.Close()
		return fmt.Errorf("initializing producer %s (fencing a previous incarnation): %w", b.TransactionalID(), kafkax.NeedsACL(err, "Write on transactional ID "+b.TransactionalID()))
	}
	if b.prod != nil {
		b.prod.Close()
	}
	b.prod = prod
	b.settler = kafkax.NewTxnSettler(prod, b.TransactionalID())
	return nil
}

// takeoverWindow is how long after an MQTT session takeover a Kafka fence
// is taken for what it says: another bridge with this client id.
const takeoverWindow = 2 * time.Minute

// fencedByTwin reports whether a fence of the producer comes from another
// bridge with this client id: such a twin also takes the MQTT session
// over, which the broker reports. Without a takeover, the fence is the
// cluster's own doing: a transaction coordinator that moved (a node
// paused or killed) while a commit was in flight can answer the commit's
// retry PRODUCER_FENCED although no other producer exists.
func (b *Bridge) fencedByTwin() bool {
	at := b.takenOverAt.Load()
	return at != 0 && time.Since(time.Unix(0, at)) < takeoverWindow
}

// stoppedOK turns errStopped (a stop that came while Kafka was failing a
// batch) into a clean end.
func stoppedOK(err error) error {
	if errors.Is(err, errStopped) {
		return nil
	}
	return err
}

// configEvery bounds how often a busy bridge drains the config topics and
// re-parses the configs (an idle one does it on every poll_interval tick).
const configEvery = 100 * time.Millisecond

// cycle is one pass: drain config changes (on a tick, or at most every
// configEvery while messages keep arriving), reconcile the subscriptions,
// then relay and ACK one batch of what arrived. A busy bridge comes back
// at once for the next batch, so config changes, reconnects and shutdown
// are never starved by a backlog.
func (b *Bridge) cycle(ctx context.Context, tick bool) error {
	start := time.Now()
	defer func() { b.obs.PollCycle.Observe(time.Since(start).Seconds()) }()
	if b.relays == nil || tick || time.Since(b.lastConfig) >= configEvery {
		if err := b.configs.Drain(ctx); err != nil {
			if !kafkax.Retriable(err) {
				return err
			}
			// A config topic partition whose leader is moving: the
			// configs in hand stay active; the next cycle reads on.
			b.log.Warn("reading the config topics failed; relaying with the configs in hand and retrying", "error", err)
		}
		b.relays = b.activeRelays(ctx)
		b.lastConfig = time.Now()
	}
	if err := b.reconcile(ctx, b.relays); err != nil {
		return err
	}
	n, err := b.relayBatch(ctx, b.relays)
	if err == nil && n > 0 && b.pending() {
		b.signal() // more is waiting: the next batch right away
	}
	return err
}

// pending reports whether messages wait in the inbox.
func (b *Bridge) pending() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.inbox) > 0
}

// setSession makes s the current connection (nil: none). early are the
// filters subscribeEarly already subscribed on it.
func (b *Bridge) setSession(s *session, early []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if s != nil {
		switch {
		case !s.present:
			// A new session at the broker holds no subscriptions.
			clear(b.subscribed)
			b.resumed = false
		case !b.sawSession:
			// An earlier incarnation's session: whatever it subscribed
			// is still there, and this process does not know what.
			b.resumed = true
		}
		// Subscribe every active filter again on each new connection,
		// even on a resumed session: Mosquitto 2.0.11 restores a session
		// from persistence (session present) without its $share
		// subscriptions, and would then never deliver again. SUBSCRIBE
		// of a filter already held is harmless.
		b.resubscribe = early == nil
		for _, f := range early {
			b.subscribed[f] = "(resubscribed)"
		}
		b.sawSession = true
	}
	b.sess = s
	b.reportReady()
	b.signal()
}

// reportReady tells readiness whether the current connection is subscribed
// (b.mu held).
func (b *Bridge) reportReady() {
	broker := b.endpoint.hostPort()
	switch {
	case b.sess == nil:
		b.ready.Set(false, "not connected to MQTT broker "+broker+"; reconnecting")
	case b.reconciled != b.sess:
		b.ready.Set(false, "connected to MQTT broker "+broker+"; subscribing")
	default:
		detail := fmt.Sprintf("connected to MQTT broker %s as %s; subscribed to %d active filter(s)", broker, b.clientID, len(b.lastSubs))
		if len(b.refusedNow) > 0 {
			detail += "; refused by the broker (ACL?): " + strings.Join(b.refusedNow, ", ")
		}
		b.ready.Set(true, detail)
	}
}

// readDeclaredFilters reads the config topics' whole retained history for
// the filters they ever declared (the store keeps only the latest values).
func (b *Bridge) readDeclaredFilters(ctx context.Context, cl *kgo.Client) error {
	b.declared = map[string]bool{}
	_, err := kafkax.ReadToEndFunc(ctx, cl, b.configTopics, func(r *kgo.Record) error {
		if r.Value == nil {
			return nil
		}
		c, _, err := attr.Decode[attr.Config](r.Value)
		if err != nil {
			return nil // the store logs undecodable records
		}
		if f, ok, err := cfgTopic.Get(c); err == nil && ok && ValidFilter(f) == nil {
			b.declared[f] = true
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("config topics: %w", err)
	}
	return nil
}

// receive runs on paho's goroutine for every PUBLISH: it only buffers and
// wakes the loop, so arrival latency is well under the poll interval.
func (b *Bridge) receive(s *session, p *paho.Publish) {
	b.mu.Lock()
	b.inbox = append(b.inbox, &inbound{pub: p, sess: s, received: time.Now()})
	b.signal()
	b.mu.Unlock()
}

func (b *Bridge) signal() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// activeRelays parses the active configs, refusing invalid ones and every
// pair whose filters overlap (each would receive every matching message).
func (b *Bridge) activeRelays(ctx context.Context) map[string]*Relay {
	snapshot := b.configs.Snapshot()
	keys := make([]string, 0, len(snapshot))
	for k := range snapshot {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var candidates []*Relay
	for _, k := range keys {
		r, err := ParseRelay(k, snapshot[k], b.defaults)
		if err != nil {
			b.logOnce("invalid", k, "mqtt config refused", "config", k, "error", err)
			continue
		}
		if r.Suspended {
			continue
		}
		if err := b.checkOutput(ctx, r.Output); err != nil {
			b.logOnce("output", k, "mqtt config refused", "config", k, "error", err)
			continue
		}
		candidates = append(candidates, r)
	}
	refused := map[string]bool{}
	for i, a := range candidates {
		for _, c := range candidates[i+1:] {
			if Overlap(a.Filter, c.Filter) {
				refused[a.ConfigKey], refused[c.ConfigKey] = true, true
				b.logOnce("overlap", a.ConfigKey+"|"+c.ConfigKey, "mqtt configs refused: their filters overlap, so each would receive every matching message",
					"config", a.ConfigKey, "filter", a.Filter, "other_config", c.ConfigKey, "other_filter", c.Filter)
			}
		}
	}
	out := map[string]*Relay{}
	for _, r := range candidates {
		if !refused[r.ConfigKey] {
			out[r.Filter] = r
		}
	}
	b.obs.ActiveConfigs.Set(float64(len(out)))
	return out
}

// reconcile subscribes $share/<app>/<filter> for every active relay and
// unsubscribes every filter no active relay declares.
func (b *Bridge) reconcile(ctx context.Context, relays map[string]*Relay) error {
	for f := range b.refusedAt {
		if _, ok := relays[f]; !ok {
			delete(b.refusedAt, f) // its config is gone
		}
	}
	b.mu.Lock()
	s := b.sess
	var subs []paho.SubscribeOptions
	resubscribe := b.resubscribe
	for f, r := range relays {
		if _, ok := b.subscribed[f]; (!ok || resubscribe) && b.mayRetry(f) {
			subs = append(subs, paho.SubscribeOptions{Topic: b.shared(f), QoS: r.QoS})
		}
	}
	var unsubs []string
	for f := range b.subscribed {
		if _, ok := relays[f]; !ok {
			unsubs = append(unsubs, f)
		}
	}
	resumed := b.resumed
	if resumed {
		// Unsubscribing what was never subscribed is harmless (the broker
		// answers "no subscription existed").
		for f := range b.declared {
			if _, ok := relays[f]; !ok && !slices.Contains(unsubs, f) {
				unsubs = append(unsubs, f)
			}
		}
		sort.Strings(unsubs)
	}
	b.mu.Unlock()
	if s == nil {
		return nil // reconnecting; the next cycle reconciles
	}
	rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if len(subs) > 0 {
		sort.Slice(subs, func(i, j int) bool { return subs[i].Topic < subs[j].Topic })
		// paho returns an error also when the broker refused only some
		// filters; the SUBACK's reason codes tell them apart.
		ack, err := s.client.Subscribe(rctx, &paho.Subscribe{Subscriptions: subs})
		if ack == nil || len(ack.Reasons) != len(subs) {
			b.log.Warn("MQTT SUBSCRIBE failed; will retry", "error", err)
			return nil
		}
		for i, so := range subs {
			f := so.Topic[len(b.shared("")):]
			if ack.Reasons[i] >= 0x80 {
				b.refused(relays[f], ack, i)
				continue
			}
			b.mu.Lock()
			b.subscribed[f] = relays[f].ConfigKey
			b.mu.Unlock()
			delete(b.unsubscribed, f)
			delete(b.refusedAt, f)
			delete(b.loggedOnce, "suback\x00"+relays[f].ConfigKey)
			b.log.Info("subscribed", "filter", so.Topic, "config", relays[f].ConfigKey)
		}
	}
	if len(unsubs) > 0 {
		topics := make([]string, len(unsubs))
		for i, f := range unsubs {
			topics[i] = b.shared(f)
		}
		if _, err := s.client.Unsubscribe(rctx, &paho.Unsubscribe{Topics: topics}); err != nil {
			b.log.Warn("MQTT UNSUBSCRIBE failed; will retry", "error", err)
			return nil
		}
		b.mu.Lock()
		for _, f := range unsubs {
			delete(b.subscribed, f)
		}
		b.mu.Unlock()
		for _, f := range unsubs {
			b.unsubscribed[f] = true
			b.log.Info("unsubscribed", "filter", b.shared(f))
		}
	}
	b.mu.Lock()
	b.latched = true
	b.lastSubs = b.lastSubs[:0]
	for f, r := range relays {
		if _, ok := b.subscribed[f]; ok {
			b.lastSubs = append(b.lastSubs, paho.SubscribeOptions{Topic: b.shared(f), QoS: r.QoS})
		}
	}
	slices.SortFunc(b.lastSubs, func(x, y paho.SubscribeOptions) int { return strings.Compare(x.Topic, y.Topic) })
	if b.sess == s {
		b.resumed = b.resumed && !resumed
		b.resubscribe = b.resubscribe && !resubscribe
		b.reconciled = s
	}
	b.refusedNow = b.refusedNow[:0]
	for f := range b.refusedAt {
		b.refusedNow = append(b.refusedNow, f)
	}
	sort.Strings(b.refusedNow)
	b.reportReady()
	b.mu.Unlock()
	return nil
}

func (b *Bridge) shared(filter string) string { return "$share/" + b.app + "/" + filter }

// refused handles a filter the broker refused in its SUBACK (an ACL, say):
// only its config goes without, the others run on. It is logged once and
// counted each time, and tried again a poll interval later.
func (b *Bridge) refused(r *Relay, ack *paho.Suback, i int) {
	b.obs.MQTTSubscriptionsRefused.WithLabelValues(r.Filter).Inc()
	b.refusedAt[r.Filter] = time.Now()
	reason := (&packets.Suback{Reasons: ack.Reasons}).Reason(i)
	if ack.Properties != nil && ack.Properties.ReasonString != "" {
		reason += " (" + ack.Properties.ReasonString + ")"
	}
	b.logOnce("suback", r.ConfigKey, "MQTT broker refused the subscription: this config receives nothing until the broker allows it (check its ACL); retried every poll_interval",
		"config", r.ConfigKey, "filter", b.shared(r.Filter), "reason_code", fmt.Sprintf("0x%02x", ack.Reasons[i]), "reason", reason)
}

// mayRetry reports whether a SUBSCRIBE of f may go out: a refused filter
// waits a poll interval, so a busy bridge does not ask on every batch.
func (b *Bridge) mayRetry(f string) bool {
	at, ok := b.refusedAt[f]
	return !ok || time.Since(at) >= b.pollInterval
}

// checkOutput makes sure an output topic exists (and learns its partition
// count) before a config may send records to it.
func (b *Bridge) checkOutput(ctx context.Context, topic string) error {
	if _, ok := b.counts[topic]; ok {
		return nil
	}
	n, err := kafkax.CommonPartitionCount(ctx, b.admin, topic)
	if err != nil {
		return fmt.Errorf("output topic: %w", err)
	}
	b.counts[topic] = n
	return nil
}

// logOnce logs a config problem once per kind and key (a config, or a pair
// of them), not every cycle; args name the configs involved.
func (b *Bridge) logOnce(kind, key, msg string, args ...any) {
	id := kind + "\x00" + key
	if b.loggedOnce == nil {
		b.loggedOnce = map[string]bool{}
	}
	if b.loggedOnce[id] {
		return
	}
	b.loggedOnce[id] = true
	b.log.Error(msg, args...)
}
