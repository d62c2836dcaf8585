package mqtt

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"slices"
	"sync/atomic"
	"time"

	"github.com/eclipse/paho.golang/packets"
	"github.com/eclipse/paho.golang/paho"
	pahosession "github.com/eclipse/paho.golang/paho/session"
	"github.com/eclipse/paho.golang/paho/session/state"

	"github.com/flecht-dev/flecht/internal/profile"
	"github.com/flecht-dev/flecht/internal/tlsclient"
)

// Endpoint is where the MQTT broker is and how to log in.
type Endpoint struct {
	URL      *url.URL
	Username string
	Password string
	// TLS is the client config of an mqtts:// URL (nil: the system roots
	// and no client certificate); TLSPeer says where its settings are
	// made, for the errors of a failed handshake.
	TLS     *tls.Config
	TLSPeer tlsclient.Peer
}

// NewEndpoint is the endpoint of resolved settings: it reads the TLS files
// now, so a broken one fails before anything connects.
func NewEndpoint(c *profile.MQTTConn, username, password string) (Endpoint, error) {
	if err := c.Err(); err != nil {
		return Endpoint{}, err
	}
	cfg, err := c.TLSConfig()
	if err != nil {
		return Endpoint{}, err
	}
	return Endpoint{URL: c.ParsedURL(), Username: username, Password: password, TLS: cfg, TLSPeer: c.Peer()}, nil
}

// ParseURL accepts mqtt://, tcp:// (plain) and mqtts://, ssl://, tls://
// (TLS); the port defaults to 1883 or 8883. A password
// in the URL is refused and errors never quote it (profile.ParseMQTTURL).
func ParseURL(s string) (*url.URL, error) {
	return profile.ParseMQTTURL(s)
}

func (e Endpoint) secure() bool { return profile.MQTTURLSecure(e.URL) }

func (e Endpoint) hostPort() string {
	port := e.URL.Port()
	if port == "" {
		port = "1883"
		if e.secure() {
			port = "8883"
		}
	}
	return net.JoinHostPort(e.URL.Hostname(), port)
}

// dial opens the network connection; over TLS the handshake is done when
// it returns, and its failure explained.
func (e Endpoint) dial(ctx context.Context) (net.Conn, error) {
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	if !e.secure() {
		return d.DialContext(ctx, "tcp", e.hostPort())
	}
	return tlsclient.Dial(ctx, d, e.hostPort(), e.URL.Hostname(), e.TLS, e.peer())
}

func (e Endpoint) peer() tlsclient.Peer {
	p := e.TLSPeer
	if p.Name == "" {
		p.Name = "the MQTT broker"
	}
	return p
}

// explain makes a failed CONNECT say what to change. Under TLS 1.3 a
// broker refuses a client certificate after the handshake, so its alert
// arrives with the read of the CONNACK. A plain client that met a TLS
// listener sees the connection closed.
func (e Endpoint) explain(err error) error {
	if e.secure() {
		return tlsclient.Explain(err, e.peer())
	}
	return profile.ExplainPlainMQTT(err)
}

// session is one live MQTT connection of the persistent session. Each
// connection gets its own paho.Client and session state, so an ACK meant
// for a message of an earlier connection can never go out on a later one
// (where the broker may have given its packet ID to another message): it
// fails with paho.ErrPacketNotFound instead, and the broker resends.
type session struct {
	conn    net.Conn
	client  *paho.Client
	state   *ackCounting
	gen     uint64 // which connection this is; acks only work on their own
	present bool   // the broker resumed an existing session

	// marked counts QoS 1 messages handed to client.Ack; state.written
	// counts the PUBACKs paho wrote. paho sends them in receive order on
	// its SendAcksInterval timer, so a clean shutdown waits for the two to
	// meet before it disconnects.
	marked atomic.Int64
}

// ackCounting is paho's in-memory session state counting the PUBACKs it
// writes (paho calls Ack from its ack timer, in receive order) and telling
// onWritten about each.
type ackCounting struct {
	pahosession.SessionManager
	written   atomic.Int64
	onWritten func(packetID uint16)
}

// Ack writes the PUBACK. paho's state also returns nil when its connection
// is already gone and nothing was written: counting that as written costs
// at most a duplicate (see unacked), never a message.
func (a *ackCounting) Ack(pb *packets.Publish) error {
	err := a.SessionManager.Ack(pb)
	if err == nil && pb.QoS > 0 {
		a.written.Add(1)
		a.onWritten(pb.PacketID)
	}
	return err
}

// flushAcks waits (at most d) until paho has written every PUBACK the
// bridge asked for on this connection.
func (s *session) flushAcks(d time.Duration) bool {
	deadline := time.Now().Add(d)
	for s.state.written.Load() < s.marked.Load() {
		if time.Now().After(deadline) {
			return false
		}
		select {
		case <-s.client.Done():
			return false
		case <-time.After(time.Millisecond):
		}
	}
	return true
}

// sessionTakenOver is the DISCONNECT reason code (MQTT 5) a broker sends
// when another connection claims this client id.
const sessionTakenOver = 0x8E

// connectOnce dials and sends CONNECT with clean start off and the session
// expiry, so the broker keeps queuing for this client id while it is away.
func (b *Bridge) connectOnce(ctx context.Context, gen uint64) (*session, error) {
	conn, err := b.endpoint.dial(ctx)
	if err != nil {
		return nil, fmt.Errorf("connecting to MQTT broker %s: %w", b.endpoint.hostPort(), err)
	}
	s := &session{conn: conn, gen: gen, state: &ackCounting{
		SessionManager: state.NewInMemory(),
		onWritten:      func(pid uint16) { b.unacked.written(pid, gen) },
	}}
	cfg := paho.ClientConfig{
		ClientID:                   b.clientID,
		Conn:                       conn,
		Session:                    s.state,
		EnableManualAcknowledgment: true,
		// paho sends acks in receive order on this timer; the bridge's
		// throughput is bounded by window / (receive → ack), so keep it short.
		SendAcksInterval: 2 * time.Millisecond,
		OnPublishReceived: []func(paho.PublishReceived) (bool, error){
			func(pr paho.PublishReceived) (bool, error) {
				b.receive(s, pr.Packet)
				return true, nil
			},
		},
		OnClientError: func(err error) { b.log.Debug("mqtt client error", "error", err) },
		OnServerDisconnect: func(d *paho.Disconnect) {
			if d.ReasonCode == sessionTakenOver {
				b.takenOverAt.Store(time.Now().UnixNano())
				b.log.Warn("MQTT broker closed the connection: another client connected with this client id; give every replica its own --client-id",
					"client_id", b.clientID, "reason_code", d.ReasonCode)
				return
			}
			b.log.Warn("MQTT broker closed the connection", "reason_code", d.ReasonCode)
		},
	}
	client := paho.NewClient(cfg)
	s.client = client
	expiry := uint32(b.sessionExpiry / time.Second)
	cp := &paho.Connect{
		ClientID:   b.clientID,
		KeepAlive:  30,
		CleanStart: false,
		Properties: &paho.ConnectProperties{SessionExpiryInterval: &expiry},
	}
	if b.receiveMaximum > 0 {
		// Sent only when the stage file asks: Mosquitto 2.0 then uses it
		// instead of its max_inflight_messages for this client (measured
		// on 2.0.11), EMQX the smaller of the two. Unset, the broker's
		// own window applies.
		recvMax := b.receiveMaximum
		cp.Properties.ReceiveMaximum = &recvMax
	}
	if b.endpoint.Username != "" {
		cp.UsernameFlag, cp.Username = true, b.endpoint.Username
	}
	if b.endpoint.Password != "" {
		cp.PasswordFlag, cp.Password = true, []byte(b.endpoint.Password)
	}
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	ca, err := client.Connect(cctx, cp)
	if err != nil {
		_ = conn.Close()
		_ = s.state.Close()
		return nil, fmt.Errorf("MQTT CONNECT to %s: %w", b.endpoint.hostPort(), b.endpoint.explain(err))
	}
	if ca.ReasonCode >= 0x80 {
		_ = conn.Close()
		_ = s.state.Close()
		return nil, fmt.Errorf("MQTT broker %s refused the connection: reason %d", b.endpoint.hostPort(), ca.ReasonCode)
	}
	s.present = ca.SessionPresent
	return s, nil
}

// Reconnect pacing: the wait doubles from firstBackoff up to maxBackoff
// after every failed CONNECT and after every connection that dropped within
// stableAfter; only a connection that lasted longer starts it over. A broker
// that accepts the CONNECT and then drops the connection at once — another
// process with this client id taking the session over, over and over —
// would otherwise make a tight reconnect loop.
const (
	firstBackoff = 25 * time.Millisecond
	maxBackoff   = 10 * time.Second
	stableAfter  = 5 * time.Second
)

// backoff is the reconnect wait (connection goroutine only).
type backoff struct{ next time.Duration }

// wait returns how long to wait now, and doubles the next wait.
func (bo *backoff) wait() time.Duration {
	d := max(bo.next, firstBackoff)
	bo.next = min(d*2, maxBackoff)
	return d
}

// lasted records how long a connection lived: a stable one resets the wait.
func (bo *backoff) lasted(d time.Duration) {
	if d >= stableAfter {
		bo.next = 0
	}
}

// sleep waits d, or less if ctx ends first; it reports whether ctx is live.
func sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// maintainConnection keeps the session connected: it reconnects with
// backoff whenever the connection drops, until ctx ends.
func (b *Bridge) maintainConnection(ctx context.Context) {
	var bo backoff
	var gen uint64
	for ctx.Err() == nil {
		b.connBeat.Beat()
		gen++
		s, err := b.connectOnce(ctx, gen)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			wait := bo.wait()
			b.log.Warn("MQTT connect failed; retrying", "error", err, "in", wait)
			b.mu.Lock()
			b.ready.Set(false, fmt.Sprintf("%v; retrying in %s", err, wait))
			b.mu.Unlock()
			if !sleep(ctx, wait) {
				return
			}
			continue
		}
		connectedAt := time.Now()
		b.obs.MQTTConnects.Inc()
		b.log.Info("MQTT connected", "broker", b.endpoint.hostPort(), "tls", b.endpoint.secure(), "client_id", b.clientID, "session_present", s.present)
		early := b.subscribeEarly(ctx, s)
		if b.beforeCurrent != nil {
			b.beforeCurrent()
		}
		b.setSession(s, early)
		switch b.watchConnection(ctx, s) {
		case connStopping:
			b.setSession(nil, nil)
			// The last batch is committed and its messages handed to Ack:
			// let paho's ack timer write them before the connection goes,
			// or the next incarnation would receive them again.
			if !s.flushAcks(2 * time.Second) {
				b.log.Warn("not every ACK was written before disconnecting; the broker will resend those messages")
			}
			// Shutdown never unsubscribes: the session keeps queuing for
			// the next incarnation.
			_ = s.client.Disconnect(&paho.Disconnect{ReasonCode: 0})
			<-s.client.Done()
			_ = s.state.Close()
			return
		case connLost:
			_ = s.state.Close()
			b.setSession(nil, nil)
			b.obs.MQTTDisconnects.Inc()
			if !b.reconnectPause(ctx, &bo, time.Since(connectedAt)) {
				return
			}
		}
	}
}

// How a watched connection ended.
const (
	connStopping = iota // the bridge is stopping
	connLost            // the connection dropped
)

// watchConnection waits until the bridge stops or the connection drops,
// beating the supervisor's heartbeat meanwhile: a connected, idle
// supervisor is alive.
func (b *Bridge) watchConnection(ctx context.Context, s *session) int {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		b.connBeat.Beat()
		select {
		case <-ctx.Done():
			return connStopping
		case <-s.client.Done():
			return connLost
		case <-tick.C:
		}
	}
}

// reconnectPause waits before reconnecting after a lost connection: not at
// all after a stable one, with a growing backoff after a short one. It
// reports whether ctx is still live.
func (b *Bridge) reconnectPause(ctx context.Context, bo *backoff, lived time.Duration) bool {
	bo.lasted(lived)
	if lived >= stableAfter {
		b.log.Warn("MQTT connection lost; reconnecting")
		return true
	}
	wait := bo.wait()
	b.log.Warn("MQTT connection lost soon after connecting; reconnecting after a pause",
		"lasted", lived.Round(time.Millisecond), "in", wait)
	return sleep(ctx, wait)
}

// subscribeEarly subscribes the filters of the last reconciliation right
// after CONNACK, before the bridge loop gets to it: after a broker restart
// that lost the subscriptions (Mosquitto 2.0.11 does not restore $share
// subscriptions from persistence), every message published before the
// SUBSCRIBE has no subscriber and is dropped by the broker. It returns the
// filters subscribed, or nil (then the loop subscribes them all).
func (b *Bridge) subscribeEarly(ctx context.Context, s *session) []string {
	b.mu.Lock()
	subs := slices.Clone(b.lastSubs)
	b.mu.Unlock()
	if len(subs) == 0 {
		return nil
	}
	sctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	ack, err := s.client.Subscribe(sctx, &paho.Subscribe{Subscriptions: subs})
	if err != nil {
		return nil
	}
	filters := make([]string, 0, len(subs))
	for i, so := range subs {
		if i >= len(ack.Reasons) || ack.Reasons[i] >= 0x80 {
			return nil // the loop subscribes again and reports a refusal
		}
		filters = append(filters, so.Topic[len(b.shared("")):])
	}
	return filters
}
