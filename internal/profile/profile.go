// Package profile reads flecht's config file of named connection profiles
// and resolves which brokers, TLS, SASL and MQTT settings a command uses:
// flag > environment > profile > default.
package profile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/flecht-dev/flecht/internal/boundedread"
	"github.com/flecht-dev/flecht/internal/yamldoc"
)

// DefaultBrokers is used when no flag, env var or profile names brokers.
const DefaultBrokers = "127.0.0.1:9092"

// Environment variables read by Resolve.
const (
	EnvBrokers = "FLECHT_BROKERS"
	EnvProfile = "FLECHT_PROFILE"
	EnvConfig  = "FLECHT_CONFIG"
)

// File is the config file: named profiles and an optional default.
type File struct {
	CurrentProfile string              `yaml:"current_profile,omitempty" json:"current_profile,omitempty"`
	Profiles       map[string]*Profile `yaml:"profiles" json:"profiles"`
}

// Profile holds how to reach one environment's Kafka and MQTT brokers.
// Secrets are never stored here, only where to read them from.
type Profile struct {
	Brokers []string `yaml:"brokers,omitempty" json:"brokers,omitempty"`
	TLS     *TLS     `yaml:"tls,omitempty" json:"tls,omitempty"`
	SASL    *SASL    `yaml:"sasl,omitempty" json:"sasl,omitempty"`
	MQTT    *MQTT    `yaml:"mqtt,omitempty" json:"mqtt,omitempty"`
}

// TLS configures TLS to the Kafka brokers. Enabled with no files uses the
// system roots. Files without enabled: true are refused rather than
// ignored (a plaintext connection the user did not mean) or taken as
// consent (enabled: false may be a deliberate switch).
type TLS struct {
	Enabled            bool   `yaml:"enabled" json:"enabled"`
	CAFile             string `yaml:"ca_file,omitempty" json:"ca_file,omitempty"`
	CertFile           string `yaml:"cert_file,omitempty" json:"cert_file,omitempty"`
	KeyFile            string `yaml:"key_file,omitempty" json:"key_file,omitempty"`
	ServerName         string `yaml:"server_name,omitempty" json:"server_name,omitempty"`
	InsecureSkipVerify bool   `yaml:"insecure_skip_verify,omitempty" json:"insecure_skip_verify,omitempty"`
}

func (t *TLS) configured() bool {
	return t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" || t.ServerName != "" || t.InsecureSkipVerify
}

// SASL configures SASL authentication to the Kafka brokers: a username
// and password for PLAIN and SCRAM, an OAuth client for OAUTHBEARER.
type SASL struct {
	Mechanism string `yaml:"mechanism" json:"mechanism"`
	Username  string `yaml:"username" json:"username"`
	Password  `yaml:",inline"`
	OAuth     *OAuth `yaml:"oauth,omitempty" json:"oauth,omitempty"`
}

// OAuth is the OIDC client of OAUTHBEARER: flecht fetches a token from
// TokenURL with the client-credentials grant (RFC 6749 §4.4) and presents
// it to the broker. The secret comes from an environment variable or a
// file, never from the config itself; CAFile is the token endpoint's CA
// (default: the system roots), read as the other TLS settings are.
type OAuth struct {
	TokenURL   string `yaml:"token_url" json:"token_url"`
	ClientID   string `yaml:"client_id" json:"client_id"`
	SecretEnv  string `yaml:"client_secret_env,omitempty" json:"client_secret_env,omitempty"`
	SecretFile string `yaml:"client_secret_file,omitempty" json:"client_secret_file,omitempty"`
	Scope      string `yaml:"scope,omitempty" json:"scope,omitempty"`
	CAFile     string `yaml:"ca_file,omitempty" json:"ca_file,omitempty"`
}

// Secret is where the client secret comes from, as a Password.
func (o *OAuth) Secret() Password { return Password{Env: o.SecretEnv, File: o.SecretFile} }

// ResolveSecret reads the client secret; errors name the setting, never
// the value.
func (o *OAuth) ResolveSecret(getenv func(string) string) (string, error) {
	switch {
	case o.SecretEnv != "":
		v := getenv(o.SecretEnv)
		if v == "" {
			return "", fmt.Errorf("sasl.oauth.client_secret_env: environment variable %s is empty or unset", o.SecretEnv)
		}
		return v, nil
	case o.SecretFile != "":
		v, err := o.Secret().Resolve(getenv)
		if err != nil {
			return "", fmt.Errorf("sasl.oauth.client_secret_file: %w", err)
		}
		if v == "" {
			return "", fmt.Errorf("sasl.oauth.client_secret_file: %s is empty", o.SecretFile)
		}
		return v, nil
	}
	return "", errors.New("sasl.oauth needs client_secret_env or client_secret_file")
}

func (o *OAuth) validate(where string) error {
	u, err := url.Parse(o.TokenURL)
	switch {
	case o.TokenURL == "":
		return fmt.Errorf("%s: sasl.oauth.token_url is required (the OIDC token endpoint, https://…)", where)
	case err != nil || u.Host == "":
		return fmt.Errorf("%s: sasl.oauth.token_url is not a URL like https://idp.example/oauth2/token", where)
	case u.User != nil:
		return fmt.Errorf("%s: sasl.oauth.token_url carries credentials; the client secret goes in client_secret_env or client_secret_file", where)
	case u.Scheme != "https":
		return fmt.Errorf("%s: sasl.oauth.token_url must be https:// (the client secret is sent to it); for a private CA set sasl.oauth.ca_file", where)
	case o.ClientID == "":
		return fmt.Errorf("%s: sasl.oauth.client_id is required", where)
	case o.SecretEnv != "" && o.SecretFile != "":
		return fmt.Errorf("%s: set sasl.oauth.client_secret_env or client_secret_file, not both", where)
	case o.SecretEnv == "" && o.SecretFile == "":
		return fmt.Errorf("%s: sasl.oauth needs client_secret_env or client_secret_file", where)
	}
	return nil
}

// MQTT is where the MQTT broker is and how to log in to it. The URL
// carries no password (Validate refuses one); the password comes from
// password_env or password_file like every other.
type MQTT struct {
	URL      string `yaml:"url" json:"url"`
	Username string `yaml:"username,omitempty" json:"username,omitempty"`
	Password `yaml:",inline"`
	TLS      *MQTTTLS `yaml:"tls,omitempty" json:"tls,omitempty"`
}

// MQTTTLS says whom to trust and what to present on a TLS connection to
// the MQTT broker. The URL's scheme turns TLS on (mqtts://); the broker is
// always authenticated: by the system roots, or by the private CA in
// ca_file. cert_file and key_file, both or neither, are the client
// certificate of mutual TLS. enabled may restate the scheme, as the Kafka
// tls block reads, but must agree with it.
type MQTTTLS struct {
	Enabled  *bool  `yaml:"enabled,omitempty" json:"enabled,omitempty"`
	CAFile   string `yaml:"ca_file,omitempty" json:"ca_file,omitempty"`
	CertFile string `yaml:"cert_file,omitempty" json:"cert_file,omitempty"`
	KeyFile  string `yaml:"key_file,omitempty" json:"key_file,omitempty"`
	// InsecureSkipVerify is read only to refuse it with advice: unlike
	// Kafka's, the MQTT connection has no unauthenticated mode.
	InsecureSkipVerify bool `yaml:"insecure_skip_verify,omitempty" json:"-"`
}

func (t *MQTTTLS) files() bool { return t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" }

// ErrNoInsecureMQTT is the advice given to a request to skip verifying the
// MQTT broker, as upstream Flechtwerk gives it.
const ErrNoInsecureMQTT = "not verifying the MQTT broker is not offered: encryption without authentication hands the session to whoever answers on the address; trust a private CA with ca_file instead, and give a broker reached by IP address an IP SAN"

// MarshalJSON shows the URL redacted, in case one with a password got past
// Validate: JSON (and YAML, which goes through it) is output for people and
// logs.
func (m MQTT) MarshalJSON() ([]byte, error) {
	type plain MQTT // without this method
	p := plain(m)
	p.URL = RedactURL(p.URL)
	return json.Marshal(p)
}

// RedactURL returns s with any password in it replaced, for display. A URL
// that does not parse is not shown at all: its text may hold the secret.
func RedactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(invalid URL)"
	}
	return u.Redacted()
}

func (m *MQTT) validate(where string) error {
	if m.URL == "" {
		return fmt.Errorf("%s: mqtt.url is required", where)
	}
	u, err := ParseMQTTURL(m.URL)
	if err != nil {
		return fmt.Errorf("%s: mqtt.url: %w", where, err)
	}
	if err := m.Password.validate(where + " mqtt"); err != nil {
		return err
	}
	if t := m.TLS; t != nil {
		secure := MQTTURLSecure(u)
		switch {
		case t.InsecureSkipVerify:
			return fmt.Errorf("%s: mqtt.tls.insecure_skip_verify: %s", where, ErrNoInsecureMQTT)
		case (t.CertFile == "") != (t.KeyFile == ""):
			return fmt.Errorf("%s: mqtt.tls.cert_file and mqtt.tls.key_file go together: give both for mutual TLS, or neither", where)
		case t.Enabled != nil && *t.Enabled && !secure:
			return fmt.Errorf("%s: mqtt.tls.enabled is true but mqtt.url is plain MQTT: the URL's scheme turns TLS on, write mqtts://host:8883", where)
		case t.Enabled != nil && !*t.Enabled && secure:
			return fmt.Errorf("%s: mqtt.tls.enabled is false but mqtt.url is mqtts://, which always uses TLS: write mqtt:// for a plain connection", where)
		case t.files() && !secure:
			return fmt.Errorf("%s: mqtt.tls names certificate files but mqtt.url is plain MQTT: write mqtts:// to connect with TLS, or remove the files", where)
		}
	}
	return nil
}

// Password names where a password comes from: an environment variable or a
// file (for mounted secrets). The value itself never appears in the config.
type Password struct {
	Env  string `yaml:"password_env,omitempty" json:"password_env,omitempty"`
	File string `yaml:"password_file,omitempty" json:"password_file,omitempty"`
}

// Mechanisms lists the accepted SASL mechanisms.
var Mechanisms = []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", MechOAuthBearer}

// MechOAuthBearer is the SASL mechanism of OIDC tokens.
const MechOAuthBearer = "OAUTHBEARER"

// Resolve reads the password. getenv is os.Getenv outside tests.
func (p Password) Resolve(getenv func(string) string) (string, error) {
	switch {
	case p.Env != "":
		v := getenv(p.Env)
		if v == "" {
			return "", fmt.Errorf("password environment variable %s is empty or unset", p.Env)
		}
		return v, nil
	case p.File != "":
		b, err := PasswordFile.ReadFile(p.File)
		if err != nil {
			return "", err
		}
		return strings.TrimRight(string(b), "\r\n"), nil
	}
	return "", nil
}

// PasswordFile is what a password_file is to a read: a password, or a
// token of a few KiB at most.
var PasswordFile = boundedread.Kind{Name: "password file", Limit: 64 << 10}

// Warning warns when the password file is open to group or others, or is "".
func (p Password) Warning() string {
	if p.File == "" {
		return ""
	}
	return boundedread.ModeWarning(PasswordFile.Name, p.File)
}

func (p Password) validate(where string) error {
	if p.Env != "" && p.File != "" {
		return fmt.Errorf("%s: set password_env or password_file, not both", where)
	}
	return nil
}

// Validate checks a profile for settings that cannot work.
func (p *Profile) Validate(name string) error {
	where := "profile " + boundedread.Quote(name)
	for _, b := range p.Brokers {
		if strings.TrimSpace(b) == "" {
			return fmt.Errorf("%s: empty broker address", where)
		}
	}
	if t := p.TLS; t != nil {
		if !t.Enabled && t.configured() {
			return fmt.Errorf("%s: tls sets files or options but not enabled: true; add enabled: true to connect with TLS, or remove the tls block", where)
		}
		if (t.CertFile == "") != (t.KeyFile == "") {
			return fmt.Errorf("%s: tls.cert_file and tls.key_file go together", where)
		}
	}
	if s := p.SASL; s != nil {
		ok := false
		for _, m := range Mechanisms {
			if strings.EqualFold(s.Mechanism, m) {
				s.Mechanism, ok = m, true
			}
		}
		if !ok {
			return fmt.Errorf("%s: sasl.mechanism %s is not one of %s", where, boundedread.Quote(s.Mechanism), strings.Join(Mechanisms, ", "))
		}
		if s.Mechanism == MechOAuthBearer {
			if s.OAuth == nil {
				return fmt.Errorf("%s: sasl.mechanism OAUTHBEARER needs an sasl.oauth block (token_url, client_id, client_secret_env or client_secret_file)", where)
			}
			if s.Username != "" || s.Password.Env != "" || s.Password.File != "" {
				return fmt.Errorf("%s: sasl.username and password_env/password_file do not apply to OAUTHBEARER; the client id and secret go in sasl.oauth", where)
			}
			if err := s.OAuth.validate(where); err != nil {
				return err
			}
		} else if err := s.validatePassword(where); err != nil {
			return err
		}
	}
	if p.MQTT != nil {
		return p.MQTT.validate(where)
	}
	return nil
}

func (s *SASL) validatePassword(where string) error {
	if s.OAuth != nil {
		return fmt.Errorf("%s: sasl.oauth applies only to mechanism OAUTHBEARER, not %s", where, s.Mechanism)
	}
	if s.Username == "" {
		return fmt.Errorf("%s: sasl.username is required", where)
	}
	if s.Password.Env == "" && s.Password.File == "" {
		return fmt.Errorf("%s: sasl needs password_env or password_file", where)
	}
	return s.Password.validate(where + " sasl")
}

// Parse decodes a config file strictly: unknown fields are errors, so a
// typo does not silently fall back to defaults.
func Parse(data []byte) (*File, error) {
	f := &File{}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(f); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	// A second document would be ignored, as a stage file's would: a
	// profile pasted after --- must not pass for one that is read. An
	// empty one (a trailing ---) holds nothing to ignore.
	if line, err := yamldoc.SecondDocument(dec); err != nil {
		return nil, err
	} else if line > 0 {
		return nil, fmt.Errorf("line %d: a second YAML document starts here (after ---): a config file holds one; put every profile under its one profiles key", line)
	}
	if f.Profiles == nil {
		f.Profiles = map[string]*Profile{}
	}
	for name, p := range f.Profiles {
		if p == nil {
			f.Profiles[name] = &Profile{}
			continue
		}
		if err := p.Validate(name); err != nil {
			return nil, err
		}
	}
	if f.CurrentProfile != "" {
		if _, ok := f.Profiles[f.CurrentProfile]; !ok {
			return nil, fmt.Errorf("current_profile %s is not among the profiles (%s)", boundedread.Quote(f.CurrentProfile), strings.Join(f.Names(), ", "))
		}
	}
	return f, nil
}

// ModeWarning warns when the config file at path is open to group or
// others and f holds what they could misuse: SASL or MQTT login settings
// (which name where the passwords are), or insecure_skip_verify (whoever
// can write the file can turn verification off). "" otherwise.
func (f *File) ModeWarning(path string) string {
	var holds []string
	for _, name := range f.Names() {
		p := f.Profiles[name]
		if p.SASL != nil {
			holds = append(holds, fmt.Sprintf("SASL settings (profile %s)", boundedread.Quote(name)))
		}
		if p.MQTT != nil && (p.MQTT.Username != "" || p.MQTT.Password != Password{}) {
			holds = append(holds, fmt.Sprintf("MQTT login settings (profile %s)", boundedread.Quote(name)))
		}
		if p.TLS != nil && p.TLS.InsecureSkipVerify {
			holds = append(holds, fmt.Sprintf("insecure_skip_verify (profile %s)", boundedread.Quote(name)))
		}
	}
	if len(holds) == 0 {
		return ""
	}
	fi, err := os.Stat(path)
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o077 == 0 {
		return ""
	}
	return fmt.Sprintf("%s %s has mode %04o: group or others can access it, and it holds %s; run chmod 600 %s",
		ConfigFile.Name, path, fi.Mode().Perm(), strings.Join(holds, ", "), path)
}

// Names returns the profile names, sorted.
func (f *File) Names() []string {
	names := make([]string, 0, len(f.Profiles))
	for n := range f.Profiles {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// DefaultPath is $XDG_CONFIG_HOME/flecht/config.yaml, or
// ~/.config/flecht/config.yaml when XDG_CONFIG_HOME is unset.
func DefaultPath(getenv func(string) string) string {
	if x := getenv("XDG_CONFIG_HOME"); x != "" {
		return filepath.Join(x, "flecht", "config.yaml")
	}
	if h := getenv("HOME"); h != "" {
		return filepath.Join(h, ".config", "flecht", "config.yaml")
	}
	return ""
}
