//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/flecht-dev/flecht/internal/budget"
	"github.com/flecht-dev/flecht/internal/tlsclient"
	"github.com/flecht-dev/flecht/internal/tlsclient/tlstest"
)

// The MQTT bridge over TLS against a real Mosquitto (Debian's 2.0.11, a
// TLS listener with certificates the test makes): mqtts:// with a private
// CA relays into Kafka with ACK after commit across a SIGKILL; mutual TLS
// relays; a bridge without its client certificate, one trusting the wrong
// CA and one presenting a certificate of another CA are each refused with
// an error that says what to change, and relay nothing.

// startMosquittoTLS starts Mosquitto whose listener speaks TLS with the
// test PKI's server certificate for 127.0.0.1; mutual demands a client
// certificate signed by the test CA.
func startMosquittoTLS(t *testing.T, pki *tlstest.PKI, mutual bool) *Mosquitto {
	t.Helper()
	extra := []string{"cafile " + pki.CAFile, "certfile " + pki.Server.CertFile, "keyfile " + pki.Server.KeyFile}
	if mutual {
		extra = append(extra, "require_certificate true")
	}
	return startMosquitto(t, extra...)
}

// tlsBridgeStage is an mqtt stage file for an mqtts:// broker; extraMQTT
// adds lines under mqtt:.
func tlsBridgeStage(t *testing.T, app, configTopic, mqttAddr string, extraMQTT ...string) string {
	t.Helper()
	return mqttStage(t, app, configTopic, "mqtts://"+mqttAddr, extraMQTT...)
}

// tlsPublisher is a numbered QoS 1 publisher with the test CA and client
// certificate.
func tlsPublisher(t *testing.T, pki *tlstest.PKI, addr, id string) *mqttPub {
	t.Helper()
	cfg, err := tlsclient.Config(tlsclient.Files{CAFile: pki.CAFile, CertFile: pki.Client.CertFile, KeyFile: pki.Client.KeyFile}, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	p := newMQTTPub(t, addr, id)
	p.tls = cfg
	return p
}

// logLine is the first log line with msg=<msg>, "" when there is none.
func logLine(logs, msg string) string {
	for line := range strings.SplitSeq(logs, "\n") {
		if hasMsg(line, msg) {
			return line
		}
	}
	return ""
}

// A short TestMQTTBridgeSIGKILL over mqtts:// with a private CA: 5,000
// numbered messages published over 5 s, the bridge SIGKILLed once while
// relaying; every message reaches the raw topic, and every extra copy is
// one received before the kill and again after the restart.
func TestMQTTBridgeTLSPrivateCA(t *testing.T) {
	const (
		total      = 5000
		maxBatch   = 1000
		publishFor = 5 * time.Second
	)
	ctx := testCtx(t, 10*time.Minute)
	pki := tlstest.New(t)
	m := startMosquittoTLS(t, pki, false)
	app, cfg, raw := bridgeTopics(t, 3)
	putConfig(t, cfg, "sensors", relayConfig("sensors/+/events", raw, "{payload.id}"))
	stage := tlsBridgeStage(t, app, cfg, m.Addr, "ca_file: "+pki.CAFile)

	p := startSource(t, stage, "bridge-0")
	waitSubscribedLog(t, p, app, "sensors/+/events")
	if !logged(p.logs(), "MQTT connected", "tls=true") {
		t.Errorf("no TLS connection logged:\n%s", tail(p.logs(), 20))
	}

	published, pubErr := publishPaced(ctx, tlsPublisher(t, pki, m.Addr, "e2e-tls-pub"), total, publishFor)

	waitUntil(t, 2*time.Minute, "40% published", func() bool { return published.Load() >= total*40/100 })
	waitUntil(t, 2*time.Minute, p.name+" relaying", func() bool {
		p.alive()
		return p.metric("flechtwerk_messages_out_total") >= 500
	})
	p.kill()
	killedAt, publishedAtKill := p.killed, published.Load()
	if publishedAtKill >= total {
		t.Errorf("the kill came after the last message was published")
	}
	p = startSource(t, stage, "bridge-0")
	if err := <-pubErr; err != nil {
		t.Fatal(err)
	}
	recs, rep := waitAllRelayed(t, p, raw, total, 3*time.Minute)
	p.stop()
	perKill := duplicatesPerEvent(t, recs, rep.Duplicated, []time.Time{killedAt}, "kills")
	t.Logf("over TLS, SIGKILL at %d published: %s; %d duplicates from the kill", publishedAtKill, rep, perKill[0])
	if perKill[0] > 2*maxBatch {
		t.Errorf("the kill left %d committed-but-unacked messages, more than two transactions of %d", perKill[0], maxBatch)
	}
	if rep.Missing != 0 {
		t.Errorf("lost %d messages, e.g. %v", rep.Missing, rep.MissingSample)
	}
}

// Mutual TLS: with its client certificate (from the flags) the bridge
// relays and `budget probe` measures; without it, or trusting the wrong
// CA, or presenting a certificate the broker's CA did not sign, the
// bridge is refused, says what to change, keeps retrying and stops
// cleanly on SIGTERM.
func TestMQTTBridgeMutualTLS(t *testing.T) {
	const total = 1000
	ctx := testCtx(t, 10*time.Minute)
	pki := tlstest.New(t)
	m := startMosquittoTLS(t, pki, true)
	app, cfg, raw := bridgeTopics(t, 1)
	putConfig(t, cfg, "sensors", relayConfig("sensors/+/events", raw, "{payload.id}"))
	stage := tlsBridgeStage(t, app, cfg, m.Addr, "ca_file: "+pki.CAFile)

	p := startSource(t, stage, "bridge-0", "--mqtt-cert-file", pki.Client.CertFile, "--mqtt-key-file", pki.Client.KeyFile)
	waitSubscribedLog(t, p, app, "sensors/+/events")
	pub := tlsPublisher(t, pki, m.Addr, "e2e-mtls-pub")
	for n := range total {
		if err := pub.publish(ctx, fmt.Sprintf("sensors/dev-%d/events", n%10), n, numbered(n)); err != nil {
			t.Fatal(err)
		}
	}
	_, rep := waitAllRelayed(t, p, raw, total, 2*time.Minute)
	p.stop()
	t.Logf("mutual TLS: %s", rep)
	if rep.Missing != 0 || rep.Duplicates != 0 {
		t.Errorf("mutual TLS without a crash: %s", rep)
	}

	for _, c := range []struct {
		name  string
		stage string
		args  []string
		want  []string // any one of them
	}{
		{"no client certificate", stage, nil,
			[]string{"requires a client certificate (mutual TLS) and none was given"}},
		{"wrong CA", tlsBridgeStage(t, app, cfg, m.Addr, "ca_file: "+pki.OtherCAFile), []string{"--mqtt-cert-file", pki.Client.CertFile, "--mqtt-key-file", pki.Client.KeyFile},
			[]string{"not signed by the CA in " + pki.OtherCAFile}},
		{"client certificate of another CA", stage, []string{"--mqtt-cert-file", pki.OtherClient.CertFile, "--mqtt-key-file", pki.OtherClient.KeyFile},
			[]string{"refused the client certificate " + pki.OtherClient.CertFile, "did not take " + pki.OtherClient.CertFile}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := startSource(t, c.stage, "refused-"+strings.ReplaceAll(c.name, " ", "-"), c.args...)
			var line string
			waitUntil(t, time.Minute, "a refused connect logged", func() bool {
				p.alive()
				line = logLine(p.logs(), "MQTT connect failed; retrying")
				return line != ""
			})
			t.Log(line)
			found := false
			for _, w := range c.want {
				found = found || strings.Contains(line, w)
			}
			if !found {
				t.Errorf("the refusal does not say %q:\n%s", c.want, line)
			}
			if strings.Contains(line, "BEGIN") || logged(p.logs(), "MQTT connected") {
				t.Errorf("connected, or a file's contents logged:\n%s", tail(p.logs(), 20))
			}
			p.stop()
		})
	}

	// budget probe over the same mutual TLS.
	out, errOut, code := runFlecht(t, "", "budget", "probe", "--mqtt", "mqtts://"+m.Addr, "--mqtt-ca-file", pki.CAFile,
		"--mqtt-cert-file", pki.Client.CertFile, "--mqtt-key-file", pki.Client.KeyFile, "--count", "50", "--quiet", "1s", "-o", "json")
	if code != 0 {
		t.Fatalf("budget probe over mutual TLS: exit %d\n%s", code, errOut)
	}
	res := decodeJSON[budget.ProbeResult](t, out)
	if res.Received != 50 || !res.SessionRemoved {
		t.Errorf("budget probe over mutual TLS: %s", out)
	}
	_, errOut, code = runFlecht(t, "", "budget", "probe", "--mqtt", "mqtts://"+m.Addr, "--mqtt-ca-file", pki.CAFile, "--count", "5")
	if code != 1 || !strings.Contains(errOut, "requires a client certificate") || !strings.Contains(errOut, "--mqtt-cert-file") {
		t.Errorf("budget probe without a client certificate: exit %d %q", code, errOut)
	}
	// Plain MQTT to Mosquitto's TLS listener: it resets the connection.
	_, errOut, code = runFlecht(t, "", "budget", "probe", "--mqtt", "mqtt://"+m.Addr, "--count", "5")
	if code != 1 || !strings.Contains(errOut, "if this port is a TLS listener, write mqtts://") {
		t.Errorf("budget probe with mqtt:// to a TLS listener: exit %d %q", code, errOut)
	}
}
