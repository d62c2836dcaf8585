package kafkax

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/flecht-dev/flecht/internal/profile"
	"github.com/flecht-dev/flecht/internal/tlsclient"
	"github.com/flecht-dev/flecht/internal/tlsclient/tlstest"
)

const oauthSecret = "client-s3cret-value"

// tokenEndpoint is an OIDC token endpoint over TLS for the tests: it
// counts the tokens it issued and answers as status says.
type tokenEndpoint struct {
	srv    *httptest.Server
	mu     sync.Mutex
	issued int
	status int // 0: 200 with a token
	form   map[string]string
	user   string
}

func newTokenEndpoint(t *testing.T, pki *tlstest.PKI) *tokenEndpoint {
	t.Helper()
	e := &tokenEndpoint{}
	e.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.mu.Lock()
		defer e.mu.Unlock()
		_ = r.ParseForm()
		id, secret, _ := r.BasicAuth()
		e.user = id
		e.form = map[string]string{"grant_type": r.PostForm.Get("grant_type"), "scope": r.PostForm.Get("scope")}
		w.Header().Set("Content-Type", "application/json")
		if e.status != 0 || secret != oauthSecret {
			code := e.status
			if code == 0 {
				code = http.StatusUnauthorized
			}
			w.WriteHeader(code)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": "invalid_client"})
			return
		}
		e.issued++
		_ = json.NewEncoder(w).Encode(map[string]any{"access_token": fmt.Sprintf("token-%d", e.issued), "token_type": "Bearer", "expires_in": 100})
	}))
	e.srv.TLS = pki.ServerConfig(pki.Server, false)
	e.srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes are the test's
	e.srv.StartTLS()
	t.Cleanup(e.srv.Close)
	return e
}

func (e *tokenEndpoint) set(status int) { e.mu.Lock(); e.status = status; e.mu.Unlock() }

func oauthProfile(e *tokenEndpoint, pki *tlstest.PKI) *profile.OAuth {
	return &profile.OAuth{TokenURL: e.srv.URL + "/token", ClientID: "flecht-app", SecretEnv: "OAUTH_SECRET", Scope: "kafka", CAFile: pki.CAFile}
}

func secretEnv(k string) string {
	if k == "OAUTH_SECRET" {
		return oauthSecret
	}
	return ""
}

// A token is fetched with the client credentials, cached, fetched anew at
// 80% of its lifetime, and, while the endpoint fails, the cached one is
// used only until it expires.
func TestTokenSourceRefreshesAt80Percent(t *testing.T) {
	pki := tlstest.New(t)
	e := newTokenEndpoint(t, pki)
	ts, err := NewTokenSource(oauthProfile(e, pki), secretEnv)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_700_000_000, 0)
	ts.now = func() time.Time { return now }
	ctx := context.Background()
	get := func(want string) {
		t.Helper()
		tok, err := ts.Token(ctx)
		if err != nil || tok != want {
			t.Fatalf("at %s: token %q, %v; want %q", now.Format(time.TimeOnly), tok, err, want)
		}
	}
	get("token-1")
	if e.user != "flecht-app" || e.form["grant_type"] != "client_credentials" || e.form["scope"] != "kafka" {
		t.Fatalf("request: user %q form %v", e.user, e.form)
	}
	now = now.Add(79 * time.Second)
	get("token-1") // cached: 79% of 100 s
	now = now.Add(2 * time.Second)
	get("token-2") // 81%: refreshed
	e.set(http.StatusServiceUnavailable)
	now = now.Add(90 * time.Second)
	get("token-2") // refresh fails, the cached token is still valid
	now = now.Add(11 * time.Second)
	if tok, err := ts.Token(ctx); err == nil {
		t.Fatalf("an expired token was handed out: %q", tok)
	}
	if e.issued != 2 {
		t.Fatalf("issued %d tokens, want 2", e.issued)
	}
}

// A refusing token endpoint is named with the client id and the setting
// to check; the secret never appears.
func TestTokenErrorNamesTheSetting(t *testing.T) {
	pki := tlstest.New(t)
	e := newTokenEndpoint(t, pki)
	o := oauthProfile(e, pki)
	ts, err := NewTokenSource(o, func(string) string { return "wrong-secret-value" })
	if err != nil {
		t.Fatal(err)
	}
	_, err = ts.Token(context.Background())
	te, ok := errors.AsType[*TokenError](err)
	if !ok || te.Status != http.StatusUnauthorized {
		t.Fatalf("want a TokenError of HTTP 401, got %T %v", err, err)
	}
	for _, w := range []string{o.TokenURL, "refused client flecht-app", "invalid_client", "sasl.oauth.client_id", "client_secret_env"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error lacks %q: %v", w, err)
		}
	}
	if strings.Contains(err.Error(), "wrong-secret-value") {
		t.Errorf("error shows the secret: %v", err)
	}

	// An endpoint whose CA the profile does not name: the TLS advice
	// points at sasl.oauth.ca_file.
	o.CAFile = ""
	ts, err = NewTokenSource(o, secretEnv)
	if err != nil {
		t.Fatal(err)
	}
	_, err = ts.Token(context.Background())
	if tle, ok := errors.AsType[*tlsclient.Error](err); !ok || tle.Problem != tlsclient.UnknownAuthority || !strings.Contains(err.Error(), "sasl.oauth.ca_file") {
		t.Fatalf("want an unknown-authority error naming sasl.oauth.ca_file, got %v", err)
	}
}

func TestTokenLifetime(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	jwt := "e30." + b64url(fmt.Sprintf(`{"exp":%d}`, now.Add(300*time.Second).Unix())) + ".sig"
	for _, c := range []struct {
		in    string
		token string
		want  time.Duration
	}{
		{`3600`, "x", time.Hour},
		{`"120"`, "x", 2 * time.Minute},
		{``, jwt, 5 * time.Minute},
		{`-5`, "x", defaultTokenLifetime},
		{`"soon"`, "x", defaultTokenLifetime},
		{``, "a.!!.c", defaultTokenLifetime},
		{`2000000000`, "x", maxTokenLifetime},
	} {
		if got := tokenLifetime(json.RawMessage(c.in), c.token, now); got != c.want {
			t.Errorf("tokenLifetime(%s, %s) = %s, want %s", c.in, c.token, got, c.want)
		}
	}
}

func b64url(s string) string {
	return strings.TrimRight(strings.NewReplacer("+", "-", "/", "_").Replace(base64Std(s)), "=")
}

// The connection errors that franz-go words its own way come out as one
// line naming the profile setting to change.
func TestConnectErrorsNameTheSetting(t *testing.T) {
	pki := tlstest.New(t)
	e := newTokenEndpoint(t, pki)

	// OAUTHBEARER against a listener that enables only PLAIN and SCRAM.
	sasl := fakeWith(t, kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-512", "flecht", goodPassword))
	err := ping(t, &profile.Resolved{Brokers: sasl, SASL: &profile.SASL{Mechanism: "OAUTHBEARER", OAuth: oauthProfile(e, pki)}}, secretEnv)
	var authErr *AuthError
	if !errors.As(err, &authErr) || !strings.Contains(err.Error(), "does not enable SASL mechanism OAUTHBEARER") || !strings.Contains(err.Error(), "sasl.mechanism") {
		t.Errorf("unsupported mechanism: %T %v", err, err)
	}

	// Plaintext against a TLS listener.
	tlsAddrs := fakeWith(t, kfake.TLS(pki.ServerConfig(pki.Server, false)))
	err = ping(t, &profile.Resolved{Brokers: tlsAddrs}, nil)
	var tlsErr *TLSError
	if !errors.As(err, &tlsErr) || !strings.Contains(err.Error(), "tls.enabled: true") || strings.Contains(err.Error(), "invalid large response size") {
		t.Errorf("plaintext to TLS: %T %v", err, err)
	}

	// A token endpoint that refuses, as the SASL exchange reports it.
	c := &Cluster{Brokers: sasl}
	c.SASL = mustTokenSource(t, oauthProfile(e, pki)).Mechanism()
	te := &TokenError{URL: "https://idp/token", ClientID: "app", Status: 401, Code: "invalid_client", Err: errors.New("Unauthorized")}
	if err := c.explainConnect(fmt.Errorf("broker 1: %w", te)); !errors.As(err, &authErr) || !strings.Contains(err.Error(), "refused client app") || !strings.Contains(err.Error(), "sasl.oauth.client_id") {
		t.Errorf("token refusal: %T %v", err, err)
	}
}

func mustTokenSource(t *testing.T, o *profile.OAuth) *TokenSource {
	t.Helper()
	ts, err := NewTokenSource(o, secretEnv)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

// The client secret file is read at start; an empty one is refused
// naming the setting.
func TestOAuthSecretFile(t *testing.T) {
	pki := tlstest.New(t)
	e := newTokenEndpoint(t, pki)
	o := oauthProfile(e, pki)
	o.SecretEnv, o.SecretFile = "", filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(o.SecretFile, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := NewTokenSource(o, nil); err == nil || !strings.Contains(err.Error(), "sasl.oauth.client_secret_file") {
		t.Fatalf("empty secret file: %v", err)
	}
	if err := os.WriteFile(o.SecretFile, []byte(oauthSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ts, err := NewTokenSource(o, nil)
	if err != nil {
		t.Fatal(err)
	}
	if tok, err := ts.Token(context.Background()); err != nil || tok != "token-1" {
		t.Fatalf("token %q, %v", tok, err)
	}
}

func base64Std(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// The lifetime of whatever a token endpoint answers is positive and never
// a panic.
func FuzzTokenLifetime(f *testing.F) {
	f.Add([]byte(`3600`), "x")
	f.Add([]byte(`"120"`), "e30.eyJleHAiOjE3MDAwMDAzMDB9.sig")
	f.Add([]byte(``), "a.!!.c")
	f.Add([]byte(`1e309`), "..")
	now := time.Unix(1_700_000_000, 0)
	f.Fuzz(func(t *testing.T, expiresIn []byte, token string) {
		if d := tokenLifetime(json.RawMessage(expiresIn), token, now); d <= 0 || d*8/10 <= 0 || d > maxTokenLifetime {
			t.Fatalf("lifetime %s", d)
		}
	})
}
