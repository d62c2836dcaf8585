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
