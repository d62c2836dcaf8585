package profile

import (
	"strings"
	"testing"
)

func TestParseMQTTURL(t *testing.T) {
	for in, secure := range map[string]bool{
		"mqtt://127.0.0.1:1883":    false,
		"tcp://broker":             false,
		"mqtts://broker:8883":      true,
		"SSL://broker":             true,
		"tls://user@broker:8883":   true,
		"mqtt://bridge@[::1]:1883": false,
	} {
		u, err := ParseMQTTURL(in)
		if err != nil || MQTTURLSecure(u) != secure {
			t.Errorf("%s: %v secure=%v", in, err, err == nil && MQTTURLSecure(u))
		}
	}
	// Errors never carry the URL's text when it may hold a secret.
	for in, want := range map[string]string{
		"mqtt://bridge:hunter2@broker:1883": "must not hold a password",
		"mqtt://bridge:hunter2@bro ker":     "not a valid URL",
		"http://bridge:hunter2@broker":      "must not hold a password",
		"http://broker":                     `scheme "http"`,
		"mqtt://":                           "no host",
		"hunter2":                           `scheme ""`,
	} {
		_, err := ParseMQTTURL(in)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", in, err, want)
			continue
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: the error shows the password: %v", in, err)
		}
	}
}
