package profile

// Summary is one line of `flecht profile list`. Every key is
// always present ("" for no SASL or MQTT): a stable schema for scripts.
type Summary struct {
	Name    string   `json:"name"`
	Current bool     `json:"current"`
	Brokers []string `json:"brokers"`
	TLS     bool     `json:"tls"`
	SASL    string   `json:"sasl"`
	MQTT    string   `json:"mqtt"`
}

// List is the output of `flecht profile list`.
type List struct {
	ConfigPath  string    `json:"config_path"`
	ConfigFound bool      `json:"config_found"`
	Profiles    []Summary `json:"profiles"`
}

// List summarises the file's profiles (read from path; found: the file
// exists), marking current, the profile in use.
func (f *File) List(path string, found bool, current string) List {
	out := List{ConfigPath: path, ConfigFound: found, Profiles: []Summary{}}
	for _, name := range f.Names() {
		p := f.Profiles[name]
		s := Summary{Name: name, Current: name == current, Brokers: nonNil(p.Brokers), TLS: p.TLS != nil && p.TLS.Enabled}
		if p.SASL != nil {
			s.SASL = p.SASL.Mechanism
		}
		if p.MQTT != nil {
			s.MQTT = RedactURL(p.MQTT.URL)
		}
		out.Profiles = append(out.Profiles, s)
	}
	return out
}

// nonNil makes a missing list [] in JSON, not null.
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
