package devenv

import (
	"errors"
	"log/slog"
	"math"
	"net"
	"sync"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/listeners"
	"github.com/mochi-mqtt/server/v2/packets"
)

// startMQTT runs a mochi-mqtt server on the already bound ln.
// logger is already gated (log.go): mochi's Info chatter arrives as Debug.
func startMQTT(ln net.Listener, logger *slog.Logger, acl func(clientID, topic string, write bool) bool) (*mqtt.Server, error) {
	caps := mqtt.NewDefaultServerCapabilities()
	// mochi drops a QoS > 0 message, silently but for a Warn log and its
	// InflightDropped counter, once a client holds MaximumInflight
	// unacknowledged messages, even while that client is connected. A
	// bridge that ACKs after commit holds many, so raise it to the
	// protocol's packet-id limit.
	caps.MaximumInflight = math.MaxUint16

	srv := mqtt.New(&mqtt.Options{
		Capabilities: caps,
		Logger:       logger,
	})
	// Without an auth hook mochi refuses every CONNECT. A dev broker on
	// loopback lets everyone in.
	if err := srv.AddHook(&allowAll{acl: acl}, nil); err != nil {
		return nil, err
	}
	if err := srv.AddListener(newMQTTListener("dev", ln, logger)); err != nil {
		return nil, err
	}
	if err := srv.Serve(); err != nil {
		srv.Close()
		return nil, err
	}
	return srv, nil
}

// allowAll is mochi's auth.AllowHook, restated: importing hooks/auth pulls
// in gopkg.in/yaml.v3 (for its ledger files), a module flecht does not
// otherwise need. acl, when set, decides publishes and subscribes.
type allowAll struct {
	mqtt.HookBase
	acl func(clientID, topic string, write bool) bool
}

func (*allowAll) ID() string { return "allow-all-auth" }

func (*allowAll) Provides(b byte) bool {
	return b == mqtt.OnConnectAuthenticate || b == mqtt.OnACLCheck
}

func (*allowAll) OnConnectAuthenticate(*mqtt.Client, packets.Packet) bool { return true }

func (a *allowAll) OnACLCheck(cl *mqtt.Client, topic string, write bool) bool {
	return a.acl == nil || a.acl(cl.ID, topic, write)
}

// mqttListener is a mochi listener over a net.Listener we bound ourselves
// (mochi's own TCP listener only binds by address). Unlike mochi's, its
// Close also closes connections that have not finished CONNECT yet and
// waits for every connection goroutine, so nothing outlives Env.Close.
type mqttListener struct {
	id  string
	ln  net.Listener
	log *slog.Logger

	mu     sync.Mutex
	closed bool
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

var _ listeners.Listener = (*mqttListener)(nil)

func newMQTTListener(id string, ln net.Listener, logger *slog.Logger) *mqttListener {
	return &mqttListener{id: id, ln: ln, log: logger, conns: make(map[net.Conn]struct{})}
}

func (l *mqttListener) ID() string              { return l.id }
func (l *mqttListener) Address() string         { return l.ln.Addr().String() }
func (l *mqttListener) Protocol() string        { return "tcp" }
func (l *mqttListener) Init(*slog.Logger) error { return nil } // bound already

func (l *mqttListener) Serve(establish listeners.EstablishFn) {
	for {
		conn, err := l.ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			// Out of file descriptors, say: keep the broker up, as
			// net/http does, rather than stop accepting for good.
			l.log.Warn("mqtt accept failed", "error", err)
			time.Sleep(50 * time.Millisecond)
			continue
		}
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			conn.Close()
			return
		}
		l.conns[conn] = struct{}{}
		l.wg.Add(1)
		l.mu.Unlock()

		go func() {
			defer l.wg.Done()
			// Errors here are the client's doing (a bad CONNECT, a
			// dropped connection), not the broker's.
			if err := establish(l.id, conn); err != nil {
				l.log.Debug("mqtt connection ended", "remote", conn.RemoteAddr().String(), "error", err)
			}
			l.mu.Lock()
			delete(l.conns, conn)
			l.mu.Unlock()
		}()
	}
}

func (l *mqttListener) Close(closeClients listeners.CloseFn) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	l.closed = true
	l.mu.Unlock()

	l.ln.Close()
	closeClients(l.id) // DISCONNECT with "server shutting down"
	l.mu.Lock()
	for c := range l.conns {
		c.Close() // those still before or in CONNECT
	}
	l.mu.Unlock()
	l.wg.Wait()
}
