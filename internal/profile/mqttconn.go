package profile

import (
	"crypto/tls"
	"fmt"
	"net/url"
	"strings"

	"github.com/flecht-dev/flecht/internal/tlsclient"
)

// Environment variables of the MQTT connection, beside the flags of the
// commands that connect to an MQTT broker.
const (
	EnvMQTTURL      = "FLECHT_MQTT_URL"
	EnvMQTTCAFile   = "FLECHT_MQTT_CA_FILE"
	EnvMQTTCertFile = "FLECHT_MQTT_CERT_FILE"
	EnvMQTTKeyFile  = "FLECHT_MQTT_KEY_FILE"
)

// SourceStageFile is a setting from the stage file's mqtt: block.
const SourceStageFile Source = "stage_file"

// MQTTLayer is what one source says about the MQTT connection; an empty
// field says nothing, and a later layer may fill it.
type MQTTLayer struct {
	Source Source
	// Names are the settings as the user writes them, for messages.
	Names                          MQTTNames
	URL, CAFile, CertFile, KeyFile string
}

// MQTTNames name one source's MQTT settings: "--mqtt-ca-file"; Pair
// names cert_file and key_file at once.
type MQTTNames struct{ URL, CAFile, CertFile, KeyFile, Pair string }

// MQTTFlags is the layer of a command's --mqtt-url (urlFlag names it:
// `budget probe` calls it --mqtt), --mqtt-ca-file, --mqtt-cert-file and
// --mqtt-key-file.
func MQTTFlags(urlFlag, rawURL, caFile, certFile, keyFile string) MQTTLayer {
	return MQTTLayer{Source: SourceFlag,
		Names: MQTTNames{urlFlag, "--mqtt-ca-file", "--mqtt-cert-file", "--mqtt-key-file", "--mqtt-cert-file/--mqtt-key-file"},
		URL:   rawURL, CAFile: caFile, CertFile: certFile, KeyFile: keyFile}
}

// MQTTEnv is the layer of the FLECHT_MQTT_* environment variables.
func MQTTEnv(getenv func(string) string) MQTTLayer {
	return MQTTLayer{Source: SourceEnv,
		Names: MQTTNames{EnvMQTTURL, EnvMQTTCAFile, EnvMQTTCertFile, EnvMQTTKeyFile, EnvMQTTCertFile + "/" + EnvMQTTKeyFile},
		URL:   getenv(EnvMQTTURL), CAFile: getenv(EnvMQTTCAFile), CertFile: getenv(EnvMQTTCertFile), KeyFile: getenv(EnvMQTTKeyFile)}
}

// MQTTStageFile is the layer of a stage file's mqtt: block.
func MQTTStageFile(rawURL, caFile, certFile, keyFile string) MQTTLayer {
	n := func(k string) string { return "mqtt." + k + " in the stage file" }
	return MQTTLayer{Source: SourceStageFile,
		Names: MQTTNames{n("url"), n("ca_file"), n("cert_file"), n("key_file"), n("cert_file/key_file")},
		URL:   rawURL, CAFile: caFile, CertFile: certFile, KeyFile: keyFile}
}

// MQTTProfile is the layer of the profile in use (without one, a layer
// that says nothing but names where a profile would say it).
func (r *Resolved) MQTTProfile() MQTTLayer {
	in := "in a profile"
	if r.ProfileName != "" {
		in = fmt.Sprintf("of profile %q", r.ProfileName)
	}
	n := func(k string) string { return k + " " + in }
	l := MQTTLayer{Source: SourceProfile, Names: MQTTNames{n("mqtt.url"), n("mqtt.tls.ca_file"), n("mqtt.tls.cert_file"), n("mqtt.tls.key_file"), n("mqtt.tls.cert_file/key_file")}}
	if m := r.MQTT; m != nil {
		l.URL = m.URL
		if m.TLS != nil {
			l.CAFile, l.CertFile, l.KeyFile = m.TLS.CAFile, m.TLS.CertFile, m.TLS.KeyFile
		}
	}
	return l
}

// MQTTConn is the effective MQTT connection: each setting from the first
// layer that gives it, and where it came from. Its JSON (in `flecht
// profile show -o json`) always has every key.
type MQTTConn struct {
	URL       string `json:"url"`
	URLSource Source `json:"url_source"`
	// TLS is whether the URL asks for it (mqtts://).
	TLS          bool   `json:"tls"`
	CAFile       string `json:"ca_file"`
	CAFileSource Source `json:"ca_file_source"`
	CertFile     string `json:"cert_file"`
	KeyFile      string `json:"key_file"`
	// ClientCertSource is where cert_file and key_file came from: they are
	// one setting, never taken from two places.
	ClientCertSource Source `json:"client_cert_source"`
	// Problem is why these settings cannot connect, "" when they can.
	Problem string `json:"problem"`

	parsed *url.URL
	err    error
	layers []MQTTLayer
}

// ResolveMQTT takes each setting from the first layer that gives it;
// defaultURL ("" for none) applies when no layer names a broker. Settings
// that cannot work together are not an error here but c.Err(): a command
// that never connects to MQTT must not fail over them.
func ResolveMQTT(defaultURL string, layers ...MQTTLayer) *MQTTConn {
	c := &MQTTConn{layers: layers}
	var urlName, caName string
	var certLayer *MQTTLayer
	for i := range layers {
		l := &layers[i]
		if c.URL == "" && l.URL != "" {
			c.URL, c.URLSource, urlName = l.URL, l.Source, l.Names.URL
		}
		if c.CAFile == "" && l.CAFile != "" {
			c.CAFile, c.CAFileSource, caName = l.CAFile, l.Source, l.Names.CAFile
		}
		if certLayer == nil && (l.CertFile != "" || l.KeyFile != "") {
			certLayer = l
			c.CertFile, c.KeyFile, c.ClientCertSource = l.CertFile, l.KeyFile, l.Source
		}
	}
	if c.URL == "" && defaultURL != "" {
		c.URL, c.URLSource = defaultURL, SourceDefault
	}
	c.fail(c.check(urlName, caName, certLayer))
	return c
}

func (c *MQTTConn) fail(err error) {
	if err != nil {
		c.err, c.Problem = err, err.Error()
	}
}

func (c *MQTTConn) check(urlName, caName string, certLayer *MQTTLayer) error {
	if certLayer != nil {
		switch {
		case certLayer.KeyFile == "":
			return fmt.Errorf("%s is set but %s is not: give both for mutual TLS, or neither", certLayer.Names.CertFile, certLayer.Names.KeyFile)
		case certLayer.CertFile == "":
			return fmt.Errorf("%s is set but %s is not: give both for mutual TLS, or neither", certLayer.Names.KeyFile, certLayer.Names.CertFile)
		}
	}
	var tlsNames []string
	if caName != "" {
		tlsNames = append(tlsNames, caName)
	}
	if certLayer != nil {
		tlsNames = append(tlsNames, certLayer.Names.Pair)
	}
	if c.URL == "" {
		if len(tlsNames) > 0 {
			return fmt.Errorf("%s set but no MQTT broker URL: give an mqtts:// URL", joinList(tlsNames, "and"))
		}
		return nil
	}
	u, err := ParseMQTTURL(c.URL)
	if err != nil {
		c.URL = RedactURL(c.URL) // it is shown, and may hold a password
		if urlName != "" {
			return fmt.Errorf("%s: %w", urlName, err)
		}
		return err
	}
	c.parsed, c.TLS = u, MQTTURLSecure(u)
	if !c.TLS && len(tlsNames) > 0 {
		from := "the default broker"
		if urlName != "" {
			from = urlName
		}
		them := "them"
		if len(tlsNames) == 1 {
			them = "it"
		}
		return fmt.Errorf("%s set, but the MQTT URL (%s) is plain MQTT: write mqtts://host:port to connect with TLS, or unset %s",
			joinList(tlsNames, "and"), from, them)
	}
	return nil
}

// Err is why these settings cannot connect (a usage error), nil when they
// can.
func (c *MQTTConn) Err() error { return c.err }

// ParsedURL is the broker URL; nil when there is none or Err is set.
func (c *MQTTConn) ParsedURL() *url.URL {
	if c.err != nil {
		return nil
	}
	return c.parsed
}

// Files are the TLS files in effect.
func (c *MQTTConn) Files() tlsclient.Files {
	return tlsclient.Files{CAFile: c.CAFile, CertFile: c.CertFile, KeyFile: c.KeyFile}
}

// TLSConfig reads the TLS files for an mqtts:// URL (nil for a plain one),
// now, so a broken file fails before any connection. Errors name the
// setting and the file, never what is in it.
func (c *MQTTConn) TLSConfig() (*tls.Config, error) {
	if c.err != nil {
		return nil, c.err
	}
	if !c.TLS {
		return nil, nil
	}
	cfg, err := tlsclient.Config(c.Files(), c.parsed.Hostname())
	if err != nil {
		return nil, fmt.Errorf("MQTT TLS: %w", err)
	}
	return cfg, nil
}

// Peer names the MQTT broker and where its TLS settings go, for
// tlsclient.Explain.
func (c *MQTTConn) Peer() tlsclient.Peer {
	var ca, cert []string
	for _, l := range c.layers {
		ca = append(ca, l.Names.CAFile)
		cert = append(cert, l.Names.Pair)
	}
	return tlsclient.Peer{
		Name:        "the MQTT broker",
		Files:       c.Files(),
		CAHint:      "the CA file (" + joinList(ca, "or") + ")",
		CertHint:    "a client certificate and key (" + joinList(cert, "or") + ")",
		PlainHint:   "For a plain listener write mqtt:// instead of mqtts://.",
		ClientTrust: "Mosquitto: cafile",
	}
}

// ExplainPlainMQTT adds a hint to an error of a plain mqtt:// connection
// that was closed before the broker answered, as a TLS listener does.
func ExplainPlainMQTT(err error) error {
	if err != nil && tlsclient.ClosedEarly(err) {
		return fmt.Errorf("%w (if this port is a TLS listener, write mqtts:// instead of mqtt://)", err)
	}
	return err
}

// joinList joins "a, b or c" (conj "or") or "a, b and c".
func joinList(items []string, conj string) string {
	switch len(items) {
	case 0:
		return ""
	case 1:
		return items[0]
	}
	return strings.Join(items[:len(items)-1], ", ") + " " + conj + " " + items[len(items)-1]
}
