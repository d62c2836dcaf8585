// Package builtin holds flecht's built-in extractors.
package builtin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/flecht-dev/flecht/internal/attr"
	"github.com/flecht-dev/flecht/internal/extract"
	"github.com/flecht-dev/flecht/internal/secret"
	"github.com/flecht-dev/flecht/internal/stage"
	"github.com/flecht-dev/flecht/internal/stagefile"
)

// Fields of an http-poll config record.
var (
	hpURL         = attr.New("url", attr.STR)
	hpOutput      = attr.New("output_topic", attr.STR)
	hpHeaders     = attr.New("headers", attr.DICT(attr.STR)).Optional()
	hpItems       = attr.New("items", attr.STR).Optional()
	hpID          = attr.New("id", attr.STR)
	hpCursorParam = attr.New("cursor_param", attr.STR).Optional()
	hpNextCursor  = attr.New("next_cursor", attr.STR).Optional()
	hpMaxPages    = attr.New("max_pages", attr.INT).Optional()
)

// Its state: the cursor that fetches what comes after the last committed
// page, and, when the API's last page named no next cursor, the ids of that
// page's items already sent. Many APIs end a feed that way and fill the same
// page as items arrive, so it is fetched again next cycle and only the new
// items go out; the ids are cleared once a next cursor moves past the page.
var (
	hpCursor = attr.New("cursor", attr.STR)
	hpSeen   = attr.New("seen", attr.LIST(attr.STR)).Optional()
)

// Fields of an extracted record: the item verbatim plus ingestion metadata.
var (
	outData          = attr.New("data", attr.ANY)
	outFetchedAt     = attr.New("fetched_at", attr.DATETIME)
	outSource        = attr.New("source", attr.STR)
	outConfigKey     = attr.New("config_key", attr.STR)
	outSchemaVersion = attr.New("schema_version", attr.INT)
)

// HTTPPoll pages through a JSON API: one page per response, the cursor in
// state. Secret header values are flenc:jwe: tokens opened with the keyring.
type HTTPPoll struct {
	Client *http.Client
	Now    func() time.Time

	keyring *secret.Keyring
	// secretHeaders reads the headers declared in secret_fields, each as
	// a strict field of its scope and mode (ENCRYPTED, SIGNED or
	// ENCRYPTED(SIGNED)); unscoped opens any other header that holds a
	// token.
	secretHeaders map[string]attr.Codec[string]
	unscoped      attr.Codec[string]
}

// HTTPPollOptions configure the http-poll extractor.
type HTTPPollOptions struct {
	// Keyring opens encrypted header values (--keyring); nil refuses them.
	Keyring *secret.Keyring
	// SecretFields are the stage's secret_fields. A header declared as
	// headers.NAME[:scope[:mode]] (NAME exactly as the config record
	// spells it) must hold what its mode says: a token opened with that
	// scope (encrypted), a signed value verified for it (signed), or a
	// token of a signed value, both checked (encrypted-signed). Fields
	// outside headers are not read by http-poll and are left to scan and
	// sweep.
	SecretFields []string
	// Observer counts decrypts (flechtwerk_secret_decrypts_total{scope,kid}).
	Observer secret.Observer
}

// NewHTTPPoll returns the http-poll extractor. Its client follows at most
// 10 redirects and drops the configured headers on a redirect to another
// host (see keepHeadersOnSameHost).
func NewHTTPPoll(o HTTPPollOptions) (*HTTPPoll, error) {
	kr, obs := secret.WithKeyring(o.Keyring), secret.WithObserver(o.Observer)
	codec := func(scope string, mode stagefile.SecretMode) attr.Codec[string] {
		switch mode {
		case stagefile.ModeSigned:
			return secret.SIGNED(attr.STR, scope, kr, obs)
		case stagefile.ModeEncryptedSigned:
			return secret.ENCRYPTED[string](secret.SIGNED(attr.STR, scope, kr, obs), secret.Scope(scope), kr, obs)
		}
		return secret.ENCRYPTED(attr.STR, secret.Scope(scope), kr, obs)
	}
	h := &HTTPPoll{
		Client: &http.Client{Timeout: 30 * time.Second, CheckRedirect: keepHeadersOnSameHost},
		Now:    time.Now, keyring: o.Keyring, secretHeaders: map[string]attr.Codec[string]{}, unscoped: codec("", stagefile.ModeEncrypted),
	}
	for _, spec := range o.SecretFields {
		f, err := stagefile.ParseSecretField(spec)
		if err != nil {
			return nil, fmt.Errorf("secret_fields: %w", err)
		}
		if f.Path[0] != "headers" || len(f.Path) == 1 {
			continue
		}
		if len(f.Path) > 2 || f.List {
			return nil, fmt.Errorf("secret_fields: %q: a header holds one value; declare it as headers.NAME[:scope]", spec)
		}
		h.secretHeaders[f.Path[1]] = codec(f.Scope, f.Mode)
	}
	return h, nil
}

// keepHeadersOnSameHost is the redirect policy. Go's client sends every
// header of the first request again on a redirect, custom ones such as
// X-Api-Key included (it strips only Authorization and Cookie), so a
// redirect to another host, or from https to http, keeps only Accept: the
// API key is never sent where the config did not point. A source that
// needs its key after such a redirect answers 401, reported for its config.
func keepHeadersOnSameHost(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	first := via[0]
	downgrade := first.URL.Scheme == "https" && req.URL.Scheme != "https"
	if strings.EqualFold(req.URL.Host, first.URL.Host) && !downgrade {
		return nil
	}
	req.Header = http.Header{"Accept": first.Header.Values("Accept")}
	return nil
}

type hpConfig struct {
	url             *url.URL
	output          string
	headers         map[string]string
	items, id, next []string
	cursorParam     string
	maxPages        int64
}

func (h *HTTPPoll) parse(key string, c attr.Config) (*hpConfig, error) {
	bad := func(err error) (*hpConfig, error) { return nil, &extract.ConfigError{ConfigKey: key, Err: err} }
	raw, err := hpURL.MustGet(c)
	if err != nil {
		return bad(err)
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return bad(fmt.Errorf("url: want an http(s) URL"))
	}
	cfg := &hpConfig{url: u, cursorParam: "cursor", maxPages: 100, headers: map[string]string{}}
	if cfg.output, err = hpOutput.MustGet(c); err != nil {
		return bad(err)
	}
	if cfg.output == "" {
		return bad(errors.New("output_topic is empty: name the topic the items go to"))
	}
	id, err := hpID.MustGet(c)
	if err != nil {
		return bad(err)
	}
	cfg.id = attr.SplitPath(id)
	if v, ok, err := hpItems.Get(c); err != nil {
		return bad(err)
	} else if ok && v != "" {
		cfg.items = attr.SplitPath(v)
	}
	if v, ok, err := hpNextCursor.Get(c); err != nil {
		return bad(err)
	} else if ok && v != "" {
		cfg.next = attr.SplitPath(v)
	}
	if v, ok, err := hpCursorParam.Get(c); err != nil {
		return bad(err)
	} else if ok && v != "" {
		cfg.cursorParam = v
	}
	if v, ok, err := hpMaxPages.Get(c); err != nil {
		return bad(err)
	} else if ok && v > 0 {
		cfg.maxPages = v
	}
	headers, _, err := hpHeaders.Get(c)
	if err != nil {
		return bad(err)
	}
	// In name order, so a config with two bad headers reports the same
	// one each cycle (and is logged once).
	for _, name := range slices.Sorted(maps.Keys(headers)) {
		if cfg.headers[name], err = h.header(name, headers[name]); err != nil {
			return bad(err)
		}
	}
	return cfg, nil
}

// header opens one header value. A header declared in secret_fields is a
// strict field of its scope and mode (plaintext or an unsigned value there
// is refused, as in any strict field); any other header holding a token is
// opened as an unscoped field, and a plain value is sent as it is.
func (h *HTTPPoll) header(name, v string) (string, error) {
	codec, declared := h.secretHeaders[name]
	if !declared {
		if !secret.IsEncrypted(v) {
			return v, nil
		}
		codec = h.unscoped
	}
	if (secret.IsEncrypted(v) || secret.IsSigned(v)) && h.keyring == nil {
		return "", fmt.Errorf("header %q holds an encrypted or signed value: start flecht with --keyring", name)
	}
	plain, err := codec.Decode(v)
	if err != nil {
		return "", fmt.Errorf("header %q: %w", name, err)
	}
	return plain, nil
}

// Poll fetches pages from the stored cursor on: each response is one page,
// committed with the next cursor before the next request. A page without a
// next cursor past it is the feed's tail: its new items commit with their
// ids, and the tail is fetched again next cycle.
func (h *HTTPPoll) Poll(ctx context.Context, key string, c attr.Config, st attr.State, page extract.Page) error {
	cfg, err := h.parse(key, c)
	if err != nil {
		return err
	}
	cursor, _, err := hpCursor.Get(st)
	if err != nil {
		return fmt.Errorf("state cursor: %w", err)
	}
	seenList, _, err := hpSeen.Get(st)
	if err != nil {
		return fmt.Errorf("state seen ids: %w", err)
	}
	seen := make(map[string]bool, len(seenList))
	for _, id := range seenList {
		seen[id] = true
	}
	source := cfg.url.Scheme + "://" + cfg.url.Host + cfg.url.Path
	for n := int64(0); n < cfg.maxPages; n++ {
		body, err := h.fetch(ctx, key, cfg, cursor)
		if err != nil {
			return err
		}
		items, next, err := cfg.pageOf(key, body)
		if err != nil {
			return err
		}
		fetched := h.Now().UTC()
		var sent []string
		for i, item := range items {
			idv, ok := attr.At(asRecord(item), cfg.id)
			id, isText := attr.ScalarText(idv)
			if !ok || !isText || id == "" {
				return &extract.ConfigError{ConfigKey: key, Err: fmt.Errorf("item %d of the page has no id at %s", i, strings.Join(cfg.id, "."))}
			}
			if seen[id] {
				continue // sent from this page in an earlier cycle
			}
			ev, err := attr.Build[attr.Event](outData.Of(item), outFetchedAt.Of(fetched), outSource.Of(source), outConfigKey.Of(key), outSchemaVersion.Of(1))
			if err != nil {
				return err
			}
			page.Message(stage.Message{Topic: cfg.output, Key: id, Value: ev})
			seen[id] = true
			sent = append(sent, id)
		}
		if next != "" && next != cursor {
			ns, err := st.With(hpCursor.Of(next), hpSeen.Delete())
			if err != nil {
				return err
			}
			if err := page.State(ctx, ns); err != nil {
				return err
			}
			st, cursor, seenList, seen = ns, next, nil, map[string]bool{}
			continue
		}
		// The tail: nothing past it yet.
		if len(sent) == 0 {
			return nil
		}
		ids := append(seenList, sent...)
		if len(ids) > maxTailIDs {
			return &extract.ConfigError{ConfigKey: key, Err: fmt.Errorf("the page at the cursor has grown past %d items without naming a next cursor; set next_cursor or lower the API's page size", maxTailIDs)}
		}
		ns, err := st.With(hpCursor.Of(cursor), hpSeen.Of(ids))
		if err != nil {
			return err
		}
		return page.State(ctx, ns)
	}
	return nil
}

// maxTailIDs bounds the ids kept for a tail page (one page's items, so far
// more than any API's page size), keeping the state record small.
const maxTailIDs = 10000

// fetch GETs one page. Timeouts and 5xx are errors that stop the stage
// (let it crash); a 4xx is a ConfigError, reported with the status.
func (h *HTTPPoll) fetch(ctx context.Context, key string, cfg *hpConfig, cursor string) ([]byte, error) {
	u := *cfg.url
	if cursor != "" {
		q := u.Query()
		q.Set(cfg.cursorParam, cursor)
		u.RawQuery = q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, &extract.ConfigError{ConfigKey: key, Err: err}
	}
	req.Header.Set("Accept", "application/json")
	for k, v := range cfg.headers {
		req.Header.Set(k, v)
	}
	resp, err := h.Client.Do(req)
	if err != nil {
		// The URL may carry the cursor; never the headers.
		return nil, fmt.Errorf("GET %s: %w", cfg.url.Redacted(), err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("GET %s: reading body: %w", cfg.url.Redacted(), err)
	}
	switch {
	case resp.StatusCode >= 500:
		return nil, fmt.Errorf("GET %s: %s", cfg.url.Redacted(), resp.Status)
	case resp.StatusCode >= 400:
		return nil, &extract.ConfigError{ConfigKey: key, Err: fmt.Errorf("GET %s: %s: %s", cfg.url.Redacted(), resp.Status, snippet(body))}
	case resp.StatusCode != http.StatusOK:
		return nil, &extract.ConfigError{ConfigKey: key, Err: fmt.Errorf("GET %s: unexpected %s", cfg.url.Redacted(), resp.Status)}
	}
	return body, nil
}

// pageOf finds the items and the next cursor in a response.
func (cfg *hpConfig) pageOf(key string, body []byte) ([]any, string, error) {
	doc, err := attr.ParseJSON(body)
	if err != nil {
		return nil, "", &extract.ConfigError{ConfigKey: key, Err: fmt.Errorf("response is not JSON: %w", err)}
	}
	itemsV := doc
	if cfg.items != nil {
		v, ok := attr.At(asRecord(doc), cfg.items)
		if !ok {
			return nil, "", &extract.ConfigError{ConfigKey: key, Err: fmt.Errorf("response has no %s", strings.Join(cfg.items, "."))}
		}
		itemsV = v
	}
	items, ok := itemsV.([]any)
	if !ok && itemsV != nil {
		return nil, "", &extract.ConfigError{ConfigKey: key, Err: errors.New("the items are not a JSON array")}
	}
	next := ""
	if cfg.next != nil {
		if v, ok := attr.At(asRecord(doc), cfg.next); ok {
			next, _ = attr.ScalarText(v)
		}
	}
	return items, next, nil
}

// asRecord views a decoded JSON value as a record for path lookups.
func asRecord(v any) attr.Record {
	m, _ := v.(map[string]any)
	r, _ := attr.Wrap[attr.Record](m)
	return r
}

func snippet(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}
