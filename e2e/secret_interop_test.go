//go:build e2e

package e2e

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/flecht-dev/flecht/internal/attr"
	"github.com/flecht-dev/flecht/internal/secret"
)

// TestSecretTokensOpenWithJose: a keyring file and tokens written by flecht
// are opened by panva jose (internal/secret/testdata/interop/open.mjs), an
// implementation that shares no code with flecht. The reverse direction
// (jose-minted tokens opened by flecht) is a unit test on pinned vectors.
func TestSecretTokensOpenWithJose(t *testing.T) {
	// A rotated keyring: the old key still present, the new one primary.
	kr, err := secret.NewKeyring("e2e-2026-01")
	if err != nil {
		t.Fatal(err)
	}
	oldOnly := kr
	if kr, err = kr.Add("e2e-2026-07"); err != nil {
		t.Fatal(err)
	}
	if kr, err = kr.Promote("e2e-2026-07"); err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	keyringPath := filepath.Join(tmp, "keyring.json")
	if err := kr.Save(keyringPath); err != nil {
		t.Fatal(err)
	}

	type expect struct {
		token, kid, scope, plaintext string
	}
	var want []expect
	add := func(kr *secret.Keyring, scope, payloadJSON string) {
		t.Helper()
		tok, err := kr.Encrypt([]byte(payloadJSON), scope)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, expect{tok, kr.Primary(), scope, payloadJSON})
	}
	// Through the codecs, as a stage writes them.
	field := func(codec attr.Codec[string], v string) string {
		w, err := codec.Encode(v)
		if err != nil {
			t.Fatal(err)
		}
		return w.(string)
	}
	apiKey := secret.ENCRYPTED(attr.STR, secret.Scope("api_key"), secret.WithKeyring(kr))
	want = append(want, expect{field(apiKey, "sk-live-ü😀"), "e2e-2026-07", "api_key", `"sk-live-ü😀"`})
	plain := secret.ENCRYPTED(attr.STR, secret.WithKeyring(kr))
	want = append(want, expect{field(plain, "p@ss\"word\n"), "e2e-2026-07", "", `"p@ss\"word\n"`})
	creds := secret.ENCRYPTED(attr.DICT(attr.ANY), secret.WithKeyring(kr))
	w, err := creds.Encode(map[string]any{"user": "u", "n": json.Number("12345678901234567890"), "ok": true})
	if err != nil {
		t.Fatal(err)
	}
	want = append(want, expect{w.(string), "e2e-2026-07", "", `{"n":12345678901234567890,"ok":true,"user":"u"}`})
	// Straight through the keyring, under the old key and a second scope.
	add(oldOnly, "db_password", `"old-key-value"`)
	add(kr, "tenant/42", `["a","b"]`)

	tokens := make([]string, 0, len(want)+1)
	for _, e := range want {
		tokens = append(tokens, e.token)
	}
	// A negative control: jose must refuse a tampered flecht token, so the
	// test would notice an open.mjs that does not authenticate.
	tampered := []byte(want[0].token)
	last := len(tampered) - 2
	tampered[last] = map[bool]byte{true: 'B', false: 'A'}[tampered[last] == 'A']
	tokens = append(tokens, string(tampered))
	got := joseOpen(t, keyringPath, tokens)
	for i, e := range want {
		g := got[i]
		if g.Error != "" {
			t.Errorf("token %d (kid %s, scope %q): jose refused it: %s", i, e.kid, e.scope, g.Error)
			continue
		}
		if g.Plaintext != e.plaintext {
			t.Errorf("token %d: jose read %q, flecht sealed %q", i, g.Plaintext, e.plaintext)
		}
		wantHeader := map[string]any{"alg": "dir", "enc": "A256GCM", "kid": e.kid}
		if e.scope != "" {
			wantHeader["flenc_scope"] = e.scope
		}
		if gh, _ := json.Marshal(g.Header); string(gh) != mustJSON(wantHeader) {
			t.Errorf("token %d: header %s, want %s", i, gh, mustJSON(wantHeader))
		}
		// And the header bytes themselves are the Python library's form.
		seg := strings.SplitN(strings.TrimPrefix(e.token, secret.Prefix), ".", 2)[0]
		raw, _ := base64.RawURLEncoding.DecodeString(seg)
		wantRaw := `{"alg":"dir","enc":"A256GCM","kid":"` + e.kid + `"`
		if e.scope != "" {
			wantRaw += `,"flenc_scope":"` + e.scope + `"`
		}
		if string(raw) != wantRaw+"}" {
			t.Errorf("token %d: header bytes %s", i, raw)
		}
	}
	if got[len(got)-1].Error == "" {
		t.Error("jose opened a tampered token: open.mjs is not authenticating")
	}
}

// TestSecretCLIOpensWithJose: the same proof through the flecht binary, as an
// operator uses it: a keyring made and rotated by `flecht keys`, tokens made
// by `flecht secrets encrypt`, all opened by panva jose; and flecht's own
// `secrets decrypt` reads them back.
func TestSecretCLIOpensWithJose(t *testing.T) {
	keyringPath := filepath.Join(t.TempDir(), "keyring.json")
	flecht := func(stdin string, args ...string) string {
		t.Helper()
		out, errOut, code := runFlecht(t, stdin, append(args, "--keyring", keyringPath)...)
		if code != 0 {
			t.Fatalf("flecht %v: exit %d\n%s", args, code, errOut)
		}
		return strings.TrimSpace(out)
	}
	type expect struct {
		token, kid, scope, plaintext string
	}
	var want []expect
	encrypt := func(kid, scope, value, canonical string) {
		t.Helper()
		args := []string{"secrets", "encrypt", "-"}
		if scope != "" {
			args = append(args, "--scope", scope)
		}
		want = append(want, expect{flecht(value, args...), kid, scope, canonical})
	}

	flecht("", "keys", "init", "--kid", "cli-old")
	encrypt("cli-old", "api_key", `"sk-live-ü😀"`, `"sk-live-ü😀"`)
	flecht("", "keys", "add", "--kid", "cli-new")
	flecht("", "keys", "promote", "--kid", "cli-new")
	encrypt("cli-new", "", `{"b": 1.50, "a": 12345678901234567890}`, `{"a":12345678901234567890,"b":1.5}`)
	encrypt("cli-new", "tenant/42", `["x", null, true]`, `["x",null,true]`)
	if fi, err := os.Stat(keyringPath); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("keyring file: %v", err)
	}

	tokens := make([]string, len(want))
	for i, e := range want {
		tokens[i] = e.token
	}
	got := joseOpen(t, keyringPath, tokens)
	for i, e := range want {
		g := got[i]
		if g.Error != "" {
			t.Errorf("token %d (kid %s): jose refused it: %s", i, e.kid, g.Error)
			continue
		}
		wantHeader := map[string]any{"alg": "dir", "enc": "A256GCM", "kid": e.kid}
		if e.scope != "" {
			wantHeader["flenc_scope"] = e.scope
		}
		if g.Plaintext != e.plaintext || mustJSON(g.Header) != mustJSON(wantHeader) {
			t.Errorf("token %d: jose read %s %q, want %s %q", i, mustJSON(g.Header), g.Plaintext, mustJSON(wantHeader), e.plaintext)
		}
		args := []string{"secrets", "decrypt", e.token}
		if e.scope != "" {
			args = append(args, "--scope", e.scope)
		}
		if back := flecht("", args...); back != e.plaintext {
			t.Errorf("token %d: flecht secrets decrypt read %q, want %q", i, back, e.plaintext)
		}
	}
}

// joseResult is what open.mjs reports for one token.
type joseResult struct {
	Header    map[string]any `json:"header"`
	Plaintext string         `json:"plaintext"`
	Error     string         `json:"error"`
}

// joseOpen opens tokens with panva jose (open.mjs) using the keyring file at
// keyringPath, one result per token. It installs jose from the pinned
// package-lock.json first when node_modules is absent (a fresh CI machine).
func joseOpen(t *testing.T, keyringPath string, tokens []string) []joseResult {
	t.Helper()
	dir := secretInteropDir(t)
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is required for the interop test:", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "jose", "package.json")); err != nil {
		npm, err := exec.LookPath("npm")
		if err != nil {
			t.Fatal("npm is required to install jose:", err)
		}
		// package-lock.json pins jose; --prefer-offline uses the npm cache
		// when it holds the tarball.
		ci := exec.Command(npm, "ci", "--no-audit", "--no-fund", "--prefer-offline")
		ci.Dir = dir
		if out, err := ci.CombinedOutput(); err != nil {
			t.Fatalf("npm ci: %v\n%s", err, out)
		}
	}
	tokensPath := filepath.Join(t.TempDir(), "tokens.json")
	b, _ := json.Marshal(tokens)
	if err := os.WriteFile(tokensPath, b, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(node, "open.mjs", keyringPath, tokensPath)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node open.mjs: %v\n%s", err, stderr.String())
	}
	var got []joseResult
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("open.mjs output: %v\n%s", err, out)
	}
	if len(got) != len(tokens) {
		t.Fatalf("open.mjs returned %d results for %d tokens", len(got), len(tokens))
	}
	return got
}

func secretInteropDir(t *testing.T) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("cannot locate the e2e directory")
	}
	return filepath.Join(filepath.Dir(file), "..", "internal", "secret", "testdata", "interop")
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
