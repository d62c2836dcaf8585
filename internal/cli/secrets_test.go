package cli

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/secret"
	"github.com/flecht-dev/flecht/internal/ui"
)

// newKeyring creates a keyring file holding kid (primary) through the CLI.
func newKeyring(t *testing.T, kid string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "keyring.json")
	mustRun(t, nil, "", "keys", "init", "--keyring", path, "--kid", kid)
	return path
}

func encryptWith(t *testing.T, keyring, scope, value string) string {
	t.Helper()
	args := []string{"secrets", "encrypt", "--keyring", keyring, value}
	if scope != "" {
		args = append(args, "--scope", scope)
	}
	return strings.TrimSpace(mustRun(t, nil, "", args...).out)
}

func TestSecretsRoundTrip(t *testing.T) {
	kr := newKeyring(t, "k1")
	env := keysEnv(kr)

	tok := encryptWith(t, kr, "api_key", `"sk-live-123"`)
	info, err := secret.Inspect(tok)
	if err != nil || info != (secret.TokenInfo{Kid: "k1", Scope: "api_key"}) {
		t.Fatalf("token %q: %+v %v", tok, info, err)
	}
	hdr, _ := base64.RawURLEncoding.DecodeString(strings.Split(strings.TrimPrefix(tok, secret.Prefix), ".")[0])
	if string(hdr) != `{"alg":"dir","enc":"A256GCM","kid":"k1","flenc_scope":"api_key"}` {
		t.Errorf("header %s", hdr)
	}
	r := mustRun(t, env, "", "secrets", "decrypt", "--scope", "api_key", tok)
	if r.out != "\"sk-live-123\"\n" || r.err != "opened: kid \"k1\" (oct, dir + A256GCM), scope \"api_key\"\n" {
		t.Errorf("decrypt: %q %q", r.out, r.err)
	}
	// JSON forms.
	var enc secret.EncryptResult
	if err := json.Unmarshal([]byte(mustRun(t, env, "", "secrets", "encrypt", "-o", "json", "--scope", "s", "[1]").out), &enc); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(enc.Token, "flenc:jwe:") || enc.Kid != "k1" || enc.Scope != "s" {
		t.Errorf("encrypt -o json: %+v", enc)
	}
	r = mustRun(t, env, "", "secrets", "decrypt", "-o", "json", "--scope", "api_key", tok)
	var generic map[string]any
	json.Unmarshal([]byte(r.out), &generic)
	got, _ := json.Marshal(generic)
	if string(got) != `{"alg":"dir","key_type":"oct","kid":"k1","scope":"api_key","value":"sk-live-123"}` {
		t.Errorf("decrypt -o json: %s", got)
	}
	// The unscoped upgrade path: an unscoped token opens in a scoped field.
	plain := encryptWith(t, kr, "", `{"user":"u"}`)
	if r := mustRun(t, env, "", "secrets", "decrypt", "--scope", "api_key", plain); r.out != "{\"user\":\"u\"}\n" {
		t.Errorf("unscoped token, scoped read: %q", r.out)
	}

	// Values are sealed in canonical form (numbers as Python writes them:
	// big integers exact, 1.50 as 1.5), and standard input works both ways.
	stdinTok := strings.TrimSpace(mustRun(t, env, " {\"b\": 1.50, \"a\": [12345678901234567890, \"ü\"]}\n", "secrets", "encrypt", "-").out)
	r = mustRun(t, env, stdinTok+"\n", "secrets", "decrypt", "-")
	if r.out != "{\"a\":[12345678901234567890,\"ü\"],\"b\":1.5}\n" {
		t.Errorf("canonical payload: %q", r.out)
	}
	r = mustRun(t, env, "", "secrets", "decrypt", "-o", "json", stdinTok)
	var dec struct {
		Value json.RawMessage `json:"value"`
	}
	json.Unmarshal([]byte(r.out), &dec)
	if !strings.Contains(string(dec.Value), "12345678901234567890") || !strings.Contains(string(dec.Value), "1.5") {
		t.Errorf("-o json lost number text: %s", r.out)
	}
	// A token pasted with its JSON quotes, as it stands in a record.
	if r := mustRun(t, env, "", "secrets", "decrypt", "--scope", "api_key", `"`+tok+`"`); r.out != "\"sk-live-123\"\n" {
		t.Errorf("quoted token: %q", r.out)
	}
	// Each encryption draws a fresh nonce.
	first, second := encryptWith(t, kr, "", "1"), encryptWith(t, kr, "", "1")
	if first == second {
		t.Error("two encryptions gave one token")
	}
	// The keyring may come from --keyring as well as the environment.
	if r := mustRun(t, nil, "", "secrets", "decrypt", "--keyring", kr, "--scope", "api_key", tok); r.out != "\"sk-live-123\"\n" {
		t.Errorf("--keyring: %q", r.out)
	}
}

// forgeToken builds a token with any protected header and sealed with nothing
// (the rule under test fires before any key is touched).
func forgeToken(header string) string {
	b64 := base64.RawURLEncoding.EncodeToString
	return secret.Prefix + b64([]byte(header)) + ".." + b64(make([]byte, 12)) + "." + b64([]byte("ct")) + "." + b64(make([]byte, 16))
}

// Every failure kind through the CLI: exit 4, one line naming the kind (and
// the kid where known) on standard error, or with -o json the error object
// on standard output, and never the plaintext.
func TestSecretsFailureKinds(t *testing.T) {
	dir := t.TempDir()
	kr := newKeyring(t, "k1")
	impostor := newKeyring(t, "k1") // the same kid, other bytes
	stranger := newKeyring(t, "k9")
	badFile := filepath.Join(dir, "bad.json")
	os.WriteFile(badFile, []byte(`{"keys":[],"primary":"k1"}`), 0o600)

	const secretText = "TOPSECRET-sk-live"
	scoped := encryptWith(t, kr, "api_key", `"`+secretText+`"`)
	unscoped := encryptWith(t, kr, "", `"`+secretText+`"`)
	fromStranger := encryptWith(t, stranger, "", `"`+secretText+`"`)
	segs := strings.Split(scoped, ".")
	segs[3] = "A" + segs[3][1:] // a changed ciphertext
	if segs[3] == strings.Split(scoped, ".")[3] {
		segs[3] = "B" + segs[3][1:]
	}
	tampered := strings.Join(segs, ".")

	cases := []struct {
		name    string
		keyring string // "" for none
		args    []string
		kind    secret.Kind
		kid     string
	}{
		{"malformed token", kr, []string{"decrypt", "flenc:jwe:abc"}, secret.KindMalformed, ""},
		{"other envelope is not plaintext", kr, []string{"decrypt", "--read-plaintext", "flenc:cbor:" + secretText}, secret.KindMalformed, ""},
		{"a secret after a stray flenc:", kr, []string{"decrypt", "--read-plaintext", "flenc:" + secretText}, secret.KindMalformed, ""},
		{"a secret as the header alg", kr, []string{"decrypt", forgeToken(`{"alg":"` + secretText + `","enc":"A256GCM","kid":"k1"}`)}, secret.KindHeaderRejected, ""},
		{"header alg A256KW", kr, []string{"decrypt", forgeToken(`{"alg":"A256KW","enc":"A256GCM","kid":"k1"}`)}, secret.KindHeaderRejected, ""},
		{"header zip", kr, []string{"decrypt", forgeToken(`{"alg":"dir","enc":"A256GCM","kid":"k1","zip":"DEF"}`)}, secret.KindHeaderRejected, ""},
		{"header crit", kr, []string{"decrypt", forgeToken(`{"alg":"dir","enc":"A256GCM","kid":"k1","crit":["exp"]}`)}, secret.KindHeaderRejected, ""},
		{"header PBES2 huge p2c", kr, []string{"decrypt", forgeToken(`{"alg":"PBES2-HS512+A256KW","enc":"A256GCM","kid":"k1","p2c":2000000000,"p2s":"AAAAAAAAAAAAAAAAAAAAAA"}`)}, secret.KindHeaderRejected, ""},
		{"unknown kid", kr, []string{"decrypt", fromStranger}, secret.KindUnknownKid, "k9"},
		{"known kid, other bytes", impostor, []string{"decrypt", "--scope", "api_key", scoped}, secret.KindTagMismatch, "k1"},
		{"tampered token", kr, []string{"decrypt", "--scope", "api_key", tampered}, secret.KindTagMismatch, "k1"},
		{"scope A reads scope B", kr, []string{"decrypt", "--scope", "admin", scoped}, secret.KindScopeViolation, "k1"},
		{"unscoped read of a scoped token", kr, []string{"decrypt", scoped}, secret.KindScopeViolation, "k1"},
		{"plaintext in a strict field", kr, []string{"decrypt", "--scope", "api_key", secretText}, secret.KindPlaintext, ""},
		{"no keyring (decrypt)", "", []string{"decrypt", unscoped}, secret.KindNoKeyring, ""},
		{"no keyring (encrypt)", "", []string{"encrypt", `"` + secretText + `"`}, secret.KindNoKeyring, ""},
		{"keyring file missing", filepath.Join(dir, "missing.json"), []string{"decrypt", unscoped}, secret.KindNoKeyring, ""},
		{"no keyring (reseal)", "", []string{"reseal", unscoped}, secret.KindNoKeyring, ""},
		{"no keyring (verify)", "", []string{"verify", "--scope", "api_key", unscoped}, secret.KindNoKeyring, ""},
		{"keyring file missing (sign)", filepath.Join(dir, "missing.json"), []string{"sign", "--scope", "api_key", `"` + secretText + `"`}, secret.KindNoKeyring, ""},
		{"keyring file invalid (reseal)", badFile, []string{"reseal", unscoped}, secret.KindKeyringInvalid, ""},
		{"keyring file invalid", badFile, []string{"encrypt", `"` + secretText + `"`}, secret.KindKeyringInvalid, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := map[string]string{}
			if c.keyring != "" {
				env[EnvKeyring] = c.keyring
			}
			args := append([]string{"secrets"}, c.args...)

			start := time.Now()
			r := run(t, env, "", args...)
			if c.kind == secret.KindHeaderRejected && time.Since(start) > time.Second {
				t.Errorf("rejecting the header took %v", time.Since(start))
			}
			if r.code != exitcode.Findings {
				t.Fatalf("exit %d, want 4\nstderr: %s", r.code, r.err)
			}
			prefix := "error: " + string(c.kind) + ": "
			if !strings.HasPrefix(r.err, prefix) || strings.Count(r.err, "\n") != 1 || r.out != "" {
				t.Errorf("want one line %q…, got stderr %q stdout %q", prefix, r.err, r.out)
			}
			if c.kid != "" && !strings.Contains(r.err, `"`+c.kid+`"`) {
				t.Errorf("the line does not name kid %q: %q", c.kid, r.err)
			}

			j := run(t, env, "", append(args, "-o", "json")...)
			if j.code != exitcode.Findings || j.err != "" {
				t.Fatalf("-o json: exit %d, stderr %q", j.code, j.err)
			}
			var rep struct {
				Error map[string]any `json:"error"`
			}
			if err := json.Unmarshal([]byte(j.out), &rep); err != nil || rep.Error == nil {
				t.Fatalf("-o json: not an error object: %v\n%s", err, j.out)
			}
			if rep.Error["kind"] != string(c.kind) {
				t.Errorf("-o json kind %v, want %s", rep.Error["kind"], c.kind)
			}
			if c.kid != "" && rep.Error["kid"] != c.kid {
				t.Errorf("-o json kid %v, want %s", rep.Error["kid"], c.kid)
			}
			for _, out := range []string{r.out, r.err, j.out, j.err} {
				if strings.Contains(out, secretText) {
					t.Errorf("the plaintext leaked: %q", out)
				}
			}
		})
	}
}

// The exact machine form the issue fixes for an unknown kid.
func TestSecretsErrorJSONShape(t *testing.T) {
	kr := newKeyring(t, "k1")
	tok := encryptWith(t, newKeyring(t, "k9"), "", `"x"`)
	r := run(t, keysEnv(kr), "", "secrets", "decrypt", "-o", "json", tok)
	var got map[string]map[string]any
	if err := json.Unmarshal([]byte(r.out), &got); err != nil {
		t.Fatal(err)
	}
	e := got["error"]
	if len(got) != 1 || e["kind"] != "unknown_kid" || e["kid"] != "k9" || !strings.Contains(e["message"].(string), `"k1"`) {
		t.Errorf("error object %v", got)
	}
	r = run(t, keysEnv(kr), "", "secrets", "decrypt", tok)
	if !strings.HasPrefix(r.err, `error: unknown_kid: token kid "k9" is not in the keyring`) {
		t.Errorf("line %q", r.err)
	}
}

func TestSecretsReadPlaintext(t *testing.T) {
	kr := newKeyring(t, "k1")
	env := keysEnv(kr)
	const legacy = "legacy-SECRET-value"
	r := mustRun(t, env, "", "secrets", "decrypt", "--scope", "m", "--read-plaintext", legacy)
	if r.out != `"`+legacy+`"`+"\n" {
		t.Errorf("plaintext read: %q", r.out)
	}
	if !strings.HasPrefix(r.err, "warning: ") || !strings.Contains(r.err, "plaintext") || strings.Contains(r.err, legacy) {
		t.Errorf("warning: %q", r.err)
	}
	// JSON plaintext stays JSON; -o json marks it.
	r = mustRun(t, env, "", "secrets", "decrypt", "--read-plaintext", "-o", "json", `{"n": 1.50}`)
	var dec secret.DecryptResult
	err := json.Unmarshal([]byte(r.out), &dec)
	var value bytes.Buffer
	json.Compact(&value, dec.Value)
	if err != nil || value.String() != `{"n":1.5}` || !dec.Plaintext || dec.Kid != "" {
		t.Errorf("JSON plaintext: %+v %v (%s)", dec, err, r.out)
	}
	// A JSON string stays a string, a bare number is a number.
	for in, want := range map[string]string{`"123"`: `"123"`, `123`: `123`, `"a\"b"`: `"a\"b"`, `ü`: `"ü"`} {
		if r := mustRun(t, env, "", "secrets", "decrypt", "--read-plaintext", in); r.out != want+"\n" {
			t.Errorf("plaintext %s read as %q, want %s", in, r.out, want)
		}
	}
	// Ciphertext still opens in migration mode, without a warning.
	tok := encryptWith(t, kr, "m", `"s"`)
	r = mustRun(t, env, "", "secrets", "decrypt", "--scope", "m", "--read-plaintext", tok)
	if r.out != "\"s\"\n" || strings.Contains(r.err, "warning") {
		t.Errorf("ciphertext in migration mode: %q %q", r.out, r.err)
	}
	// Strict: the same plaintext is refused.
	if r := run(t, env, "", "secrets", "decrypt", "--scope", "m", legacy); r.code != exitcode.Findings {
		t.Errorf("strict read of plaintext: exit %d", r.code)
	}
}

func TestSecretsUsageErrors(t *testing.T) {
	kr := newKeyring(t, "k1")
	env := keysEnv(kr)
	for _, c := range []struct {
		stdin string
		args  []string
	}{
		{"", []string{"secrets", "encrypt", "sk-live-NOTJSON"}},
		{"", []string{"secrets", "encrypt", `{"a":1} trailing-NOTJSON`}},
		{"", []string{"secrets", "encrypt", "\"\xffNOTJSON\""}},
		{"", []string{"secrets", "encrypt", ""}},
		{"sk-live-NOTJSON", []string{"secrets", "encrypt", "-"}},
		{"", []string{"secrets", "encrypt"}},
		{"", []string{"secrets", "encrypt", "1", "2"}},
		{"", []string{"secrets", "decrypt"}},
		{"", []string{"secrets", "decrypt", "a", "b"}},
		{"", []string{"secrets", "decrypt", "--bogus", "a"}},
	} {
		r := run(t, env, c.stdin, c.args...)
		if r.code != exitcode.Usage {
			t.Errorf("%q: exit %d, want 2 (%q)", c.args, r.code, r.err)
		}
		if strings.Contains(r.err, "NOTJSON") {
			t.Errorf("%q: the value is echoed in the error: %q", c.args, r.err)
		}
	}
	// An invalid value is a usage error (exit 2) that names its kind, and
	// with -o json an error object on standard output like any other
	// failure; neither echoes the value.
	for _, c := range []struct{ stdin, arg string }{
		{"", "sk-live-NOTJSON"}, {"", "\"\xffNOTJSON\""}, {"sk-live-NOTJSON", "-"},
	} {
		r := run(t, env, c.stdin, "secrets", "encrypt", c.arg)
		if r.code != exitcode.Usage || !strings.HasPrefix(r.err, "error: invalid_value: ") {
			t.Errorf("%q: exit %d, stderr %q", c.arg, r.code, r.err)
		}
		j := run(t, env, c.stdin, "secrets", "encrypt", "-o", "json", c.arg)
		var rep struct {
			Error map[string]any `json:"error"`
		}
		if j.code != exitcode.Usage || j.err != "" || json.Unmarshal([]byte(j.out), &rep) != nil ||
			rep.Error["kind"] != "invalid_value" || rep.Error["message"] == "" || strings.Contains(j.out, "NOTJSON") {
			t.Errorf("%q -o json: exit %d, stdout %q, stderr %q", c.arg, j.code, j.out, j.err)
		}
	}
	// A value that starts with "-" follows "--".
	if tok := strings.TrimSpace(mustRun(t, env, "", "secrets", "encrypt", "--", "-42").out); !strings.HasPrefix(tok, secret.Prefix) {
		t.Errorf("-- -42: %q", tok)
	}
	// Encrypting a token again works, with a warning.
	tok := encryptWith(t, kr, "", `"s"`)
	if r := mustRun(t, env, "", "secrets", "encrypt", `"`+tok+`"`); !strings.Contains(r.err, "already a flenc: token") {
		t.Errorf("double encryption: no warning: %q", r.err)
	}
}

// Tokens minted by an independent JOSE implementation (panva jose, pinned in
// internal/secret/testdata/interop) open through the CLI with the keyring
// it exported, and its refused tokens are refused with their kind.
func TestSecretsDecryptJoseVectors(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "secret", "testdata", "interop", "vectors.json"))
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Keyring json.RawMessage `json:"keyring"`
		Tokens  []struct{ Name, Kid, Scope, Plaintext, Token string }
		Rejects []struct{ Name, Kind, Token string }
	}
	if err := json.Unmarshal(b, &v); err != nil || len(v.Tokens) == 0 {
		t.Fatalf("vectors: %v", err)
	}
	path := filepath.Join(t.TempDir(), "keyring.json")
	if err := os.WriteFile(path, v.Keyring, 0o600); err != nil {
		t.Fatal(err)
	}
	env := keysEnv(path)
	rep := decodeReport(t, mustRun(t, env, "", "keys", "list", "-o", "json"))
	if rep.Primary != "prod-2026-07" || len(rep.Keys) != 2 {
		t.Errorf("jose keyring: %+v", rep)
	}
	for _, tv := range v.Tokens {
		args := []string{"secrets", "decrypt", "-o", "json", tv.Token}
		if tv.Scope != "" {
			args = append(args, "--scope", tv.Scope)
		}
		r := run(t, env, "", args...)
		var dec secret.DecryptResult
		if r.code != 0 || json.Unmarshal([]byte(r.out), &dec) != nil {
			t.Errorf("%s: exit %d %s %s", tv.Name, r.code, r.out, r.err)
			continue
		}
		var want, got any
		json.Unmarshal([]byte(tv.Plaintext), &want)
		json.Unmarshal(dec.Value, &got)
		if dec.Kid != tv.Kid || dec.Scope != tv.Scope || mustMarshal(got) != mustMarshal(want) {
			t.Errorf("%s: %+v, want kid %s scope %q value %s", tv.Name, dec, tv.Kid, tv.Scope, tv.Plaintext)
		}
	}
	for _, rv := range v.Rejects {
		r := run(t, env, "", "secrets", "decrypt", rv.Token)
		if r.code != exitcode.Findings || !strings.HasPrefix(r.err, "error: "+rv.Kind+": ") {
			t.Errorf("%s: exit %d %q, want %s", rv.Name, r.code, r.err, rv.Kind)
		}
	}
}

func mustMarshal(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// The flags land in the Options a run function receives (the seam tests
// and future callers use instead of argv).
func TestSecretsAndKeysFlagsWireOptions(t *testing.T) {
	io, _, _, _ := ui.Test()
	f := &Factory{IO: io, Getenv: func(k string) string { return map[string]string{EnvKeyring: "/env/keyring.json"}[k] }}

	var got *SecretsOptions
	cmd := newCmdSecretsDecrypt(f, func(o *SecretsOptions) error { got = o; return nil })
	cmd.SetArgs([]string{"--scope", "api_key", "--read-plaintext", "-"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if got.Keyring != "/env/keyring.json" || got.Scope != "api_key" || !got.ReadPlaintext || got.Input != "-" {
		t.Errorf("decrypt options %+v", got)
	}
	cmd = newCmdSecretsEncrypt(f, func(o *SecretsOptions) error { got = o; return nil })
	cmd.SetArgs([]string{"--keyring", "/flag.json", `"v"`})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if got.Keyring != "/flag.json" || got.Scope != "" || got.Input != `"v"` {
		t.Errorf("encrypt options %+v", got)
	}

	var keys *KeysOptions
	kcmd := newCmdKeysRemove(f, func(o *KeysOptions) error { keys = o; return nil })
	kcmd.SetArgs([]string{"--kid", "old"})
	if err := kcmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if keys.Keyring != "/env/keyring.json" || keys.Kid != "old" {
		t.Errorf("keys options %+v", keys)
	}
}

// A kid is chosen by whoever wrote the token: the error line clips it.
func TestSecretsErrorClipsForeignKid(t *testing.T) {
	kr := newKeyring(t, "k1")
	tok := forgeToken(`{"alg":"dir","enc":"A256GCM","kid":"` + strings.Repeat("k", 3000) + `"}`)
	r := run(t, keysEnv(kr), "", "secrets", "decrypt", tok)
	if r.code != exitcode.Findings || !strings.HasPrefix(r.err, "error: unknown_kid: ") || len(r.err) > 400 {
		t.Errorf("exit %d, %d bytes: %.100q", r.code, len(r.err), r.err)
	}
}
