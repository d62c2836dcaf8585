package mqtt_test

import (
	"context"
	"crypto/tls"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/eclipse/paho.golang/paho"

	"github.com/flecht-dev/flecht/internal/devenv"
	"github.com/flecht-dev/flecht/internal/metrics"
	"github.com/flecht-dev/flecht/internal/mqtt"
	"github.com/flecht-dev/flecht/internal/profile"
	"github.com/flecht-dev/flecht/internal/tlsclient"
	"github.com/flecht-dev/flecht/internal/tlsclient/tlstest"
)

// tlsEndpoint resolves an endpoint the way `flecht run` does, here from
// the flags alone.
func tlsEndpoint(t *testing.T, rawURL string, files tlsclient.Files) mqtt.Endpoint {
	t.Helper()
	c := profile.ResolveMQTT("", profile.MQTTFlags("--mqtt-url", rawURL, files.CAFile, files.CertFile, files.KeyFile))
	e, err := mqtt.NewEndpoint(c, "", "")
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// tlsPublisher connects a publisher to a TLS listener with the test CA
// and, for a broker that asks, the client certificate.
func tlsPublisher(t *testing.T, addr string, pki *tlstest.PKI) *paho.Client {
	t.Helper()
	cfg, err := tlsclient.Config(tlsclient.Files{CAFile: pki.CAFile, CertFile: pki.Client.CertFile, KeyFile: pki.Client.KeyFile}, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := paho.NewClient(paho.ClientConfig{ClientID: "tls-pub", Conn: tlsclient.NewConn(conn)})
	if _, err := c.Connect(context.Background(), &paho.Connect{ClientID: "tls-pub", KeepAlive: 30, CleanStart: true}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Disconnect(&paho.Disconnect{}) })
	return c
}

// Over mqtts:// with a private CA, and with mutual TLS, the bridge relays
// into Kafka and ACKs after the commit as it does in plain MQTT.
func TestBridgeOverTLS(t *testing.T) {
	pki := tlstest.New(t)
	for _, c := range []struct {
		name          string
		requireClient bool
		files         tlsclient.Files
	}{
		{"private CA", false, tlsclient.Files{CAFile: pki.CAFile}},
		{"mutual TLS", true, tlsclient.Files{CAFile: pki.CAFile, CertFile: pki.Client.CertFile, KeyFile: pki.Client.KeyFile}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newBridgeFixture(t)
			menv := startMQTTBroker(t, devenv.Options{MQTTTLS: pki.ServerConfig(pki.Server, c.requireClient)})
			if !strings.HasPrefix(menv.MQTTURL(), "mqtts://127.0.0.1:") {
				t.Fatalf("TLS broker URL %s", menv.MQTTURL())
			}
			f.config("sensors", map[string]any{"topic": "sensors/+/events", "output_topic": "sensors.raw", "key": "{topic.1}"})
			rb := f.startBridgeAt("bridge-tls", tlsEndpoint(t, menv.MQTTURL(), c.files), "", nil)
			pub := tlsPublisher(t, menv.MQTTAddr(), pki)
			f.waitSubscribed(pub, "sensors/probe/events", "sensors.raw")
			for i := range 50 {
				publish(t, pub, "sensors/dev-1/events", `{"n":`+strconv.Itoa(i)+`}`)
			}
			eventually(t, "50 relayed over TLS", func() bool {
				seen, _ := f.relayedNumbers("sensors.raw")
				for i := range 50 {
					if seen[i] == 0 {
						return false
					}
				}
				return true
			})
			if l := rb.logs.lines("MQTT connected", "tls=true"); len(l) == 0 {
				t.Errorf("no TLS connection logged: %s", rb.logs.String())
			}
			if n := metrics.Value(rb.obs.MQTTConnects); n != 1 {
				t.Errorf("%v connects, want 1", n)
			}
		})
	}
}

// Every way a TLS connection to the broker fails leaves the bridge
// retrying with an error that says what to change, and relaying nothing.
func TestBridgeTLSRefusalsExplained(t *testing.T) {
	pki := tlstest.New(t)
	f := newBridgeFixture(t)
	f.config("sensors", map[string]any{"topic": "sensors/+/events", "output_topic": "sensors.raw", "key": "{topic.1}"})
	caOnly := tlsclient.Files{CAFile: pki.CAFile}
	for _, c := range []struct {
		name   string
		server *tls.Config // nil: a plain listener
		url    func(env *devenv.Env) string
		files  tlsclient.Files
		want   []string
	}{
		{"unknown authority", pki.ServerConfig(pki.Server, false), tlsURL, tlsclient.Files{},
			[]string{"certificate signed by unknown authority", "for a private CA, set the CA file (--mqtt-ca-file"}},
		{"another CA", pki.ServerConfig(pki.Server, false), tlsURL, tlsclient.Files{CAFile: pki.OtherCAFile},
			[]string{"not signed by the CA in " + pki.OtherCAFile}},
		{"host name mismatch", pki.ServerConfig(pki.WrongHost, false), tlsURL, caOnly,
			[]string{"does not name 127.0.0.1", "an IP SAN for 127.0.0.1", "cannot be turned off"}},
		{"expired broker certificate", pki.ServerConfig(pki.ExpiredServer, false), tlsURL, caOnly,
			[]string{"certificate has expired or is not yet valid", "renew it"}},
		{"client certificate required", pki.ServerConfig(pki.Server, true), tlsURL, caOnly,
			[]string{"requires a client certificate (mutual TLS) and none was given", "set a client certificate and key (--mqtt-cert-file/--mqtt-key-file)"}},
		{"client certificate of another CA", pki.ServerConfig(pki.Server, true), tlsURL, tlsclient.Files{CAFile: pki.CAFile, CertFile: pki.OtherClient.CertFile, KeyFile: pki.OtherClient.KeyFile},
			[]string{"did not take " + pki.OtherClient.CertFile}},
		{"client certificate refused", pki.ServerConfigUnlisted(pki.Server), tlsURL, tlsclient.Files{CAFile: pki.CAFile, CertFile: pki.OtherClient.CertFile, KeyFile: pki.OtherClient.KeyFile},
			[]string{"refused the client certificate " + pki.OtherClient.CertFile, "bad certificate"}},
		{"expired client certificate", pki.ServerConfig(pki.Server, true), tlsURL, tlsclient.Files{CAFile: pki.CAFile, CertFile: pki.ExpiredClient.CertFile, KeyFile: pki.ExpiredClient.KeyFile},
			[]string{"refused the client certificate " + pki.ExpiredClient.CertFile + " as expired"}},
		{"mqtts to a plain listener", nil, tlsURL, caOnly,
			[]string{"did not complete a TLS handshake", "For a plain listener write mqtt:// instead of mqtts://"}},
		{"mqtt to a TLS listener", pki.ServerConfig(pki.Server, false), func(env *devenv.Env) string { return "mqtt://" + env.MQTTAddr() }, tlsclient.Files{},
			[]string{"if this port is a TLS listener, write mqtts:// instead of mqtt://"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			menv := startMQTTBroker(t, devenv.Options{MQTTTLS: c.server})
			rb := f.startBridgeAt("bridge-"+strings.ReplaceAll(c.name, " ", "-"), tlsEndpoint(t, c.url(menv), c.files), "", nil)
			var line string
			eventually(t, "a failed connect logged", func() bool {
				l := rb.logs.lines("MQTT connect failed; retrying")
				if len(l) > 0 {
					line = l[0]
				}
				return line != ""
			})
			for _, w := range c.want {
				if !strings.Contains(line, w) {
					t.Errorf("log lacks %q:\n%s", w, line)
				}
			}
			t.Log(line)
			if err := rb.stop(); err != nil {
				t.Errorf("bridge: %v", err)
			}
			if n := metrics.Value(rb.obs.MQTTConnects); n != 0 {
				t.Errorf("%v connects", n)
			}
		})
	}
}

func tlsURL(env *devenv.Env) string { return "mqtts://" + env.MQTTAddr() }

// paho writes each packet in several Writes and from several goroutines
// (callers, its pinger, its ack timer): over TLS the connection must keep
// a packet's writes together, or the broker reads a malformed packet and
// drops the client. Eight goroutines publish at once on one connection;
// every message must arrive and the connection stay up.
func TestConcurrentPacketsStayWholeOverTLS(t *testing.T) {
	const writers, each = 8, 250
	pki := tlstest.New(t)
	menv := startMQTTBroker(t, devenv.Options{MQTTTLS: pki.ServerConfig(pki.Server, false)})
	var got atomic.Int64
	sub := tlsClient(t, menv.MQTTAddr(), pki, "sub", func(*paho.Publish) { got.Add(1) })
	if _, err := sub.Subscribe(context.Background(), &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: "load/#", QoS: 0}}}); err != nil {
		t.Fatal(err)
	}
	pub := tlsClient(t, menv.MQTTAddr(), pki, "pub", nil)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				payload := strings.Repeat("x", 1+(w*each+i)%700)
				if _, err := pub.Publish(context.Background(), &paho.Publish{Topic: "load/" + strconv.Itoa(w), QoS: 0, Payload: []byte(payload)}); err != nil {
					t.Errorf("writer %d, message %d: %v", w, i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	eventually(t, "every message", func() bool { return got.Load() == writers*each }, func() string { return strconv.FormatInt(got.Load(), 10) + " arrived" })
	select {
	case <-pub.Done():
		t.Fatal("the broker dropped the publisher")
	default:
	}
}

// tlsClient connects a paho client over tlsclient.Conn, as the bridge and
// the probe do.
func tlsClient(t *testing.T, addr string, pki *tlstest.PKI, id string, onMsg func(*paho.Publish)) *paho.Client {
	t.Helper()
	cfg, err := tlsclient.Config(tlsclient.Files{CAFile: pki.CAFile}, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	cc := paho.ClientConfig{ClientID: id, Conn: tlsclient.NewConn(conn)}
	if onMsg != nil {
		cc.OnPublishReceived = []func(paho.PublishReceived) (bool, error){
			func(pr paho.PublishReceived) (bool, error) { onMsg(pr.Packet); return true, nil },
		}
	}
	c := paho.NewClient(cc)
	if _, err := c.Connect(context.Background(), &paho.Connect{ClientID: id, KeepAlive: 30, CleanStart: true}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Disconnect(&paho.Disconnect{}) })
	return c
}

// The TLS files are read before anything connects, and a broken one is
// named.
func TestNewEndpointReadsTheFilesFirst(t *testing.T) {
	pki := tlstest.New(t)
	c := profile.ResolveMQTT("", profile.MQTTFlags("--mqtt-url", "mqtts://127.0.0.1:8883", pki.Client.KeyFile, "", ""))
	if _, err := mqtt.NewEndpoint(c, "", ""); err == nil || !strings.Contains(err.Error(), "CA file "+pki.Client.KeyFile+": PEM block 1 is a PRIVATE KEY") {
		t.Errorf("a bad CA file: %v", err)
	}
	c = profile.ResolveMQTT("", profile.MQTTFlags("--mqtt-url", "mqtt://127.0.0.1:1883", pki.CAFile, "", ""))
	if _, err := mqtt.NewEndpoint(c, "", ""); err == nil || !strings.Contains(err.Error(), "plain MQTT") {
		t.Errorf("a CA with a plain URL: %v", err)
	}
	e, err := mqtt.NewEndpoint(profile.ResolveMQTT("", profile.MQTTFlags("--mqtt-url", "mqtts://127.0.0.1", "", "", "")), "u", "p")
	if err != nil || e.TLS == nil || e.TLS.RootCAs != nil || e.Username != "u" || e.URL.Port() != "" {
		t.Errorf("system roots: %+v %v", e, err)
	}
}
