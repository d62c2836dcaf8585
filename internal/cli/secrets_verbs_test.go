package cli

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/secret"
)

// signedVectors are the signed values flechtctl 0.17.0 made
// (internal/secret/testdata/upstream).
type signedVectors struct {
	Signed []struct {
		Keyring, Kid, Payload, Scope, Token string
	} `json:"signed"`
	EncSigned struct {
		Keyring, Scope, Signed, Token string
	} `json:"enc_signed"`
}

func loadSignedVectors(t *testing.T) signedVectors {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "secret", "testdata", "upstream", "vectors.json"))
	if err != nil {
		t.Fatal(err)
	}
	var v signedVectors
	if err := json.Unmarshal(b, &v); err != nil || len(v.Signed) == 0 || v.EncSigned.Token == "" {
		t.Fatalf("signed vectors: %v", err)
	}
	return v
}

// compactJSON normalizes a JSON value for comparison.
func compactJSON(t *testing.T, raw []byte) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		t.Fatalf("not JSON: %s", raw)
	}
	return b.String()
}

func TestSecretsSignAndVerify(t *testing.T) {
	v := loadCLIVectors(t)
	sv := loadSignedVectors(t)
	dir := t.TempDir()
	path := writeKeyringFile(t, dir, "k.json", string(v.Keyrings["x25519_ed25519"])) // signing api, cfg → s
	env := keysEnv(path)

	// What flechtctl signed verifies, printing the value and the signer.
	for _, s := range sv.Signed {
		r := mustRun(t, env, "", "secrets", "verify", "--scope", s.Scope, s.Token)
		if strings.TrimSpace(r.out) != s.Payload || r.err != `verified: signed by kid "`+s.Kid+`" for scope "`+s.Scope+`"`+"\n" {
			t.Errorf("verify upstream value: %q %q", r.out, r.err)
		}
		var res secret.VerifyResult
		j := mustRun(t, env, "", "secrets", "verify", "--scope", s.Scope, "-o", "json", `"`+s.Token+`"`)
		if err := json.Unmarshal([]byte(j.out), &res); err != nil || res.Kid != s.Kid || res.Scope != s.Scope || compactJSON(t, res.Value) != s.Payload {
			t.Errorf("verify -o json: %s", j.out)
		}
	}

	// sign, then verify; the header is upstream's, the signer the scope's.
	tok := strings.TrimSpace(mustRun(t, env, "", "secrets", "sign", "--scope", "cfg", `{"b": 2, "a": 1}`).out)
	h, err := secret.InspectHeader(tok)
	if err != nil || h.Kid != "s" || h.Scope != "cfg" || h.Alg != "Ed25519" {
		t.Fatalf("signed %q: %+v %v", tok, h, err)
	}
	seg := strings.Split(strings.TrimPrefix(tok, secret.SignedPrefix), ".")
	hdr, _ := base64.RawURLEncoding.DecodeString(seg[0])
	payload, _ := base64.RawURLEncoding.DecodeString(seg[1])
	if string(hdr) != `{"alg":"Ed25519","flenc_scope":"cfg","kid":"s"}` || string(payload) != `{"a":1,"b":2}` {
		t.Errorf("header %s payload %s", hdr, payload)
	}
	var sres secret.SignResult
	json.Unmarshal([]byte(mustRun(t, env, "", "secrets", "sign", "--scope", "api", "-o", "json", "--string", "-").out), &sres)
	if sres.Kid != "s" || sres.Scope != "api" || !secret.IsSigned(sres.Token) {
		t.Errorf("sign -o json: %+v", sres)
	}
	// --string both ways, with a trailing newline from standard input.
	stok := strings.TrimSpace(mustRun(t, env, "https://hooks.example/7\n", "secrets", "sign", "--scope", "api", "--string", "-").out)
	if r := mustRun(t, env, "", "secrets", "verify", "--scope", "api", "--string", stok); r.out != "https://hooks.example/7\n" {
		t.Errorf("verify --string: %q", r.out)
	}
	if r := run(t, env, "", "secrets", "verify", "--scope", "cfg", "--string", tok); r.code != exitcode.Usage || !strings.Contains(r.err, "not a JSON string") {
		t.Errorf("verify --string of an object: exit %d %q", r.code, r.err)
	}

	// Every failure exits 4 with its kind and never echoes the input.
	other := writeKeyringFile(t, dir, "other.json", string(v.Keyrings["oct_only"]))
	tampered := seg[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(`{"a":1,"b":3}`)) + "." + seg[2]
	const marker = "SECRET-MARKER-77"
	for _, tc := range []struct {
		env   map[string]string
		args  []string
		kind  string
		extra string
	}{
		{env, []string{"verify", "--scope", "api", tok}, "scope_violation", "must match exactly"},
		{env, []string{"verify", "--scope", "cfg", secret.SignedPrefix + tampered}, "bad_signature", ""},
		{keysEnv(other), []string{"verify", "--scope", "cfg", tok}, "unknown_signer", ""},
		{env, []string{"verify", "--scope", "cfg", marker}, "unsigned", ""},
		{env, []string{"verify", "--scope", "cfg", "flsig:jws:" + marker}, "malformed", ""},
		{env, []string{"verify", "--scope", "cfg", "flsig:jws:eyJhbGciOiJFZERTQSIsImtpZCI6InMiLCJmbGVuY19zY29wZSI6ImNmZyJ9.e30." + strings.Repeat("A", 86)}, "header_rejected", "EdDSA"},
		{env, []string{"sign", "--scope", "db", `"` + marker + `"`}, "no_signing_key", ""},
		{keysEnv(filepath.Join(dir, "none.json")), []string{"sign", "--scope", "api", `"` + marker + `"`}, "no_keyring", ""},
	} {
		r := run(t, tc.env, "", append([]string{"secrets"}, tc.args...)...)
		if r.code != exitcode.Findings || !strings.HasPrefix(r.err, "error: "+tc.kind+": ") || !strings.Contains(r.err, tc.extra) || strings.Contains(r.err+r.out, marker) {
			t.Errorf("%v: exit %d %q, want 4 and %s", tc.args, r.code, r.err, tc.kind)
		}
		j := run(t, tc.env, "", append([]string{"secrets", "-o", "json"}, tc.args...)...)
		var rep SecretErrorReport
		if err := json.Unmarshal([]byte(j.out), &rep); err != nil || j.code != exitcode.Findings || string(rep.Error.Kind) != tc.kind || strings.Contains(j.out, marker) {
			t.Errorf("%v -o json: exit %d %s", tc.args, j.code, j.out)
		}
	}
	for _, args := range [][]string{{"sign", `"x"`}, {"verify", tok}, {"sign", "--scope", "api", "{"}} {
		if r := run(t, env, "", append([]string{"secrets"}, args...)...); r.code != exitcode.Usage {
			t.Errorf("%v: exit %d %q", args, r.code, r.err)
		}
	}
}

// ENCRYPTED(SIGNED(…)): decrypt flags the signed value, and piped on with
// --string it verifies.
func TestSecretsDecryptOfASignedValue(t *testing.T) {
	v := loadCLIVectors(t)
	sv := loadSignedVectors(t)
	path := writeKeyringFile(t, t.TempDir(), "k.json", string(v.Keyrings[sv.EncSigned.Keyring]))
	env := keysEnv(path)
	r := mustRun(t, env, "", "secrets", "decrypt", "--scope", sv.EncSigned.Scope, "--string", sv.EncSigned.Token)
	if strings.TrimSpace(r.out) != sv.EncSigned.Signed || !strings.Contains(r.err, "the value is a signed value") {
		t.Fatalf("decrypt: %q %q", r.out, r.err)
	}
	var res secret.DecryptResult
	json.Unmarshal([]byte(mustRun(t, env, "", "secrets", "decrypt", "--scope", "api", "-o", "json", sv.EncSigned.Token).out), &res)
	if !res.Signed || res.Kid != "r" || res.Alg != "ECDH-ES+A256KW" || res.KeyType != secret.TypeX25519 || res.Scope != "api" {
		t.Errorf("decrypt -o json: %+v", res)
	}
	vr := mustRun(t, env, r.out, "secrets", "verify", "--scope", "api", "-")
	if strings.TrimSpace(vr.out) != `"wrapped"` || !strings.Contains(vr.err, `signed by kid "s"`) {
		t.Errorf("verify the inner value: %q %q", vr.out, vr.err)
	}
	// Handing the token to verify says what to do.
	if r := run(t, env, "", "secrets", "verify", "--scope", "api", sv.EncSigned.Token); r.code != exitcode.Findings || !strings.Contains(r.err, "decrypt it first") {
		t.Errorf("verify a token: exit %d %q", r.code, r.err)
	}
}

// decrypt reports the generation, the kid and its kind, for tokens of
// both generations minted by flechtctl.
func TestSecretsDecryptReportsTheGeneration(t *testing.T) {
	v := loadCLIVectors(t)
	dir := t.TempDir()
	raw, _ := os.ReadFile(filepath.Join("..", "secret", "testdata", "upstream", "vectors.json"))
	var algs struct {
		Tokens []struct{ Alg, Token, Keyring string } `json:"tokens"`
	}
	json.Unmarshal(raw, &algs)
	for i, tv := range v.Tokens {
		path := writeKeyringFile(t, dir, tv.Keyring+".json", string(v.Keyrings[tv.Keyring]))
		var res secret.DecryptResult
		out := mustRun(t, nil, "", "secrets", "decrypt", "--keyring", path, "--scope", tv.Scope, "-o", "json", tv.Token).out
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatal(err)
		}
		wantType := secret.TypeOct
		if algs.Tokens[i].Alg != "dir" {
			wantType = secret.TypeX25519
		}
		if res.Alg != algs.Tokens[i].Alg || res.KeyType != wantType || res.Kid != tv.Kid {
			t.Errorf("token %d: %+v, want alg %s", i, res, algs.Tokens[i].Alg)
		}
	}
}

func TestSecretsInspectNeedsNoKeyring(t *testing.T) {
	v := loadCLIVectors(t)
	sv := loadSignedVectors(t)
	var ecdh, dir string
	for _, tv := range v.Tokens {
		if h, _ := secret.InspectHeader(tv.Token); h.Alg == "ECDH-ES+A256KW" && h.Scope == "api" && h.Kid == "r" && ecdh == "" {
			ecdh = tv.Token
		}
		if tv.Kid == "b" && tv.Scope == "" {
			dir = tv.Token
		}
	}
	cases := []struct {
		token string
		want  secret.InspectResult
	}{
		{dir, secret.InspectResult{Envelope: "flenc:jwe", Alg: "dir", Enc: "A256GCM", Kid: "b", KeyType: secret.TypeOct}},
		{ecdh, secret.InspectResult{Envelope: "flenc:jwe", Alg: "ECDH-ES+A256KW", Enc: "A256GCM", Kid: "r", Scope: "api", EPK: true, KeyType: secret.TypeX25519}},
		{sv.Signed[0].Token, secret.InspectResult{Envelope: "flsig:jws", Alg: "Ed25519", Kid: "s", Scope: "api", KeyType: secret.TypeEd25519}},
	}
	for _, tc := range cases {
		if tc.token == "" {
			t.Fatal("vector not found")
		}
		// No keyring anywhere: inspect never loads one.
		r := mustRun(t, nil, "", "secrets", "inspect", "-o", "json", tc.token)
		var got secret.InspectResult
		if err := json.Unmarshal([]byte(r.out), &got); err != nil {
			t.Fatal(err)
		}
		hdr := got.Header
		got.Header = nil
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("inspect:\n got %+v\nwant %+v", got, tc.want)
		}
		seg := strings.SplitN(strings.TrimPrefix(strings.TrimPrefix(tc.token, secret.Prefix), secret.SignedPrefix), ".", 2)[0]
		want, _ := base64.RawURLEncoding.DecodeString(seg)
		if compactJSON(t, hdr) != string(want) {
			t.Errorf("header %s, want %s", hdr, want)
		}
		h := mustRun(t, nil, "", "secrets", "inspect", tc.token)
		if !strings.HasPrefix(h.out, "UNAUTHENTICATED") || !strings.Contains(h.out, "kid:") {
			t.Errorf("inspect table:\n%s", h.out)
		}
		if tc.want.EPK != strings.Contains(h.out, "epk:") {
			t.Errorf("epk line:\n%s", h.out)
		}
	}
	// From standard input, in JSON quotes.
	if r := mustRun(t, nil, `"`+dir+`"`+"\n", "secrets", "inspect", "-"); !strings.Contains(r.out, "dir") {
		t.Errorf("stdin: %s", r.out)
	}
	// A header outside the profile is refused as a stage would, without
	// echoing the value.
	const marker = "PASTED-SECRET-99"
	for token, kind := range map[string]string{
		marker: "malformed",
		"flenc:jwe:" + base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"dir","enc":"A256GCM","kid":"k","zip":"DEF"}`)) + "..AAAAAAAAAAAAAAAA.AA.AAAAAAAAAAAAAAAAAAAAAA": "header_rejected",
		"flenc:cbor:" + marker: "malformed",
	} {
		r := run(t, nil, "", "secrets", "inspect", token)
		if r.code != exitcode.Findings || !strings.HasPrefix(r.err, "error: "+kind+": ") || strings.Contains(r.err, marker) {
			t.Errorf("inspect %.30q: exit %d %q", token, r.code, r.err)
		}
	}
}

// reseal moves one token to its scope's sealing key, across generations.
func TestSecretsResealMovesOneToken(t *testing.T) {
	path := newKeyring(t, "a")
	env := keysEnv(path)
	unscoped := encryptWith(t, path, "", `"v"`)
	scoped := encryptWith(t, path, "api", `{"x":1}`)
	mustRun(t, env, "", "keys", "add", "--kid", "r", "--type", "x25519", "--scope", "api", "--primary-for", "api")

	var res secret.ResealResult
	for _, tok := range []string{unscoped, scoped} {
		out := mustRun(t, env, "", "secrets", "reseal", "--scope", "api", "-o", "json", tok).out
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatal(err)
		}
		if res.FromKid != "a" || res.Kid != "r" || res.Alg != "ECDH-ES+A256KW" || res.Scope != "api" {
			t.Errorf("reseal: %+v", res)
		}
		kr, _, _ := secret.Load(path)
		want, _, _ := kr.Decrypt(tok, "api")
		got, _, err := kr.Decrypt(res.Token, "api")
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("the resealed token holds other bytes: %v", err)
		}
	}
	// The table form prints the token alone, for a pipe.
	r := mustRun(t, env, unscoped+"\n", "secrets", "reseal", "--scope", "api", "-")
	if !strings.HasPrefix(r.out, secret.Prefix) || strings.Count(r.out, "\n") != 1 {
		t.Errorf("reseal table: %q", r.out)
	}
	// A scope is never dropped; a plaintext has nothing to reseal.
	for args, kind := range map[string]string{scoped: "scope_violation", "sk-PLAIN-1": "plaintext"} {
		r := run(t, env, "", "secrets", "reseal", args)
		if r.code != exitcode.Findings || !strings.HasPrefix(r.err, "error: "+kind) || strings.Contains(r.err, "sk-PLAIN") {
			t.Errorf("reseal: exit %d %q", r.code, r.err)
		}
	}
}
