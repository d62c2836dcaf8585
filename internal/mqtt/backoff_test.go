package mqtt_test

import (
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/packets"
)

// kickingBroker accepts every CONNECT and closes the connection right
// after its CONNACK, as a broker does when another client takes the
// session over with the same client id. It counts the connections.
func kickingBroker(t *testing.T) (addr string, connects *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	connects = &atomic.Int64{}
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				if p, err := packets.ReadPacket(conn); err != nil || p.Type != packets.CONNECT {
					return
				}
				connects.Add(1)
				_, _ = (&packets.Connack{}).WriteTo(conn)
				time.Sleep(5 * time.Millisecond)
			}()
		}
	}()
	return ln.Addr().String(), connects
}

// A connection that drops right after CONNACK (a client-id clash) does
// not reset the reconnect backoff: it keeps growing, so two processes
// with one client id do not kick each other off in a tight loop.
func TestBridgeBacksOffWhenKickedRightAfterConnecting(t *testing.T) {
	f := newBridgeFixture(t)
	addr, connects := kickingBroker(t)
	f.startBridgeWith("bridge-0", "mqtt://"+addr, "", nil)
	eventually(t, "the first connect", func() bool { return connects.Load() > 0 })
	time.Sleep(3 * time.Second)
	// Backoff 25 ms, doubling: about 8 connects in 3 s; without it, hundreds.
	if n := connects.Load(); n > 12 {
		t.Errorf("%d connects in 3 s to a broker that drops each one at once: the backoff was reset", n)
	}
}
