package cli

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/devenv"
	"github.com/flecht-dev/flecht/internal/devenv/devenvtest"
	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/profile"
	"github.com/flecht-dev/flecht/internal/tlsclient"
	"github.com/flecht-dev/flecht/internal/tlsclient/tlstest"
)

// startTLSBroker starts an MQTT broker speaking TLS with the test PKI's
// server certificate (mutual: demanding a client certificate).
func startTLSBroker(t *testing.T, pki *tlstest.PKI, mutual bool) *devenv.Env {
	t.Helper()
	env, err := devenv.Start(t.Context(), devenv.Options{MQTTTLS: pki.ServerConfig(pki.Server, mutual)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Close() })
	return env
}

// MQTT TLS settings that cannot work are usage errors, found before
// anything connects (the Kafka address is a dead port), naming the
// setting and where it came from.
func TestRunMQTTTLSSettingsRefusedBeforeConnecting(t *testing.T) {
	pki := tlstest.New(t)
	dir := t.TempDir()
	stage := func(name, mqtt string) string {
		return writeAt(t, dir, name, fmt.Sprintf(mqttStageFmt, "bridge")+"mqtt:\n"+mqtt)
	}
	tlsStage := stage("tls.yaml", "  url: mqtts://127.0.0.1:8883\n")
	plainStage := stage("plain.yaml", "  url: mqtt://127.0.0.1:1883\n")
	missing := filepath.Join(dir, "missing.pem")
	profiles := writeProfiles(t, `current_profile: prod
profiles:
  prod:
    mqtt:
      url: mqtts://mqtt.prod:8883
      tls: {ca_file: `+pki.CAFile+`, cert_file: `+pki.Client.CertFile+`, key_file: `+pki.Client.KeyFile+`}
`)
	for _, c := range []struct {
		name string
		env  map[string]string
		args []string
		want []string
	}{
		{"unreadable CA file", nil, []string{"-f", tlsStage, "--mqtt-ca-file", missing},
			[]string{"CA file " + missing + ": no such file or directory"}},
		{"a key as CA file", map[string]string{profile.EnvMQTTCAFile: pki.Client.KeyFile}, []string{"-f", tlsStage},
			[]string{"CA file " + pki.Client.KeyFile + ": PEM block 1 is a PRIVATE KEY, not a CERTIFICATE"}},
		{"certificate without key", nil, []string{"-f", tlsStage, "--mqtt-cert-file", pki.Client.CertFile},
			[]string{"--mqtt-cert-file is set but --mqtt-key-file is not"}},
		{"key of another certificate", nil, []string{"-f", tlsStage, "--mqtt-cert-file", pki.Client.CertFile, "--mqtt-key-file", pki.OtherClient.KeyFile},
			[]string{"client certificate " + pki.Client.CertFile + " with key " + pki.OtherClient.KeyFile}},
		{"CA with a plain stage file URL", map[string]string{profile.EnvMQTTCAFile: pki.CAFile}, []string{"-f", plainStage},
			[]string{"FLECHT_MQTT_CA_FILE set, but the MQTT URL (mqtt.url in the stage file) is plain MQTT"}},
		{"TLS in the stage file with a plain URL", nil, []string{"-f", stage("bad.yaml", "  url: mqtt://127.0.0.1:1883\n  ca_file: /ca.pem\n")},
			[]string{"need a TLS URL"}},
		{"insecure_skip_verify", nil, []string{"-f", stage("insecure.yaml", "  url: mqtts://127.0.0.1\n  insecure_skip_verify: true\n")},
			[]string{"not verifying the MQTT broker is not offered", "trust a private CA with ca_file"}},
		{"the profile's TLS under a plain --mqtt-url", profiles, []string{"-f", stage("bare.yaml", "  session_expiry: 1h\n"), "--mqtt-url", "mqtt://127.0.0.1:1883"},
			[]string{`mqtt.tls.ca_file of profile "prod"`, "the MQTT URL (--mqtt-url) is plain MQTT"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			env := map[string]string{}
			for k, v := range c.env {
				env[k] = v
			}
			r := runCtx(ctx, t, env, "", append([]string{"run", "-b", "127.0.0.1:1", "--client-id", "c0"}, c.args...)...)
			if r.code != exitcode.Usage {
				t.Errorf("exit %d, want 2 (stderr %q)", r.code, r.err)
			}
			for _, w := range c.want {
				if !strings.Contains(r.err, w) {
					t.Errorf("stderr lacks %q:\n%s", w, r.err)
				}
			}
			if strings.Contains(r.err, "BEGIN") {
				t.Errorf("a file's contents in the error:\n%s", r.err)
			}
		})
	}
}

// `flecht run` bridges over mutual TLS with its settings from three
// places: the URL and CA from the stage file, the client certificate from
// the environment.
func TestRunBridgeOverMutualTLS(t *testing.T) {
	pki := tlstest.New(t)
	kafka := devenvtest.Start(t)
	cl := devenvtest.KafkaClient(t, kafka)
	adm := kadm.NewClient(cl)
	for _, topic := range []string{"mqtt.config", "sensors.raw"} {
		if err := kafkax.CreateTopic(context.Background(), adm, topic, 1, nil); err != nil {
			t.Fatal(err)
		}
	}
	cfg, _ := json.Marshal(map[string]any{"topic": "sensors/+", "output_topic": "sensors.raw", "key": "{topic.1}"})
	if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: "mqtt.config", Key: []byte("s"), Value: cfg}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	broker := startTLSBroker(t, pki, true)
	stage := writeAt(t, t.TempDir(), "bridge.yaml", fmt.Sprintf(mqttStageFmt, "bridge")+
		fmt.Sprintf("poll_interval: 200ms\nmqtt:\n  url: %s\n  ca_file: %s\n", broker.MQTTURL(), pki.CAFile))
	env := map[string]string{profile.EnvMQTTCertFile: pki.Client.CertFile, profile.EnvMQTTKeyFile: pki.Client.KeyFile}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan result, 1)
	go func() {
		done <- runCtx(ctx, t, env, "", "run", "-f", stage, "-b", kafka.KafkaAddr(), "--client-id", "tls-0", "-v")
	}()

	pubCfg, err := tlsclient.Config(tlsclient.Files{CAFile: pki.CAFile, CertFile: pki.Client.CertFile, KeyFile: pki.Client.KeyFile}, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	pub := tlsMQTTClient(t, broker.MQTTAddr(), pubCfg)
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := pub.Publish(context.Background(), &paho.Publish{Topic: "sensors/dev-1", QoS: 1, Payload: []byte(`{"n":1}`)}); err != nil {
			t.Fatal(err)
		}
		recs, err := kafkax.ReadToEnd(context.Background(), cl, "sensors.raw")
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) > 0 {
			break
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("nothing relayed over TLS:\n%s", (<-done).err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	cancel()
	r := <-done
	if r.code != 0 {
		t.Fatalf("exit %d:\n%s", r.code, r.err)
	}
	for _, w := range []string{"ca_file=" + pki.CAFile, "cert_file=" + pki.Client.CertFile, "MQTT connected", "tls=true"} {
		if !strings.Contains(r.err, w) {
			t.Errorf("the log lacks %q:\n%s", w, r.err)
		}
	}
}

func tlsMQTTClient(t *testing.T, addr string, cfg *tls.Config) *paho.Client {
	t.Helper()
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

// `budget probe` reaches a TLS broker with the flags or the profile, and a
// missing client certificate says which flag sets it.
func TestBudgetProbeOverTLS(t *testing.T) {
	pki := tlstest.New(t)
	broker := startTLSBroker(t, pki, true)
	url := broker.MQTTURL()
	r := run(t, nil, "", "budget", "probe", "--mqtt", url, "--mqtt-ca-file", pki.CAFile,
		"--mqtt-cert-file", pki.Client.CertFile, "--mqtt-key-file", pki.Client.KeyFile, "--count", "5", "--quiet", "300ms")
	if r.code != 0 || !strings.Contains(r.out, "every message came back") {
		t.Fatalf("mutual TLS: exit %d\n%s\n%s", r.code, r.out, r.err)
	}
	r = run(t, nil, "", "budget", "probe", "--mqtt", url, "--mqtt-ca-file", pki.CAFile, "--count", "5", "--quiet", "300ms")
	if r.code != exitcode.Failure || !strings.Contains(r.err, "requires a client certificate (mutual TLS) and none was given") ||
		!strings.Contains(r.err, "--mqtt-cert-file/--mqtt-key-file") || strings.Contains(r.err, "cannot reach") {
		t.Errorf("no client certificate: exit %d %q", r.code, r.err)
	}
	r = run(t, nil, "", "budget", "probe", "--mqtt", url, "--count", "5", "--quiet", "300ms")
	if r.code != exitcode.Failure || !strings.Contains(r.err, "certificate signed by unknown authority") || !strings.Contains(r.err, "--mqtt-ca-file") {
		t.Errorf("system roots: exit %d %q", r.code, r.err)
	}
	// A plain URL for the TLS listener.
	r = run(t, nil, "", "budget", "probe", "--mqtt", "mqtt://"+broker.MQTTAddr(), "--count", "5", "--quiet", "300ms")
	if r.code != exitcode.Failure || !strings.Contains(r.err, "if this port is a TLS listener, write mqtts:// instead of mqtt://") {
		t.Errorf("mqtt:// to a TLS listener: exit %d %q", r.code, r.err)
	}
	// All of it from the profile, the CA overridden by the environment.
	env := writeProfiles(t, fmt.Sprintf("current_profile: p\nprofiles:\n  p:\n    mqtt:\n      url: %s\n      tls: {ca_file: %s, cert_file: %s, key_file: %s}\n",
		url, pki.OtherCAFile, pki.Client.CertFile, pki.Client.KeyFile))
	r = run(t, env, "", "budget", "probe", "--count", "5", "--quiet", "300ms")
	if r.code != exitcode.Failure || !strings.Contains(r.err, "not signed by the CA in "+pki.OtherCAFile) {
		t.Errorf("the profile's (wrong) CA: exit %d %q", r.code, r.err)
	}
	env[profile.EnvMQTTCAFile] = pki.CAFile
	r = run(t, env, "", "budget", "probe", "--count", "5", "--quiet", "300ms")
	if r.code != 0 || !strings.Contains(r.out, "every message came back") {
		t.Errorf("the profile with FLECHT_MQTT_CA_FILE: exit %d\n%s\n%s", r.code, r.out, r.err)
	}
	// A plain --mqtt under the profile's TLS files is refused, not a
	// silent plaintext probe.
	r = run(t, env, "", "budget", "probe", "--mqtt", "mqtt://127.0.0.1:1", "--count", "5")
	if r.code != exitcode.Usage || !strings.Contains(r.err, "the MQTT URL (--mqtt) is plain MQTT") {
		t.Errorf("plain --mqtt under TLS settings: exit %d %q", r.code, r.err)
	}
}

// `profile show` tells the MQTT TLS in effect and where each file came
// from; settings that cannot connect are shown, not an error.
func TestProfileShowMQTTTLS(t *testing.T) {
	env := writeProfiles(t, `current_profile: prod
profiles:
  prod:
    mqtt:
      url: mqtts://mqtt.prod:8883
      username: bridge
      password_env: MQTT_PW
      tls: {ca_file: /etc/mqtt/ca.pem, cert_file: /etc/mqtt/c.pem, key_file: /etc/mqtt/c.key}
  plain:
    mqtt: {url: "mqtt://m:1883"}
`)
	env[profile.EnvMQTTCAFile] = "/env/ca.pem"
	r := run(t, env, "", "profile", "show")
	if r.code != 0 || !strings.Contains(r.out, "mqtts://mqtt.prod:8883 (from profile) as bridge") ||
		!strings.Contains(r.out, "ca /env/ca.pem (from env); client cert /etc/mqtt/c.pem, key /etc/mqtt/c.key (from profile)") {
		t.Errorf("exit %d\n%s%s", r.code, r.out, r.err)
	}
	r = run(t, env, "", "profile", "show", "-o", "json")
	var got struct {
		MQTT *profile.MQTT     `json:"mqtt"`
		Conn *profile.MQTTConn `json:"mqtt_connection"`
	}
	if err := json.Unmarshal([]byte(r.out), &got); err != nil || got.Conn == nil {
		t.Fatalf("%v: %s", err, r.out)
	}
	if c := got.Conn; c.URL != "mqtts://mqtt.prod:8883" || c.URLSource != profile.SourceProfile || !c.TLS || c.CAFile != "/env/ca.pem" ||
		c.CAFileSource != profile.SourceEnv || c.CertFile != "/etc/mqtt/c.pem" || c.ClientCertSource != profile.SourceProfile || c.Problem != "" {
		t.Errorf("mqtt_connection %+v", c)
	}
	if got.MQTT == nil || got.MQTT.TLS == nil || got.MQTT.TLS.CAFile != "/etc/mqtt/ca.pem" {
		t.Errorf("the profile's own mqtt block: %s", r.out)
	}
	// The profile "plain" with the environment's CA: shown, exit 0.
	r = run(t, env, "", "profile", "show", "plain")
	if r.code != 0 || !strings.Contains(r.out, "cannot connect: FLECHT_MQTT_CA_FILE set, but the MQTT URL") {
		t.Errorf("conflict: exit %d\n%s%s", r.code, r.out, r.err)
	}
	delete(env, profile.EnvMQTTCAFile)
	r = run(t, env, "", "profile", "show", "plain")
	if r.code != 0 || !strings.Contains(r.out, "off (plain mqtt://)") {
		t.Errorf("plain: exit %d\n%s", r.code, r.out)
	}
}
