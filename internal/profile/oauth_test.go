package profile

import (
	"strings"
	"testing"
)

func TestOAuthBearerProfile(t *testing.T) {
	const ok = `
profiles:
  idp:
    brokers: [kafka:9093]
    tls: {enabled: true}
    sasl:
      mechanism: oauthbearer
      oauth:
        token_url: https://idp.example/oauth2/token
        client_id: flecht-app
        client_secret_env: APP_SECRET
        scope: kafka
`
	f, err := Parse([]byte(ok))
	if err != nil {
		t.Fatal(err)
	}
	s := f.Profiles["idp"].SASL
	if s.Mechanism != MechOAuthBearer || s.OAuth.ClientID != "flecht-app" || s.OAuth.Scope != "kafka" {
		t.Fatalf("parsed %+v %+v", s, s.OAuth)
	}
	sec, err := s.OAuth.ResolveSecret(env(map[string]string{"APP_SECRET": "v"}))
	if err != nil || sec != "v" {
		t.Fatalf("secret %q, %v", sec, err)
	}
	if _, err := s.OAuth.ResolveSecret(env(nil)); err == nil || !strings.Contains(err.Error(), "client_secret_env") {
		t.Fatalf("unset secret env: %v", err)
	}

	for _, c := range []struct{ name, sasl, want string }{
		{"no oauth block", "{mechanism: OAUTHBEARER}", "needs an sasl.oauth block"},
		{"plain http", "{mechanism: OAUTHBEARER, oauth: {token_url: 'http://idp/token', client_id: a, client_secret_env: S}}", "must be https://"},
		{"credentials in URL", "{mechanism: OAUTHBEARER, oauth: {token_url: 'https://a:b@idp/token', client_id: a, client_secret_env: S}}", "carries credentials"},
		{"no client id", "{mechanism: OAUTHBEARER, oauth: {token_url: 'https://idp/token', client_secret_env: S}}", "client_id is required"},
		{"no secret", "{mechanism: OAUTHBEARER, oauth: {token_url: 'https://idp/token', client_id: a}}", "client_secret_env or client_secret_file"},
		{"both secrets", "{mechanism: OAUTHBEARER, oauth: {token_url: 'https://idp/token', client_id: a, client_secret_env: S, client_secret_file: /f}}", "not both"},
		{"username too", "{mechanism: OAUTHBEARER, username: u, oauth: {token_url: 'https://idp/token', client_id: a, client_secret_env: S}}", "do not apply to OAUTHBEARER"},
		{"oauth with SCRAM", "{mechanism: SCRAM-SHA-512, username: u, password_env: P, oauth: {token_url: 'https://idp/token', client_id: a, client_secret_env: S}}", "only to mechanism OAUTHBEARER"},
		{"no token url", "{mechanism: OAUTHBEARER, oauth: {client_id: a, client_secret_env: S}}", "token_url is required"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte("profiles:\n  p:\n    sasl: " + c.sasl + "\n"))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("want an error with %q, got %v", c.want, err)
			}
		})
	}

	// The MQTT block of a profile with OAUTHBEARER is still validated.
	_, err = Parse([]byte(ok + "    mqtt: {url: 'mqtt://u:pw@host'}\n"))
	if err == nil || !strings.Contains(err.Error(), "mqtt") {
		t.Fatalf("mqtt beside OAUTHBEARER not validated: %v", err)
	}
}
