package kafkax

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"

	"github.com/flecht-dev/flecht/internal/profile"
	"github.com/flecht-dev/flecht/internal/tlsclient"
)

// TokenSource fetches OAUTHBEARER tokens with the OAuth client-credentials
// grant and caches each until 80% of its lifetime has passed. franz-go
// asks for a token on every new connection and every re-authentication
// (the broker bounds a session by the token's expiry and
// connections.max.reauth.ms), so an idle connection that wakes after the
// token expired re-authenticates with a fresh one. A failed refresh while
// the cached token is still valid hands out the cached one.
type TokenSource struct {
	URL      string
	ClientID string
	Scope    string
	secret   string
	http     *http.Client
	peer     tlsclient.Peer
	now      func() time.Time

	mu        sync.Mutex
	token     string
	refreshAt time.Time
	expiresAt time.Time
}

// tokenTimeout bounds one request to the token endpoint.
const tokenTimeout = 10 * time.Second

// defaultTokenLifetime is assumed for a token that states no lifetime
// (no expires_in, no readable exp claim).
const defaultTokenLifetime = time.Minute

// NewTokenSource builds the token source of a profile's sasl.oauth block,
// reading the client secret and the CA file now.
func NewTokenSource(o *profile.OAuth, getenv func(string) string) (*TokenSource, error) {
	secret, err := o.ResolveSecret(getenv)
	if err != nil {
		return nil, err
	}
	tc, err := tlsclient.Config(tlsclient.Files{CAFile: o.CAFile}, "")
	if err != nil {
		return nil, fmt.Errorf("sasl.oauth.ca_file: %w", err)
	}
	tr := &http.Transport{
		TLSClientConfig:     tc,
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         (&net.Dialer{Timeout: DefaultDialTimeout}).DialContext,
		TLSHandshakeTimeout: DefaultDialTimeout,
		MaxIdleConns:        1,
		IdleConnTimeout:     time.Minute,
	}
	return &TokenSource{
		URL: o.TokenURL, ClientID: o.ClientID, Scope: o.Scope, secret: secret,
		http: &http.Client{Transport: tr, Timeout: tokenTimeout,
			// A redirect would carry the client's credentials elsewhere.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		peer: tlsclient.Peer{
			Name:     "the OAuth token endpoint",
			Files:    tlsclient.Files{CAFile: o.CAFile},
			CAHint:   "the profile's sasl.oauth.ca_file",
			CertHint: "(a client certificate is not offered for the token endpoint)",
		},
		now: time.Now,
	}, nil
}

// Mechanism is the OAUTHBEARER SASL mechanism drawing on the source.
func (s *TokenSource) Mechanism() sasl.Mechanism {
	return oauth.Oauth(func(ctx context.Context) (oauth.Auth, error) {
		tok, err := s.Token(ctx)
		if err != nil {
			return oauth.Auth{}, err
		}
		return oauth.Auth{Token: tok}, nil
	})
}

// Token returns a cached token, or fetches one when none is cached or the
// cached one has passed 80% of its lifetime.
func (s *TokenSource) Token(ctx context.Context) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if s.token != "" && now.Before(s.refreshAt) {
		return s.token, nil
	}
	tok, life, err := s.fetch(ctx)
	if err != nil {
		if s.token != "" && now.Before(s.expiresAt) {
			return s.token, nil
		}
		return "", err
	}
	s.token, s.refreshAt, s.expiresAt = tok, now.Add(life*8/10), now.Add(life)
	return tok, nil
}

// TokenError says the token endpoint did not give a token. It names the
// endpoint and the client id, never the secret.
type TokenError struct {
	URL      string
	ClientID string
	Status   int    // the HTTP status, 0 when there was no answer
	Code     string // the OAuth error code ("invalid_client"), if any
	Err      error
}

func (e *TokenError) Error() string {
	var what, fix string
	switch {
	case e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden || e.Code == "invalid_client" || e.Code == "unauthorized_client":
		what = fmt.Sprintf("refused client %s (HTTP %d%s)", e.ClientID, e.Status, codeSuffix(e.Code))
		fix = "check the profile's sasl.oauth.client_id and the secret in sasl.oauth.client_secret_env or client_secret_file"
	case e.Code == "invalid_scope":
		what = fmt.Sprintf("refused the scope (HTTP %d, invalid_scope)", e.Status)
		fix = "check the profile's sasl.oauth.scope"
	case e.Status != 0:
		what = fmt.Sprintf("answered HTTP %d%s", e.Status, codeSuffix(e.Code))
		fix = "check the profile's sasl.oauth.token_url"
	default:
		what = fmt.Sprintf("gave no token: %v", e.Err)
		fix = "check the profile's sasl.oauth.token_url"
		if _, ok := errors.AsType[*tlsclient.Error](e.Err); ok {
			fix = "" // the TLS explanation says what to change
		}
	}
	msg := fmt.Sprintf("OAuth token endpoint %s %s", e.URL, what)
	if fix != "" {
		msg += "; " + fix
	}
	return msg
}

func (e *TokenError) Unwrap() error { return e.Err }

func codeSuffix(code string) string {
	if code == "" {
		return ""
	}
	return ", " + code
}

// tokenBodyLimit bounds a token endpoint's answer.
const tokenBodyLimit = 64 << 10

func (s *TokenSource) fetch(ctx context.Context) (string, time.Duration, error) {
	fail := func(status int, code string, err error) (string, time.Duration, error) {
		return "", 0, &TokenError{URL: s.URL, ClientID: s.ClientID, Status: status, Code: code, Err: err}
	}
	form := url.Values{"grant_type": {"client_credentials"}}
	if s.Scope != "" {
		form.Set("scope", s.Scope)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL, strings.NewReader(form.Encode()))
	if err != nil {
		return fail(0, "", err)
	}
	// RFC 6749 §2.3.1: the id and secret form-encoded, then HTTP Basic.
	req.SetBasicAuth(url.QueryEscape(s.ClientID), url.QueryEscape(s.secret))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	resp, err := s.http.Do(req)
	if err != nil {
		// url.Error quotes the URL, which holds no secret (validated).
		return fail(0, "", tlsclient.ExplainHandshake(err, s.peer))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, tokenBodyLimit))
	if err != nil {
		return fail(resp.StatusCode, "", err)
	}
	var tr struct {
		AccessToken string          `json:"access_token"`
		TokenType   string          `json:"token_type"`
		ExpiresIn   json.RawMessage `json:"expires_in"`
		Error       string          `json:"error"`
	}
	jerr := json.Unmarshal(body, &tr)
	if resp.StatusCode != http.StatusOK {
		return fail(resp.StatusCode, printableCode(tr.Error), errors.New(http.StatusText(resp.StatusCode)))
	}
	if jerr != nil || tr.AccessToken == "" {
		return fail(resp.StatusCode, "", errors.New("the answer holds no access_token"))
	}
	if tr.TokenType != "" && !strings.EqualFold(tr.TokenType, "bearer") {
		return fail(resp.StatusCode, "", fmt.Errorf("the token is of type %s, not Bearer", printableCode(tr.TokenType)))
	}
	return tr.AccessToken, tokenLifetime(tr.ExpiresIn, tr.AccessToken, s.now()), nil
}

// maxTokenLifetime caps what a token endpoint may claim: a day, so the
// refresh arithmetic cannot overflow and a token is fetched anew daily.
const maxTokenLifetime = 24 * time.Hour

// tokenLifetime is expires_in (a number, or a string of one, as some
// servers send it), else the JWT's exp claim, else defaultTokenLifetime;
// at most maxTokenLifetime.
func tokenLifetime(expiresIn json.RawMessage, token string, now time.Time) time.Duration {
	return min(claimedLifetime(expiresIn, token, now), maxTokenLifetime)
}

func claimedLifetime(expiresIn json.RawMessage, token string, now time.Time) time.Duration {
	if len(expiresIn) > 0 {
		var n json.Number
		if err := json.Unmarshal(expiresIn, &n); err == nil {
			if secs, err := n.Int64(); err == nil && secs > 0 && secs < 1<<31 {
				return time.Duration(secs) * time.Second
			}
		} else {
			var s string
			if json.Unmarshal(expiresIn, &s) == nil {
				if secs, err := json.Number(s).Int64(); err == nil && secs > 0 && secs < 1<<31 {
					return time.Duration(secs) * time.Second
				}
			}
		}
	}
	if parts := strings.Split(token, "."); len(parts) == 3 {
		if raw, err := base64.RawURLEncoding.DecodeString(parts[1]); err == nil {
			var claims struct {
				Exp int64 `json:"exp"`
			}
			if json.Unmarshal(raw, &claims) == nil && claims.Exp > 0 {
				if d := time.Unix(claims.Exp, 0).Sub(now); d > 0 {
					return d
				}
			}
		}
	}
	return defaultTokenLifetime
}

// printableCode keeps an OAuth error code fit to print: short, and of
// the characters RFC 6749 allows in one.
func printableCode(s string) string {
	if len(s) > 64 {
		return "(an overlong error code)"
	}
	for _, r := range s {
		if r < 0x20 || r > 0x7e || r == '"' || r == '\\' {
			return "(an unprintable error code)"
		}
	}
	return s
}
