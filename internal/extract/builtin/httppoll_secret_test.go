package builtin_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/flecht-dev/flecht/internal/attr"
	"github.com/flecht-dev/flecht/internal/extract"
	"github.com/flecht-dev/flecht/internal/extract/builtin"
	"github.com/flecht-dev/flecht/internal/metrics"
	"github.com/flecht-dev/flecht/internal/secret"
	"github.com/flecht-dev/flecht/internal/stage"
)

// memPage collects what Poll emits, without Kafka.
type memPage struct{ msgs []stage.Message }

func (p *memPage) Message(m stage.Message)                 { p.msgs = append(p.msgs, m) }
func (p *memPage) State(context.Context, attr.State) error { return nil }

// pollOnce runs one Poll of a config against the feed at url.
func pollOnce(t *testing.T, h *builtin.HTTPPoll, url string, headers map[string]string) (*memPage, error) {
	t.Helper()
	raw, _ := json.Marshal(map[string]any{"url": url, "output_topic": "items.raw", "headers": headers,
		"items": "data.items", "id": "id", "cursor_param": "after", "next_cursor": "next", "max_pages": 1})
	cfg, _, err := attr.Decode[attr.Config](raw)
	if err != nil {
		t.Fatal(err)
	}
	page := &memPage{}
	return page, h.Poll(context.Background(), "feed", cfg, attr.State{}, page)
}

func sealed(t *testing.T, kr *secret.Keyring, plain, scope string) string {
	t.Helper()
	tok, err := kr.Encrypt([]byte(`"`+plain+`"`), scope)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// A header declared in secret_fields with a scope opens tokens of that
// scope (and unscoped ones: the ratchet), refuses other scopes and
// plaintext, and every decrypt counts in secret_decrypts_total{scope,kid}.
// An undeclared header is an unscoped field: a scoped token is refused.
func TestHTTPPollSecretHeadersUseTheirScope(t *testing.T) {
	srv := httptest.NewServer(&feed{total: 5, failAt: -1})
	defer srv.Close()
	kr, err := secret.NewKeyring("k1")
	if err != nil {
		t.Fatal(err)
	}
	obs := metrics.New(nil)
	scoped, err := builtin.NewHTTPPoll(builtin.HTTPPollOptions{Keyring: kr, Observer: obs,
		SecretFields: []string{"headers.X-Api-Key:api", "notes"}})
	if err != nil {
		t.Fatal(err)
	}
	plain, err := builtin.NewHTTPPoll(builtin.HTTPPollOptions{Keyring: kr, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		h     *builtin.HTTPPoll
		value string
		want  secret.Kind // "" for success
	}{
		{"scoped token, declared scope", scoped, sealed(t, kr, "s3cret", "api"), ""},
		{"unscoped token, scoped field", scoped, sealed(t, kr, "s3cret", ""), ""},
		{"other scope", scoped, sealed(t, kr, "s3cret", "billing"), secret.KindScopeViolation},
		{"plaintext in a declared field", scoped, "s3cret", secret.KindPlaintext},
		{"scoped token, undeclared header", plain, sealed(t, kr, "s3cret", "api"), secret.KindScopeViolation},
		{"unscoped token, undeclared header", plain, sealed(t, kr, "s3cret", ""), ""},
	} {
		page, err := pollOnce(t, tc.h, srv.URL+"/items", map[string]string{"X-Api-Key": tc.value})
		switch {
		case tc.want == "" && (err != nil || len(page.msgs) != 5):
			t.Errorf("%s: %d items, %v", tc.name, len(page.msgs), err)
		case tc.want != "" && (!extract.IsConfigError(err) || secret.KindOf(err) != tc.want):
			t.Errorf("%s: %v (kind %q), want a config error of kind %s", tc.name, err, secret.KindOf(err), tc.want)
		}
	}
	for scope, want := range map[string]float64{"api": 2, "": 1} {
		if got := metrics.Value(obs.SecretDecrypts.WithLabelValues(scope, "k1")); got != want {
			t.Errorf("secret_decrypts_total{scope=%q,kid=k1} = %v, want %v", scope, got, want)
		}
	}
}

// A header secret must be one value: a list or a nested path under
// headers is refused when the stage starts.
func TestHTTPPollRefusesSecretFieldsNoHeaderCanHold(t *testing.T) {
	for _, spec := range []string{"headers.X-Api-Key[]", "headers.X-Api-Key.inner:api"} {
		if _, err := builtin.NewHTTPPoll(builtin.HTTPPollOptions{SecretFields: []string{spec}}); err == nil || !strings.Contains(err.Error(), "headers.NAME") {
			t.Errorf("%s: %v", spec, err)
		}
	}
}

// headerLog records the headers each request arrived with.
type headerLog struct {
	mu   sync.Mutex
	seen []http.Header
}

func (l *headerLog) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l.mu.Lock()
		l.seen = append(l.seen, r.Header.Clone())
		l.mu.Unlock()
		next.ServeHTTP(w, r)
	})
}

// A redirect to another host drops the configured headers, the API key
// first among them, and keeps Accept; a redirect on the same host keeps
// them.
func TestHTTPPollRedirectsKeepHeadersOnTheSameHostOnly(t *testing.T) {
	other := &headerLog{}
	elsewhere := httptest.NewServer(other.wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"data":{"items":[{"id":"x-1"}]}}`))
	})))
	defer elsewhere.Close()
	mux := http.NewServeMux()
	mux.Handle("/items", &feed{total: 5, failAt: -1})
	mux.Handle("/old", http.RedirectHandler("/items", http.StatusMovedPermanently))
	mux.Handle("/moved", http.RedirectHandler(elsewhere.URL+"/items", http.StatusFound))
	api := httptest.NewServer(mux)
	defer api.Close()

	kr, err := secret.NewKeyring("k1")
	if err != nil {
		t.Fatal(err)
	}
	h, err := builtin.NewHTTPPoll(builtin.HTTPPollOptions{Keyring: kr})
	if err != nil {
		t.Fatal(err)
	}
	headers := map[string]string{"X-Api-Key": sealed(t, kr, "s3cret", ""), "X-Tenant": "t1"}

	// Same host: the feed checks the key, so the items prove it arrived.
	if page, err := pollOnce(t, h, api.URL+"/old", headers); err != nil || len(page.msgs) != 5 {
		t.Fatalf("same-host redirect: %d items, %v", len(page.msgs), err)
	}
	if page, err := pollOnce(t, h, api.URL+"/moved", headers); err != nil || len(page.msgs) != 1 {
		t.Fatalf("cross-host redirect: %d items, %v", len(page.msgs), err)
	}
	other.mu.Lock()
	defer other.mu.Unlock()
	if len(other.seen) != 1 {
		t.Fatalf("the other host got %d requests", len(other.seen))
	}
	got := other.seen[0]
	if got.Get("X-Api-Key") != "" || got.Get("X-Tenant") != "" || got.Get("Referer") != "" {
		t.Errorf("configured headers followed the redirect to another host: %v", got)
	}
	if got.Get("Accept") != "application/json" {
		t.Errorf("Accept %q after the redirect", got.Get("Accept"))
	}
}

// A header declared signed (headers.NAME:scope:signed) sends the value a
// signature for its scope vouches for, and refuses an unsigned value or one
// signed for another scope; one declared encrypted-signed needs a token of
// a signed value, both checked.
func TestHTTPPollSignedHeaders(t *testing.T) {
	srv := httptest.NewServer(&feed{total: 5, failAt: -1})
	defer srv.Close()
	kr, err := secret.NewKeyring("k1")
	if err == nil {
		kr, err = kr.Generate("s1", secret.TypeEd25519, []string{"api", "other"})
	}
	if err == nil {
		kr, err = kr.SetSigningFor("api", "s1")
	}
	if err == nil {
		kr, err = kr.SetSigningFor("other", "s1")
	}
	if err != nil {
		t.Fatal(err)
	}
	sign := func(plain, scope string) string {
		tok, err := kr.Sign([]byte(`"`+plain+`"`), scope)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	poller := func(spec string) *builtin.HTTPPoll {
		h, err := builtin.NewHTTPPoll(builtin.HTTPPollOptions{Keyring: kr, SecretFields: []string{spec}})
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	signed, both := poller("headers.X-Api-Key:api:signed"), poller("headers.X-Api-Key:api:encrypted-signed")
	sealSigned := func(plain string) string {
		b, _ := json.Marshal(sign(plain, "api"))
		return mustSeal(t, kr, string(b), "api")
	}
	for _, tc := range []struct {
		name  string
		h     *builtin.HTTPPoll
		value string
		want  secret.Kind
	}{
		{"signed for its scope", signed, sign("s3cret", "api"), ""},
		{"unsigned", signed, "s3cret", secret.KindUnsigned},
		{"signed for another scope", signed, sign("s3cret", "other"), secret.KindScopeViolation},
		{"sealed and signed", both, sealSigned("s3cret"), ""},
		{"sealed, not signed", both, sealed(t, kr, "s3cret", "api"), secret.KindUnsigned},
		{"signed, not sealed", both, sign("s3cret", "api"), secret.KindPlaintext},
	} {
		page, err := pollOnce(t, tc.h, srv.URL+"/items", map[string]string{"X-Api-Key": tc.value})
		switch {
		case tc.want == "" && (err != nil || len(page.msgs) != 5):
			t.Errorf("%s: %d items, %v", tc.name, len(page.msgs), err)
		case tc.want != "" && (!extract.IsConfigError(err) || secret.KindOf(err) != tc.want):
			t.Errorf("%s: %v (kind %q), want a config error of kind %s", tc.name, err, secret.KindOf(err), tc.want)
		}
	}
}

func mustSeal(t *testing.T, kr *secret.Keyring, payload, scope string) string {
	t.Helper()
	tok, err := kr.Encrypt([]byte(payload), scope)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}
