//go:build e2e

package e2e

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Tokens and signed values between flecht and the real flechtctl 0.17.0,
// both ways, and the keyring helpers TestUpstreamKeyrings shares. Upstream's
// side runs in e2e/upstream/py/secret_ops.py: flechtctl's library gives the
// verdict (sorted into flecht's error kinds by verdicts.py) and its command
// line, run in the same process with a user's arguments, must agree.

// upRing names a keyring file for both sides: flecht gets PasswordFile as
// --password-file, secret_ops.py opens a protected file with it.
type upRing struct {
	Path         string `json:"path"`
	PasswordFile string `json:"password_file,omitempty"`
}

// upOp is one operation of secret_ops.py (see its doc): model, encrypt,
// sign, encrypt_signed, decrypt, verify or decrypt_verify.
type upOp struct {
	Op      string `json:"op"`
	Keyring string `json:"keyring"`
	Scope   string `json:"scope,omitempty"`
	Value   string `json:"value,omitempty"`
	Token   string `json:"token,omitempty"`
	NoCLI   bool   `json:"no_cli,omitempty"` // the library alone
}

// verdict is what one side did with an operation: ok with a token or a
// value, or refused with an error kind (flecht's names, for both sides).
type verdict struct {
	OK        bool   `json:"ok"`
	Kind      string `json:"kind"`
	Error     string `json:"error"` // upstream: the exception's type
	Cause     string `json:"cause"` // upstream: its __cause__'s type
	Message   string `json:"message"`
	Token     string `json:"token"`
	Value     string `json:"value"` // canonical JSON
	CLIAgrees bool   `json:"cli_agrees"`

	// A model op's result.
	Protected bool       `json:"protected"`
	Keys      []modelKey `json:"keys"`
	Show      []string   `json:"show"`
	ShowCode  int        `json:"show_code"`
	ShowError string     `json:"show_error"`
}

// kind is "ok" or the refusal's kind.
func (v verdict) kind() string {
	if v.OK {
		return "ok"
	}
	return v.Kind
}

func (v verdict) String() string {
	if v.OK {
		return "ok"
	}
	if v.Error != "" && v.Cause != "" {
		return fmt.Sprintf("%s (%s caused by %s)", v.Kind, v.Error, v.Cause)
	}
	if v.Error != "" {
		return fmt.Sprintf("%s (%s)", v.Kind, v.Error)
	}
	return v.Kind
}

// secretOps runs ops through flechtctl in the root, one process for all.
func secretOps(t *testing.T, dir string, rings map[string]upRing, ops []upOp) []verdict {
	t.Helper()
	in, err := json.Marshal(map[string]any{"keyrings": rings, "ops": ops})
	if err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runUpstream(t, []string{dir}, string(in), upstreamPython, upstreamDir("py", "secret_ops.py"))
	if code != 0 {
		t.Fatalf("secret_ops.py: exit %d\n%s", code, tail(errOut, 30))
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(ops) == 0 {
		return nil
	}
	if len(lines) != len(ops) {
		t.Fatalf("secret_ops.py gave %d results for %d ops:\n%s\n%s", len(lines), len(ops), out, errOut)
	}
	res := make([]verdict, len(ops))
	for i, l := range lines {
		res[i] = decodeJSON[verdict](t, l)
	}
	return res
}

// flechtSecrets runs `flecht secrets VERB` on ring with -o json and returns
// the JSON it printed, or the refusal: exit 4 with an error kind, or any
// other exit as kind "exit N".
func flechtSecrets(t *testing.T, ring upRing, verb, scope string, arg string) (map[string]json.RawMessage, verdict) {
	t.Helper()
	args := []string{"secrets", verb, "--keyring", ring.Path, "-o", "json"}
	if ring.PasswordFile != "" {
		args = append(args, "--password-file", ring.PasswordFile)
	}
	if scope != "" {
		args = append(args, "--scope", scope)
	}
	out, errOut, code := runFlecht(t, "", append(args, arg)...)
	var res struct {
		Error *struct {
			Kind string `json:"kind"`
		} `json:"error"`
	}
	switch {
	case code == 0:
		return decodeJSON[map[string]json.RawMessage](t, out), verdict{OK: true}
	case code == 4 && json.Unmarshal([]byte(out), &res) == nil && res.Error != nil:
		return nil, verdict{Kind: res.Error.Kind}
	default:
		return nil, verdict{Kind: fmt.Sprintf("exit %d", code), Message: strings.TrimSpace(errOut)}
	}
}

// flechtMake seals (encrypt), signs (sign) or signs and seals
// (encrypt_signed) value, JSON text, with flecht.
func flechtMake(t *testing.T, ring upRing, op, scope, value string) verdict {
	t.Helper()
	verb := op
	if op == "encrypt_signed" {
		signed, v := flechtSecrets(t, ring, "sign", scope, value)
		if !v.OK {
			return v
		}
		value, verb = string(signed["token"]), "encrypt"
	}
	res, v := flechtSecrets(t, ring, verb, scope, value)
	if v.OK {
		v.Token = decodeJSON[string](t, string(res["token"]))
	}
	return v
}

// flechtOpen decrypts, verifies, or decrypts and verifies the signed value
// inside (decrypt_verify) a token with flecht, as a stage's field reads it.
func flechtOpen(t *testing.T, ring upRing, op, scope, token string) verdict {
	t.Helper()
	verb := op
	if op == "decrypt_verify" {
		verb = "decrypt"
	}
	res, v := flechtSecrets(t, ring, verb, scope, token)
	if !v.OK {
		return v
	}
	if op == "decrypt_verify" {
		// The value as it stands in the token: a signed value is a JSON
		// string, which verify takes quoted; anything else is left for
		// verify to name (unsigned), as a SIGNED field would.
		res, v = flechtSecrets(t, ring, "verify", scope, string(res["value"]))
		if !v.OK {
			return v
		}
	}
	v.Value = canonicalJSON(t, string(res["value"]))
	return v
}

// tokenHeader decodes the (unauthenticated) protected header of a flenc or
// flsig token.
func tokenHeader(t *testing.T, token string) map[string]any {
	t.Helper()
	compact := strings.TrimPrefix(strings.TrimPrefix(token, "flenc:jwe:"), "flsig:jws:")
	seg, _, _ := strings.Cut(compact, ".")
	raw, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		t.Fatalf("token header of %.40s…: %v", token, err)
	}
	return decodeJSON[map[string]any](t, string(raw))
}

// canonicalJSON re-encodes a JSON value with sorted keys and no spaces,
// keeping number literals, so that two writers' renderings compare.
func canonicalJSON(t *testing.T, s string) string {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("not JSON: %v: %q", err, s)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(b.String())
}

// tamper flips one character of a token's segment i (3: a JWE's
// ciphertext, 2: a JWS's signature).
func tamper(token string, i int) string {
	parts := strings.Split(token, ".")
	seg := []byte(parts[i])
	seg[0] = map[bool]byte{true: 'B', false: 'A'}[seg[0] == 'A']
	parts[i] = string(seg)
	return strings.Join(parts, ".")
}

// resign signs a signed value's payload again under a header with alg,
// with the Ed25519 seed d: how a token with an alg no writer makes (EdDSA)
// comes to exist, and, with alg Ed25519, the control that proves it is
// the alg alone that is refused.
func resign(t *testing.T, token, alg string, d []byte) string {
	t.Helper()
	h := tokenHeader(t, token)
	h["alg"] = alg
	hb, _ := json.Marshal(h)
	parts := strings.Split(strings.TrimPrefix(token, "flsig:jws:"), ".")
	input := base64.RawURLEncoding.EncodeToString(hb) + "." + parts[1]
	sig := ed25519.Sign(ed25519.NewKeyFromSeed(d), []byte(input))
	return "flsig:jws:" + input + "." + base64.RawURLEncoding.EncodeToString(sig)
}

// keyringJSON reads a plain keyring file as a generic document.
func keyringJSON(t *testing.T, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return decodeJSON[map[string]any](t, string(b))
}

func writeJSONFile(t *testing.T, path string, doc any) {
	t.Helper()
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// jwkOf returns the member of a keyring document's keys with kid.
func jwkOf(t *testing.T, doc map[string]any, kid string) map[string]any {
	t.Helper()
	for _, k := range doc["keys"].([]any) {
		if m := k.(map[string]any); m["kid"] == kid {
			return m
		}
	}
	t.Fatalf("no key %s in the keyring", kid)
	return nil
}

// tokenCase is one value made on either side and opened on the other.
type tokenCase struct {
	name      string
	op        string // encrypt, sign or encrypt_signed
	sealWith  string // keyring name
	sealScope string
	value     string // canonical JSON
	openOp    string // decrypt, verify or decrypt_verify; "" for a refusal at sealing
	openWith  string
	openScope string
	mutate    func(t *testing.T, token string) string // a tampered or crafted copy
	want      string                                  // "ok" or the kind of the refusal (at sealing when openOp is "")
	wantKid   string                                  // the kid the token's header names
}

// TestUpstreamTokens: tokens of both generations, scoped and not, signed
// values and ENCRYPTED(SIGNED(…)) values, made by each side, open and verify
// on the other; where upstream refuses one (on sealing, signing, opening or
// verifying), flecht refuses it too, with the same kind of error.
func TestUpstreamTokens(t *testing.T) {
	upstreamRoot(t)
	dir := upstreamTempDir(t)
	path := func(name string) string { return filepath.Join(dir, name) }
	rings := map[string]upRing{}
	for _, n := range []string{"main", "other", "twin", "swapped", "wide", "sealonly", "bound", "mixed"} {
		rings[n] = upRing{Path: path(n + ".json")}
	}

	// main, by flechtctl: two oct keys (t-new primary), an X25519 recipient
	// for api and cfg (api's sealing key), an Ed25519 signer for api and cfg,
	// an oct key bound to db (db's sealing key).
	m := rings["main"].Path
	flechtctl(t, dir, 0, "keyring", "new", m, "--kid", "t-old")
	flechtctl(t, dir, 0, "keyring", "add", m, "--kid", "t-new", "--primary")
	flechtctl(t, dir, 0, "keyring", "add", m, "--kid", "t-rec", "--type", "x25519", "--scope", "api", "--scope", "cfg", "--primary-for", "api")
	flechtctl(t, dir, 0, "keyring", "add", m, "--kid", "t-sig", "--type", "ed25519", "--scope", "api", "--scope", "cfg", "--signing-for", "api", "--signing-for", "cfg")
	flechtctl(t, dir, 0, "keyring", "add", m, "--kid", "t-db", "--scope", "db", "--primary-for", "db")
	// other, by flecht: kids main does not hold.
	keys := func(ring string, args ...string) {
		flechtOK(t, 0, append(append([]string{"keys"}, args...), "--keyring", rings[ring].Path)...)
	}
	keys("other", "init", "--kid", "t-other")
	keys("other", "add", "--kid", "t-rec-other", "--type", "x25519", "--scope", "api", "--primary-for", "api")
	keys("other", "add", "--kid", "t-sig-other", "--type", "ed25519", "--scope", "api", "--signing-for", "api")
	// twin: main's kids, other key bytes.
	keys("twin", "init", "--kid", "t-new")
	keys("twin", "add", "--kid", "t-rec", "--type", "x25519", "--scope", "api", "--primary-for", "api")
	keys("twin", "add", "--kid", "t-sig", "--type", "ed25519", "--scope", "api", "--signing-for", "api")
	// swapped: main's kids as the other kind of sealing key.
	keys("swapped", "init", "--kid", "t-rec")
	keys("swapped", "add", "--kid", "t-new", "--type", "x25519", "--scope", "api", "--primary-for", "api")
	// bound: an X25519 primary bound to api alone.
	flechtctl(t, dir, 0, "keyring", "new", rings["bound"].Path, "--kid", "t-bound", "--type", "x25519", "--scope", "api")
	// sealonly: main's recipient and signer, public halves only (exported
	// by flechtctl, imported by flecht).
	flechtctl(t, dir, 0, "keyring", "export", m, "t-rec", "-o", path("rec.jwk"))
	flechtctl(t, dir, 0, "keyring", "export", m, "t-sig", "-o", path("sig.jwk"))
	keys("sealonly", "init", "--kid", "t-writer")
	keys("sealonly", "import", path("rec.jwk"), "--primary-for", "api")
	keys("sealonly", "import", path("sig.jwk"))
	// wide: main with wider bindings than main's, so that its tokens and
	// signatures fall outside main's: t-rec and t-sig also serve ops, and
	// the primary is t-db unbound.
	wide := keyringJSON(t, m)
	jwkOf(t, wide, "t-rec")["flenc_scopes"] = []string{"api", "cfg", "ops"}
	jwkOf(t, wide, "t-sig")["flenc_scopes"] = []string{"api", "cfg", "ops"}
	delete(jwkOf(t, wide, "t-db"), "flenc_scopes")
	wide["primary"] = "t-db"
	wide["flenc_primaries"] = map[string]string{"api": "t-rec", "ops": "t-rec"}
	wide["flenc_signing"] = map[string]string{"api": "t-sig", "ops": "t-sig"}
	writeJSONFile(t, rings["wide"].Path, wide)
	// mixed: seals to main's recipient, signs with a signer main lacks.
	mixed := keyringJSON(t, rings["sealonly"].Path)
	mixed["keys"] = append(mixed["keys"].([]any), jwkOf(t, keyringJSON(t, rings["other"].Path), "t-sig-other"))
	mixed["flenc_signing"] = map[string]string{"api": "t-sig-other"}
	writeJSONFile(t, rings["mixed"].Path, mixed)

	seed, err := base64.RawURLEncoding.DecodeString(jwkOf(t, keyringJSON(t, m), "t-sig")["d"].(string))
	if err != nil {
		t.Fatal(err)
	}
	const obj = `{"n":12345678901234567890,"s":"sk-ü😀","z":[true,null]}`
	const str = `"p@ss\"wörd\n"`
	ct := func(t *testing.T, tok string) string { return tamper(tok, 3) }
	sigTamper := func(t *testing.T, tok string) string { return tamper(tok, 2) }
	eddsa := func(t *testing.T, tok string) string { return resign(t, tok, "EdDSA", seed) }
	control := func(t *testing.T, tok string) string { return resign(t, tok, "Ed25519", seed) }
	cases := []tokenCase{
		// dir + A256GCM under oct keys
		{name: "dir, unscoped", op: "encrypt", sealWith: "main", value: str, openOp: "decrypt", openWith: "main", want: "ok", wantKid: "t-new"},
		{name: "dir, scoped, under the primary", op: "encrypt", sealWith: "main", sealScope: "reports", value: obj, openOp: "decrypt", openWith: "main", openScope: "reports", want: "ok", wantKid: "t-new"},
		{name: "dir, scope's own sealing key", op: "encrypt", sealWith: "main", sealScope: "db", value: obj, openOp: "decrypt", openWith: "main", openScope: "db", want: "ok", wantKid: "t-db"},
		{name: "dir, unscoped token in a scoped read (the upgrade path)", op: "encrypt", sealWith: "main", value: obj, openOp: "decrypt", openWith: "main", openScope: "reports", want: "ok", wantKid: "t-new"},
		{name: "dir, scoped token in an unscoped read", op: "encrypt", sealWith: "main", sealScope: "reports", value: str, openOp: "decrypt", openWith: "main", want: "scope_violation", wantKid: "t-new"},
		{name: "dir, another scope", op: "encrypt", sealWith: "main", sealScope: "db", value: str, openOp: "decrypt", openWith: "main", openScope: "reports", want: "scope_violation", wantKid: "t-db"},
		{name: "dir, unknown kid", op: "encrypt", sealWith: "other", value: str, openOp: "decrypt", openWith: "main", want: "unknown_kid", wantKid: "t-other"},
		{name: "dir, known kid, other key bytes", op: "encrypt", sealWith: "twin", value: str, openOp: "decrypt", openWith: "main", want: "tag_mismatch", wantKid: "t-new"},
		{name: "dir, tampered ciphertext", op: "encrypt", sealWith: "main", value: obj, openOp: "decrypt", openWith: "main", mutate: ct, want: "tag_mismatch", wantKid: "t-new"},
		{name: "dir header on an X25519 kid", op: "encrypt", sealWith: "swapped", value: str, openOp: "decrypt", openWith: "main", want: "header_rejected", wantKid: "t-rec"},
		{name: "dir, outside the key's binding (unscoped, key bound to db)", op: "encrypt", sealWith: "wide", value: str, openOp: "decrypt", openWith: "main", want: "key_binding", wantKid: "t-db"},
		// ECDH-ES+A256KW + A256GCM to X25519 recipients
		{name: "ecdh, scoped", op: "encrypt", sealWith: "main", sealScope: "api", value: obj, openOp: "decrypt", openWith: "main", openScope: "api", want: "ok", wantKid: "t-rec"},
		{name: "ecdh, another scope", op: "encrypt", sealWith: "main", sealScope: "api", value: str, openOp: "decrypt", openWith: "main", openScope: "cfg", want: "scope_violation", wantKid: "t-rec"},
		{name: "ecdh, scoped token in an unscoped read", op: "encrypt", sealWith: "main", sealScope: "api", value: str, openOp: "decrypt", openWith: "main", want: "scope_violation", wantKid: "t-rec"},
		{name: "ecdh, unknown kid", op: "encrypt", sealWith: "other", sealScope: "api", value: str, openOp: "decrypt", openWith: "main", openScope: "api", want: "unknown_kid", wantKid: "t-rec-other"},
		{name: "ecdh, known kid, other key", op: "encrypt", sealWith: "twin", sealScope: "api", value: str, openOp: "decrypt", openWith: "main", openScope: "api", want: "tag_mismatch", wantKid: "t-rec"},
		{name: "ecdh, tampered ciphertext", op: "encrypt", sealWith: "main", sealScope: "api", value: obj, openOp: "decrypt", openWith: "main", openScope: "api", mutate: ct, want: "tag_mismatch", wantKid: "t-rec"},
		{name: "ecdh header on an oct kid", op: "encrypt", sealWith: "swapped", sealScope: "api", value: str, openOp: "decrypt", openWith: "main", openScope: "api", want: "header_rejected", wantKid: "t-new"},
		{name: "ecdh, outside the key's binding", op: "encrypt", sealWith: "wide", sealScope: "ops", value: str, openOp: "decrypt", openWith: "main", openScope: "ops", want: "key_binding", wantKid: "t-rec"},
		{name: "ecdh, opened by a seal-only copy", op: "encrypt", sealWith: "main", sealScope: "api", value: str, openOp: "decrypt", openWith: "sealonly", openScope: "api", want: "seal_only", wantKid: "t-rec"},
		{name: "ecdh, sealed by a seal-only writer", op: "encrypt", sealWith: "sealonly", sealScope: "api", value: obj, openOp: "decrypt", openWith: "main", openScope: "api", want: "ok", wantKid: "t-rec"},
		// sealing refused by the sealing key's binding
		{name: "sealing unscoped under a bound primary", op: "encrypt", sealWith: "bound", value: str, want: "key_binding"},
		{name: "sealing a scope outside the bound primary's", op: "encrypt", sealWith: "bound", sealScope: "db", value: str, want: "key_binding"},
		// flsig:jws: signed values
		{name: "signed", op: "sign", sealWith: "main", sealScope: "api", value: obj, openOp: "verify", openWith: "main", openScope: "api", want: "ok", wantKid: "t-sig"},
		{name: "signed, a string, second scope", op: "sign", sealWith: "main", sealScope: "cfg", value: str, openOp: "verify", openWith: "main", openScope: "cfg", want: "ok", wantKid: "t-sig"},
		{name: "signed, verified by a public half", op: "sign", sealWith: "main", sealScope: "api", value: obj, openOp: "verify", openWith: "sealonly", openScope: "api", want: "ok", wantKid: "t-sig"},
		{name: "signed, read in another scope", op: "sign", sealWith: "main", sealScope: "api", value: str, openOp: "verify", openWith: "main", openScope: "cfg", want: "scope_violation", wantKid: "t-sig"},
		{name: "signed, unknown signer", op: "sign", sealWith: "other", sealScope: "api", value: str, openOp: "verify", openWith: "main", openScope: "api", want: "unknown_signer", wantKid: "t-sig-other"},
		{name: "signed, known signer, other key", op: "sign", sealWith: "twin", sealScope: "api", value: str, openOp: "verify", openWith: "main", openScope: "api", want: "bad_signature", wantKid: "t-sig"},
		{name: "signed, tampered signature", op: "sign", sealWith: "main", sealScope: "api", value: obj, openOp: "verify", openWith: "main", openScope: "api", mutate: sigTamper, want: "bad_signature", wantKid: "t-sig"},
		{name: "signed, outside the signer's binding", op: "sign", sealWith: "wide", sealScope: "ops", value: str, openOp: "verify", openWith: "main", openScope: "ops", want: "key_binding", wantKid: "t-sig"},
		{name: "signed, alg EdDSA", op: "sign", sealWith: "main", sealScope: "api", value: str, openOp: "verify", openWith: "main", openScope: "api", mutate: eddsa, want: "header_rejected", wantKid: "t-sig"},
		{name: "signed, re-signed as Ed25519 (the control of EdDSA)", op: "sign", sealWith: "main", sealScope: "api", value: str, openOp: "verify", openWith: "main", openScope: "api", mutate: control, want: "ok", wantKid: "t-sig"},
		{name: "signing a scope without a signing key", op: "sign", sealWith: "main", sealScope: "db", value: str, want: "no_signing_key"},
		// ENCRYPTED(SIGNED(…)): a token whose plaintext is a signed value
		{name: "ENCRYPTED(SIGNED)", op: "encrypt_signed", sealWith: "main", sealScope: "api", value: obj, openOp: "decrypt_verify", openWith: "main", openScope: "api", want: "ok", wantKid: "t-rec"},
		{name: "ENCRYPTED(SIGNED) by an unknown signer", op: "encrypt_signed", sealWith: "mixed", sealScope: "api", value: str, openOp: "decrypt_verify", openWith: "main", openScope: "api", want: "unknown_signer", wantKid: "t-rec"},
		{name: "ENCRYPTED(SIGNED) holding an unsigned value", op: "encrypt", sealWith: "main", sealScope: "api", value: str, openOp: "decrypt_verify", openWith: "main", openScope: "api", want: "unsigned", wantKid: "t-rec"},
	}

	// Each side makes every value.
	type made struct {
		tokenCase
		by, token string
	}
	var ups []upOp
	for _, tc := range cases {
		ups = append(ups, upOp{Op: tc.op, Keyring: tc.sealWith, Scope: tc.sealScope, Value: tc.value})
	}
	upMade := secretOps(t, dir, rings, ups)
	var all []made
	for i, tc := range cases {
		fl := flechtMake(t, rings[tc.sealWith], tc.op, tc.sealScope, tc.value)
		up := upMade[i]
		if !up.CLIAgrees {
			t.Errorf("%s: flechtctl's command line disagrees with its library (%s)", tc.name, up)
		}
		wantMake := "ok"
		if tc.openOp == "" {
			wantMake = tc.want
		}
		for _, side := range []struct {
			by string
			v  verdict
		}{{"flechtctl", up}, {"flecht", fl}} {
			if side.v.kind() != wantMake {
				t.Errorf("%s: %s made it: %s, want %s %s", tc.name, side.by, side.v, wantMake, side.v.Message)
				continue
			}
			if !side.v.OK {
				t.Logf("%-60s made by %-9s refused: %s", tc.name, side.by, side.v)
				continue
			}
			tok := side.v.Token
			if h := tokenHeader(t, tok); h["kid"] != tc.wantKid || (h["flenc_scope"] != nil) != (tc.sealScope != "") {
				t.Errorf("%s: %s made a token with header %v, want kid %s, scope %q", tc.name, side.by, h, tc.wantKid, tc.sealScope)
			}
			if tc.mutate != nil {
				tok = tc.mutate(t, tok)
			}
			all = append(all, made{tc, side.by, tok})
		}
	}

	// Each side opens everything made: upstream in one run, flecht per value.
	var opens []upOp
	for _, s := range all {
		opens = append(opens, upOp{Op: s.openOp, Keyring: s.openWith, Scope: s.openScope, Token: s.token})
	}
	upOpened := secretOps(t, dir, rings, opens)
	for i, s := range all {
		name := s.name + ", made by " + s.by
		up := upOpened[i]
		fl := flechtOpen(t, rings[s.openWith], s.openOp, s.openScope, s.token)
		if up.kind() != s.want {
			t.Errorf("%s: upstream's verdict %s, want %s", name, up, s.want)
		}
		if fl.kind() != up.kind() {
			t.Errorf("%s: flecht's verdict %s %s, upstream's %s", name, fl, fl.Message, up)
		}
		if !up.CLIAgrees {
			t.Errorf("%s: flechtctl's command line disagrees with its library (%s)", name, up)
		}
		if up.OK && up.Value != s.value {
			t.Errorf("%s: upstream opened it to %s, want %s", name, up.Value, s.value)
		}
		if fl.OK && fl.Value != s.value {
			t.Errorf("%s: flecht opened it to %s, want %s", name, fl.Value, s.value)
		}
		t.Logf("%-60s flecht %-16s upstream %s", name, fl.kind(), up)
	}
	if n := len(slices.DeleteFunc(slices.Clone(all), func(s made) bool { return s.want != "ok" })); n < 20 {
		t.Fatalf("only %d values opened on the other side", n)
	}
}
