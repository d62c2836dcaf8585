package profile

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/flecht-dev/flecht/internal/boundedread"
)

// ParseMQTTURL checks an MQTT broker URL: scheme mqtt or tcp (plain),
// mqtts, ssl or tls (TLS), a host, and no password. A password in a URL
// shows in process lists, shell history and every message that quotes the
// URL, so it is refused, and errors never quote the text (it may hold one):
// the password comes from password_env or password_file instead. A user
// name in the URL is fine.
func ParseMQTTURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, errors.New("the MQTT URL is not a valid URL (want mqtt://host:port or mqtts://host:port)")
	}
	if _, ok := u.User.Password(); ok {
		return nil, errors.New("the MQTT URL must not hold a password: set the user name and password_env or password_file (stage file mqtt:, or the profile) instead")
	}
	switch strings.ToLower(u.Scheme) {
	case "mqtt", "tcp", "mqtts", "ssl", "tls":
	default:
		return nil, fmt.Errorf("MQTT URL scheme %s is not supported: use mqtt, tcp, mqtts, ssl or tls (mqtt://host:port)", boundedread.Quote(u.Scheme))
	}
	if u.Hostname() == "" {
		return nil, errors.New("the MQTT URL has no host (want mqtt://host:port)")
	}
	return u, nil
}

// MQTTURLSecure reports whether u asks for TLS.
func MQTTURLSecure(u *url.URL) bool {
	switch strings.ToLower(u.Scheme) {
	case "mqtts", "ssl", "tls":
		return true
	}
	return false
}
