package profile

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/flecht-dev/flecht/internal/tlsclient/tlstest"
)

func TestMQTTTLSBlockValidated(t *testing.T) {
	base := "profiles:\n  p:\n    mqtt:\n"
	for body, want := range map[string]string{
		"      url: mqtts://m:8883\n      tls: {ca_file: /ca.pem, cert_file: /c.pem, key_file: /c.key}\n": "",
		"      url: mqtts://m:8883\n      tls: {enabled: true, ca_file: /ca.pem}\n":                       "",
		"      url: mqtt://m:1883\n      tls: {enabled: false}\n":                                         "",
		"      url: mqtts://m\n      tls: {cert_file: /c.pem}\n":                                          "mqtt.tls.cert_file and mqtt.tls.key_file go together",
		"      url: mqtts://m\n      tls: {key_file: /c.key}\n":                                           "mqtt.tls.cert_file and mqtt.tls.key_file go together",
		"      url: mqtt://m\n      tls: {ca_file: /ca.pem}\n":                                            "names certificate files but mqtt.url is plain MQTT: write mqtts://",
		"      url: mqtt://m\n      tls: {enabled: true}\n":                                               "enabled is true but mqtt.url is plain MQTT",
		"      url: mqtts://m\n      tls: {enabled: false}\n":                                             "enabled is false but mqtt.url is mqtts://",
		"      url: mqtts://m\n      tls: {insecure_skip_verify: true}\n":                                 "trust a private CA with ca_file instead",
		"      url: mqtts://m\n      tls: {server_name: x}\n":                                             "field server_name not found",
	} {
		_, err := Parse([]byte(base + body))
		if want == "" {
			if err != nil {
				t.Errorf("%s: %v", body, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), `profile "p"`) && !strings.Contains(err.Error(), "not found") {
			t.Errorf("%s: %v, want %q", body, err, want)
		}
	}
}

func layers(flagURL, flagCA string, getenv func(string) string, stage MQTTLayer, r *Resolved) []MQTTLayer {
	return []MQTTLayer{MQTTFlags("--mqtt-url", flagURL, flagCA, "", ""), MQTTEnv(getenv), stage, r.MQTTProfile()}
}

// Each setting comes from the first source that gives it: flag, env, stage
// file, profile; cert_file and key_file travel together.
func TestResolveMQTTPrecedence(t *testing.T) {
	prof := &Resolved{ProfileName: "prod", MQTT: &MQTT{URL: "mqtts://prof:8883", TLS: &MQTTTLS{CAFile: "/prof/ca.pem", CertFile: "/prof/c.pem", KeyFile: "/prof/c.key"}}}
	noEnv := env(nil)
	none := MQTTStageFile("", "", "", "")

	c := ResolveMQTT("mqtt://127.0.0.1:1883", layers("", "", noEnv, none, prof)...)
	if c.Err() != nil || c.URL != "mqtts://prof:8883" || c.URLSource != SourceProfile || c.CAFile != "/prof/ca.pem" || c.CAFileSource != SourceProfile ||
		c.CertFile != "/prof/c.pem" || c.KeyFile != "/prof/c.key" || c.ClientCertSource != SourceProfile || !c.TLS {
		t.Errorf("profile only: %+v", c)
	}

	stage := MQTTStageFile("mqtts://stage:8883", "/stage/ca.pem", "/stage/c.pem", "/stage/c.key")
	c = ResolveMQTT("", layers("", "", noEnv, stage, prof)...)
	if c.URLSource != SourceStageFile || c.CAFile != "/stage/ca.pem" || c.CertFile != "/stage/c.pem" || c.ClientCertSource != SourceStageFile {
		t.Errorf("stage file over profile: %+v", c)
	}

	e := env(map[string]string{EnvMQTTURL: "mqtts://env:8883", EnvMQTTCAFile: "/env/ca.pem", EnvMQTTCertFile: "/env/c.pem", EnvMQTTKeyFile: "/env/c.key"})
	c = ResolveMQTT("", layers("mqtts://flag:8883", "/flag/ca.pem", e, stage, prof)...)
	if c.URL != "mqtts://flag:8883" || c.URLSource != SourceFlag || c.CAFile != "/flag/ca.pem" || c.CAFileSource != SourceFlag ||
		c.CertFile != "/env/c.pem" || c.KeyFile != "/env/c.key" || c.ClientCertSource != SourceEnv {
		t.Errorf("flag and env: %+v", c)
	}

	// Nothing anywhere: the default, plain.
	c = ResolveMQTT("mqtt://127.0.0.1:1883", layers("", "", noEnv, none, &Resolved{})...)
	if c.Err() != nil || c.URLSource != SourceDefault || c.TLS {
		t.Errorf("default: %+v", c)
	}
}

func TestResolveMQTTRefusesWhatCannotWork(t *testing.T) {
	noEnv := env(nil)
	none := MQTTStageFile("", "", "", "")
	for _, c := range []struct {
		name string
		ls   []MQTTLayer
		def  string
		want string
	}{
		{"cert without key (env)", layers("mqtts://m", "", env(map[string]string{EnvMQTTCertFile: "/c.pem"}), none, &Resolved{}), "",
			"FLECHT_MQTT_CERT_FILE is set but FLECHT_MQTT_KEY_FILE is not: give both for mutual TLS, or neither"},
		{"key without cert (stage file)", layers("", "", noEnv, MQTTStageFile("mqtts://m", "", "", "/c.key"), &Resolved{}), "",
			"mqtt.key_file in the stage file is set but mqtt.cert_file in the stage file is not"},
		// A key from one place never pairs with a certificate from another.
		{"pair split over flag and profile", []MQTTLayer{MQTTFlags("--mqtt-url", "mqtts://m", "", "/flag/c.pem", ""), (&Resolved{ProfileName: "p", MQTT: &MQTT{URL: "mqtts://m", TLS: &MQTTTLS{CertFile: "/p/c.pem", KeyFile: "/p/c.key"}}}).MQTTProfile()}, "",
			"--mqtt-cert-file is set but --mqtt-key-file is not"},
		{"CA with a plain flag URL", layers("mqtt://m:1883", "/ca.pem", noEnv, none, &Resolved{}), "",
			"--mqtt-ca-file set, but the MQTT URL (--mqtt-url) is plain MQTT: write mqtts://host:port to connect with TLS, or unset it"},
		{"profile TLS under a plain env URL", layers("", "", env(map[string]string{EnvMQTTURL: "mqtt://m:1883"}), none,
			&Resolved{ProfileName: "prod", MQTT: &MQTT{URL: "mqtts://p:8883", TLS: &MQTTTLS{CertFile: "/c.pem", KeyFile: "/c.key"}}}), "",
			`mqtt.tls.cert_file/key_file of profile "prod" set, but the MQTT URL (FLECHT_MQTT_URL) is plain MQTT: write mqtts://host:port to connect with TLS, or unset it`},
		{"CA with the plain default", layers("", "/ca.pem", noEnv, none, &Resolved{}), "mqtt://127.0.0.1:1883",
			"the MQTT URL (the default broker) is plain MQTT"},
		{"CA with no URL at all", layers("", "", env(map[string]string{EnvMQTTCAFile: "/ca.pem"}), none, &Resolved{}), "",
			"FLECHT_MQTT_CA_FILE set but no MQTT broker URL: give an mqtts:// URL"},
		{"password in the env URL", layers("", "", env(map[string]string{EnvMQTTURL: "mqtts://u:hunter2@m"}), none, &Resolved{}), "",
			"FLECHT_MQTT_URL: the MQTT URL must not hold a password"},
	} {
		got := ResolveMQTT(c.def, c.ls...)
		err := got.Err()
		if err == nil || !strings.Contains(err.Error(), c.want) || got.Problem != err.Error() {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
		if _, cerr := got.TLSConfig(); cerr != err {
			t.Errorf("%s: TLSConfig gave %v, want the same error", c.name, cerr)
		}
		if got.ParsedURL() != nil {
			t.Errorf("%s: a URL despite the error", c.name)
		}
		if b, _ := json.Marshal(got); strings.Contains(string(b), "hunter2") {
			t.Errorf("%s: the password shows in %s", c.name, b)
		}
	}
}

func TestMQTTConnTLSConfig(t *testing.T) {
	pki := tlstest.New(t)
	c := ResolveMQTT("", MQTTFlags("--mqtt-url", "mqtts://127.0.0.1:8883", pki.CAFile, pki.Client.CertFile, pki.Client.KeyFile))
	cfg, err := c.TLSConfig()
	if err != nil || cfg == nil || cfg.ServerName != "127.0.0.1" || cfg.RootCAs == nil || len(cfg.Certificates) != 1 || cfg.InsecureSkipVerify {
		t.Fatalf("config %+v %v", cfg, err)
	}
	plain := ResolveMQTT("", MQTTFlags("--mqtt-url", "mqtt://127.0.0.1:1883", "", "", ""))
	if cfg, err := plain.TLSConfig(); cfg != nil || err != nil {
		t.Errorf("plain: %v %v", cfg, err)
	}
	bad := ResolveMQTT("", MQTTFlags("--mqtt-url", "mqtts://127.0.0.1:8883", pki.Client.KeyFile, "", ""))
	if _, err := bad.TLSConfig(); err == nil || !strings.Contains(err.Error(), "CA file "+pki.Client.KeyFile+": PEM block 1 is a PRIVATE KEY") {
		t.Errorf("a key as CA file: %v", err)
	}
	// The hints name every place of the layers consulted.
	p := ResolveMQTT("", MQTTFlags("--mqtt-url", "mqtts://m", "", "", ""), MQTTEnv(env(nil)), (&Resolved{ProfileName: "prod"}).MQTTProfile()).Peer()
	if p.CAHint != `the CA file (--mqtt-ca-file, FLECHT_MQTT_CA_FILE or mqtt.tls.ca_file of profile "prod")` ||
		p.CertHint != `a client certificate and key (--mqtt-cert-file/--mqtt-key-file, FLECHT_MQTT_CERT_FILE/FLECHT_MQTT_KEY_FILE or mqtt.tls.cert_file/key_file of profile "prod")` {
		t.Errorf("hints %q / %q", p.CAHint, p.CertHint)
	}
}

// Resolve reports the MQTT connection of the environment and the profile,
// and only notes (never fails on) settings that cannot connect: commands
// that do not use MQTT must run.
func TestResolveReportsMQTTConn(t *testing.T) {
	path := writeConfig(t, `current_profile: prod
profiles:
  prod:
    mqtt:
      url: mqtts://mqtt.prod:8883
      tls: {ca_file: /etc/mqtt/ca.pem, cert_file: /etc/mqtt/c.pem, key_file: /etc/mqtt/c.key}
  bare: {}
`)
	r, err := Resolve(Inputs{Config: path, Getenv: env(map[string]string{EnvMQTTCAFile: "/env/ca.pem"})})
	if err != nil {
		t.Fatal(err)
	}
	c := r.MQTTConn
	if c == nil || c.URL != "mqtts://mqtt.prod:8883" || c.URLSource != SourceProfile || c.CAFile != "/env/ca.pem" || c.CAFileSource != SourceEnv || c.ClientCertSource != SourceProfile {
		t.Errorf("conn %+v", c)
	}
	r, err = Resolve(Inputs{Config: path, Getenv: env(map[string]string{EnvMQTTURL: "mqtt://local:1883"})})
	if err != nil {
		t.Fatalf("a plain env URL under a TLS profile fails Resolve: %v", err)
	}
	if r.MQTTConn == nil || !strings.Contains(r.MQTTConn.Problem, "plain MQTT") {
		t.Errorf("conflict not noted: %+v", r.MQTTConn)
	}
	r, err = Resolve(Inputs{Config: path, Profile: "bare", Getenv: env(nil)})
	if err != nil || r.MQTTConn != nil {
		t.Errorf("no MQTT anywhere: %+v %v", r.MQTTConn, err)
	}
	b, _ := json.Marshal(ResolveMQTT("", MQTTEnv(env(map[string]string{EnvMQTTURL: "mqtts://m"}))))
	for _, k := range []string{"url", "url_source", "tls", "ca_file", "ca_file_source", "cert_file", "key_file", "client_cert_source", "problem"} {
		if !strings.Contains(string(b), `"`+k+`":`) {
			t.Errorf("JSON lacks %q: %s", k, b)
		}
	}
}
