package mqtt

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"time"

	"github.com/eclipse/paho.golang/paho"
)

// Endpoint is where the MQTT broker is and how to log in.
type Endpoint struct {
	URL      *url.URL
	Username string
	Password string
}

// ParseURL accepts mqtt://, tcp:// (plain) and mqtts://, ssl://, tls://
// (TLS with the system roots); the port defaults to 1883 or 8883.
func ParseURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("mqtt url %q: %w", s, err)
	}
	switch u.Scheme {
	case "mqtt", "tcp", "mqtts", "ssl", "tls":
	default:
		return nil, fmt.Errorf("mqtt url %q: scheme must be mqtt, tcp, mqtts, ssl or tls", s)
	}
	if u.Hostname() == "" {
		return nil, fmt.Errorf("mqtt url %q: no host", s)
	}
	return u, nil
}

func (e Endpoint) secure() bool {
	switch e.URL.Scheme {
	case "mqtts", "ssl", "tls":
		return true
	}
	return false
}

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

// dial opens the network connection.
func (e Endpoint) dial(ctx context.Context) (net.Conn, error) {
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	if e.secure() {
		td := &tls.Dialer{NetDialer: d, Config: &tls.Config{MinVersion: tls.VersionTLS12, ServerName: e.URL.Hostname()}}
		return td.DialContext(ctx, "tcp", e.hostPort())
	}
	return d.DialContext(ctx, "tcp", e.hostPort())
}

// session is one live MQTT connection of the persistent session.
type session struct {
	client  *paho.Client
	gen     uint64 // which connection this is; acks only work on their own
	present bool   // the broker resumed an existing session
}

// connectOnce dials and sends CONNECT with clean start off and the session
// expiry, so the broker keeps queuing for this client id while it is away.
func (b *Bridge) connectOnce(ctx context.Context, gen uint64) (*session, error) {
	conn, err := b.endpoint.dial(ctx)
	if err != nil {
		return nil, fmt.Errorf("connecting to MQTT broker %s: %w", b.endpoint.hostPort(), err)
	}
	s := &session{gen: gen}
	cfg := paho.ClientConfig{
		ClientID:                   b.clientID,
		Conn:                       conn,
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
			b.log.Warn("MQTT broker closed the connection", "reason_code", d.ReasonCode)
		},
	}
	client := paho.NewClient(cfg)
	s.client = client
	expiry := uint32(b.sessionExpiry / time.Second)
	recvMax := b.receiveMaximum
	cp := &paho.Connect{
		ClientID:   b.clientID,
		KeepAlive:  30,
		CleanStart: false,
		Properties: &paho.ConnectProperties{SessionExpiryInterval: &expiry, ReceiveMaximum: &recvMax},
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
		return nil, fmt.Errorf("MQTT CONNECT to %s: %w", b.endpoint.hostPort(), err)
	}
	if ca.ReasonCode >= 0x80 {
		_ = conn.Close()
		return nil, fmt.Errorf("MQTT broker %s refused the connection: reason %d", b.endpoint.hostPort(), ca.ReasonCode)
	}
	s.present = ca.SessionPresent
	return s, nil
}

// maintainConnection keeps the session connected: it reconnects with
// backoff whenever the connection drops, until ctx ends.
func (b *Bridge) maintainConnection(ctx context.Context) {
	backoff := 100 * time.Millisecond
	var gen uint64
	for ctx.Err() == nil {
		gen++
		s, err := b.connectOnce(ctx, gen)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			b.log.Warn("MQTT connect failed; retrying", "error", err, "in", backoff)
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(backoff*2, 10*time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
		b.obs.MQTTConnects.Inc()
		b.log.Info("MQTT connected", "broker", b.endpoint.hostPort(), "client_id", b.clientID, "session_present", s.present)
		b.setSession(s)
		select {
		case <-ctx.Done():
			b.setSession(nil)
			// Shutdown never unsubscribes: the session keeps queuing for
			// the next incarnation.
			_ = s.client.Disconnect(&paho.Disconnect{ReasonCode: 0})
			return
		case <-s.client.Done():
			b.setSession(nil)
			b.obs.MQTTDisconnects.Inc()
			b.log.Warn("MQTT connection lost; reconnecting")
		}
	}
}
