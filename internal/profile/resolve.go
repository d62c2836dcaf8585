package profile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/flecht-dev/flecht/internal/boundedread"
	"github.com/flecht-dev/flecht/internal/exitcode"
)

// Inputs are what the command line and environment say.
type Inputs struct {
	Brokers string // --brokers, "" when not given
	Profile string // --profile, "" when not given
	Config  string // --config, "" when not given
	Getenv  func(string) string

	// ProfileSource is where Profile came from: SourceFlag when empty,
	// SourceArgument for `flecht profile show NAME`.
	ProfileSource Source
}

// Source names where a setting came from, shown by `flecht profile show`.
type Source string

const (
	SourceFlag     Source = "flag"
	SourceArgument Source = "argument"
	SourceEnv      Source = "env"
	SourceProfile  Source = "profile"
	SourceDefault  Source = "default"
)

// Resolved is the effective connection settings for one command. Its JSON
// (`flecht profile show -o json`) always has every key: "" or null when a
// setting is unset, so scripts see one schema.
type Resolved struct {
	ConfigPath    string   `json:"config_path"`
	ConfigFound   bool     `json:"config_found"`
	ProfileName   string   `json:"profile"`
	ProfileSource Source   `json:"profile_source"`
	Brokers       []string `json:"brokers"`
	BrokersSource Source   `json:"brokers_source"`
	TLS           *TLS     `json:"tls"`
	SASL          *SASL    `json:"sasl"`
	MQTT          *MQTT    `json:"mqtt"`
	// MQTTConn is the MQTT connection the environment and the profile
	// give (a command's flags and a stage file may still change it); nil
	// when neither names a broker or a TLS file.
	MQTTConn       *MQTTConn `json:"mqtt_connection"`
	AvailableNames []string  `json:"available_profiles"`

	// Warnings are settings that work but likely not as meant; the CLI
	// prints each on standard error.
	Warnings []string `json:"-"`
}

// ErrUnknownProfile is returned (wrapped) when a named profile does not exist.
var ErrUnknownProfile = errors.New("unknown profile")

// ConfigFile is what the config file is to a read: profiles of a few
// lines each.
var ConfigFile = boundedread.Kind{Name: "config file", Limit: 1 << 20}

// Load reads the config file named by --config, FLECHT_CONFIG or the default
// path. A missing default file is an empty config; a missing file the user
// named is an error.
func Load(in Inputs) (*File, string, bool, error) {
	getenv := in.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	path, explicit := in.Config, in.Config != ""
	if !explicit {
		if p := getenv(EnvConfig); p != "" {
			path, explicit = p, true
		} else {
			path = DefaultPath(getenv)
		}
	}
	if path == "" {
		return &File{Profiles: map[string]*Profile{}}, "", false, nil
	}
	data, err := ConfigFile.ReadFile(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) && !explicit {
			return &File{Profiles: map[string]*Profile{}}, path, false, nil
		}
		return nil, path, false, err
	}
	f, err := Parse(data)
	if err != nil {
		return nil, path, true, fmt.Errorf("config file %s: %w", path, err)
	}
	return f, path, true, nil
}

// Resolve applies the precedence flag > env > profile > default.
func Resolve(in Inputs) (*Resolved, error) {
	getenv := in.Getenv
	if getenv == nil {
		getenv = os.Getenv
		in.Getenv = getenv
	}
	f, path, found, err := Load(in)
	if err != nil {
		return nil, err
	}
	r := &Resolved{ConfigPath: path, ConfigFound: found, AvailableNames: f.Names()}
	if found {
		if w := f.ModeWarning(path); w != "" {
			r.Warnings = append(r.Warnings, w)
		}
	}

	name, src := in.Profile, in.ProfileSource
	if src == "" {
		src = SourceFlag
	}
	if name == "" {
		name, src = getenv(EnvProfile), SourceEnv
	}
	if name == "" {
		name, src = f.CurrentProfile, SourceProfile
	}
	var p *Profile
	if name != "" {
		var ok bool
		if p, ok = f.Profiles[name]; !ok {
			avail := "none defined"
			if len(r.AvailableNames) > 0 {
				avail = "available: " + strings.Join(r.AvailableNames, ", ")
			}
			where := path
			if where == "" {
				where = "no config file"
			}
			return nil, fmt.Errorf("%w %q (%s; %s)", ErrUnknownProfile, name, where, avail)
		}
		r.ProfileName, r.ProfileSource = name, src
		r.TLS, r.SASL, r.MQTT = p.TLS, p.SASL, p.MQTT
		var pws []Password
		if p.SASL != nil {
			pws = append(pws, p.SASL.Password)
			if p.SASL.OAuth != nil {
				pws = append(pws, p.SASL.OAuth.Secret())
			}
		}
		if p.MQTT != nil {
			pws = append(pws, p.MQTT.Password)
		}
		for _, pw := range pws {
			if w := pw.Warning(); w != "" {
				r.Warnings = append(r.Warnings, fmt.Sprintf("profile %q: %s", name, w))
			}
		}
	}

	switch {
	case in.Brokers != "":
		r.Brokers, r.BrokersSource = splitList(in.Brokers), SourceFlag
	case getenv(EnvBrokers) != "":
		r.Brokers, r.BrokersSource = splitList(getenv(EnvBrokers)), SourceEnv
		if p != nil && len(p.Brokers) > 0 && (src == SourceFlag || src == SourceArgument) {
			r.Warnings = append(r.Warnings, fmt.Sprintf("%s overrides the brokers of profile %q; unset it to use the profile's, or give --brokers", EnvBrokers, name))
		}
	case p != nil && len(p.Brokers) > 0:
		r.Brokers, r.BrokersSource = p.Brokers, SourceProfile
	default:
		r.Brokers, r.BrokersSource = []string{DefaultBrokers}, SourceDefault
	}
	if len(r.Brokers) == 0 {
		return nil, exitcode.Usagef("no broker address given (--brokers or %s holds only commas and spaces): give host:port, comma-separated", EnvBrokers)
	}
	if c := ResolveMQTT("", MQTTEnv(getenv), r.MQTTProfile()); c.URL != "" || c.CAFile != "" || c.CertFile != "" || c.KeyFile != "" {
		r.MQTTConn = c
	}
	return r, nil
}

func splitList(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}
