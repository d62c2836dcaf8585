package tlsclient

import (
	"crypto/tls"
	"net"
	"sync/atomic"
	"time"
)

// RefusalAware returns c such that a write that fails before the first
// read reports the server's refusal rather than a broken pipe. Under TLS
// 1.3 a server judges the client's certificate after the client's side of
// the handshake is done: one that refuses it sends an alert and closes, so
// the client's first request (an MQTT CONNECT, a Kafka ApiVersions) may
// meet a reset connection while the alert saying why waits unread. Once
// the protocol reads, the connection is its reader's, and writes are left
// alone.
func RefusalAware(c *tls.Conn) net.Conn { return &refusalConn{Conn: c} }

type refusalConn struct {
	*tls.Conn
	read atomic.Bool
}

// alertWait bounds the read for the alert after a failed write.
const alertWait = time.Second

func (c *refusalConn) Read(b []byte) (int, error) {
	c.read.Store(true)
	return c.Conn.Read(b)
}

func (c *refusalConn) Write(b []byte) (int, error) {
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
