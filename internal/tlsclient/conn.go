package tlsclient

import (
	"context"
	"crypto/tls"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Conn is a client TLS connection fit for protocol clients, in two ways a
// bare *tls.Conn is not:
//
//   - It is a sync.Locker. A *tls.Conn keeps each Write whole, but a
//     client that writes one packet in several Writes (paho writes the
//     header and the parts of every MQTT packet so, and its pinger writes
//     a PINGREQ from its own goroutine) interleaves them with another
//     goroutine's, and the broker sees a malformed packet. paho locks a
//     connection that offers it around each packet; over plain TCP the
//     parts go out in one writev, whole.
//   - A write that fails before the first read reports the server's
//     refusal rather than a broken pipe. Under TLS 1.3 a server judges the
//     client's certificate after the client's side of the handshake is
//     done: one that refuses it sends an alert and closes, so the client's
//     first request (an MQTT CONNECT, a Kafka ApiVersions) may meet a reset
//     connection while the alert saying why waits unread. Once the
//     protocol reads, the connection is its reader's, and failed writes are
//     left as they are.
type Conn struct {
	*tls.Conn
	mu   sync.Mutex
	read atomic.Bool
}

// Dial connects d to addr over TLS and returns the connection as a *Conn.
// A nil cfg verifies the server against the system roots with TLS 1.2 at
// least; a cfg without a ServerName has the server's certificate name host.
// A failed handshake comes back explained for p (ExplainHandshake).
func Dial(ctx context.Context, d *net.Dialer, addr, host string, cfg *tls.Config, p Peer) (net.Conn, error) {
	if cfg == nil {
		cfg = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	if cfg.ServerName == "" {
		cfg = cfg.Clone()
		cfg.ServerName = host
	}
	conn, err := (&tls.Dialer{NetDialer: d, Config: cfg}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, ExplainHandshake(err, p)
	}
	return NewConn(conn.(*tls.Conn)), nil
}

// NewConn wraps a client connection whose handshake is done.
func NewConn(c *tls.Conn) *Conn { return &Conn{Conn: c} }

// Lock and Unlock keep one packet's writes together.
func (c *Conn) Lock()   { c.mu.Lock() }
func (c *Conn) Unlock() { c.mu.Unlock() }

// alertWait bounds the read for the alert after a failed write.
const alertWait = time.Second

func (c *Conn) Read(b []byte) (int, error) {
	c.read.Store(true)
	return c.Conn.Read(b)
}

func (c *Conn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if err == nil || !c.read.CompareAndSwap(false, true) {
		return n, err
	}
	_ = c.Conn.SetReadDeadline(time.Now().Add(alertWait))
	if _, rerr := c.Conn.Read(make([]byte, 1)); rerr != nil {
		if _, ok := remoteAlert(rerr); ok {
			return n, rerr
		}
	}
	return n, err
}
