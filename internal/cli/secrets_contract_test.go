package cli

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/secret"
)

// Item 8: a keyring path that cannot be read as a file keeps the secrets
// contract: exit 4, one line naming the kind, or with -o json the error
// object on standard output.
func TestSecretsUnreadableKeyringKeepsTheContract(t *testing.T) {
	dir := t.TempDir()
	file := writeKeyringFile(t, dir, "file", "{}")
	loop := filepath.Join(dir, "loop")
	if err := os.Symlink(filepath.Join(dir, "loop2"), loop); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(loop, filepath.Join(dir, "loop2")); err != nil {
		t.Fatal(err)
	}
	tok := forgeToken(`{"alg":"dir","enc":"A256GCM","kid":"a"}`)
	for _, path := range []string{dir, loop, filepath.Join(file, "x"), filepath.Join(dir, "missing")} {
		for _, verb := range [][]string{{"decrypt", tok}, {"encrypt", "1"}, {"sign", "--scope", "s", "1"}, {"verify", "--scope", "s", "x"}, {"reseal", tok}} {
			args := append([]string{"secrets", "-o", "json", "--keyring", path}, verb...)
			r := run(t, nil, "", args...)
			var rep SecretErrorReport
			if err := json.Unmarshal([]byte(r.out), &rep); r.code != exitcode.Findings || err != nil || rep.Error.Kind != secret.KindNoKeyring ||
				!strings.Contains(rep.Error.Message, path) || r.err != "" {
				t.Errorf("%v: exit %d %q %q", args, r.code, r.out, r.err)
			}
			r = run(t, nil, "", append([]string{"secrets", "--keyring", path}, verb...)...)
			if r.code != exitcode.Findings || !strings.HasPrefix(r.err, "error: no_keyring: ") || !strings.Contains(r.err, path) {
				t.Errorf("%v: exit %d %q", args, r.code, r.err)
			}
		}
	}
}

// Item 9: a header refusal says what it was refused before once, in the
// words of what was refused: decryption for a token, the signature check
// for a signed value.
func TestHeaderRefusalsSayWhatWasNotRun(t *testing.T) {
	path := newKeyring(t, "a")
	env := keysEnv(path)
	b64 := base64.RawURLEncoding.EncodeToString
	ecdh := secret.Prefix + b64([]byte(`{"alg":"ECDH-ES+A256KW","enc":"A256GCM","kid":"a","epk":{"kty":"OKP","crv":"X25519","x":"`+
		strings.Repeat("A", 43)+`"}}`)) + "." + b64(make([]byte, 40)) + "." + b64(make([]byte, 12)) + "." + b64([]byte("ct")) + "." + b64(make([]byte, 16))
	zip := forgeToken(`{"alg":"dir","enc":"A256GCM","kid":"a","zip":"DEF"}`)
	for _, tok := range []string{ecdh, zip} {
		r := run(t, env, "", "secrets", "decrypt", tok)
		if r.code != exitcode.Findings || !strings.HasPrefix(r.err, "error: header_rejected: ") ||
			strings.Count(r.err, "(refused before any decryption)") != 1 {
			t.Errorf("decrypt: exit %d %q", r.code, r.err)
		}
	}
	for _, hdr := range []string{`{"alg":"EdDSA","flenc_scope":"s","kid":"e"}`, `{"alg":"Ed25519","flenc_scope":"s","kid":"e","crit":["b64"]}`} {
		signed := secret.SignedPrefix + b64([]byte(hdr)) + "." + b64([]byte("1")) + "." + b64(make([]byte, 64))
		for _, verb := range []string{"verify", "inspect"} {
			r := run(t, env, "", "secrets", verb, "--scope", "s", signed)
			if verb == "inspect" {
				r = run(t, env, "", "secrets", verb, signed)
			}
			if r.code != exitcode.Findings || !strings.HasPrefix(r.err, "error: header_rejected: ") || strings.Contains(r.err, "decryption") ||
				strings.Count(r.err, "(refused before the signature is checked)") != 1 {
				t.Errorf("%s %s: exit %d %q", verb, hdr, r.code, r.err)
			}
		}
	}
}

// Item 9: a protected keyring whose header lacks the cty that marks it is
// named as what it is, not as "not a JSON object".
func TestProtectedKeyringWithoutCtyIsNamed(t *testing.T) {
	v := loadCLIVectors(t)
	segs := strings.Split(strings.TrimSpace(v.Protected), ".")
	hdr, err := base64.RawURLEncoding.DecodeString(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(hdr, &m); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, cty := range map[string]any{"missing": nil, "wrong": "json", "number": 7} {
		if cty == nil {
			delete(m, "cty")
		} else {
			m["cty"] = cty
		}
		b, _ := json.Marshal(m)
		segs[0] = base64.RawURLEncoding.EncodeToString(b)
		path := writeKeyringFile(t, dir, name+".json", strings.Join(segs, ".")+"\n")
		r := run(t, keysEnv(path), "", "keys", "list")
		if r.code == 0 || strings.Contains(r.err, "not a JSON object") || !strings.Contains(r.err, `"cty":"jwk-set+json" is required`) {
			t.Errorf("%s cty: keys list: exit %d %q", name, r.code, r.err)
		}
		r = run(t, keysEnv(path), "", "secrets", "encrypt", "-o", "json", "1")
		var rep SecretErrorReport
		if err := json.Unmarshal([]byte(r.out), &rep); err != nil || r.code != exitcode.Findings || rep.Error.Kind != secret.KindKeyringInvalid ||
			!strings.Contains(rep.Error.Message, "password-protected keyring is, but its header has") {
			t.Errorf("%s cty: encrypt: exit %d %q", name, r.code, r.out)
		}
	}
}

// Item 9: a --scope that is not UTF-8 is a usage error (exit 2,
// invalid_value) for every value verb, never a finding.
func TestScopeThatIsNotUTF8IsAUsageError(t *testing.T) {
	path := newKeyring(t, "a")
	tok := encryptWith(t, path, "", "1")
	for _, verb := range [][]string{{"decrypt", tok}, {"encrypt", "1"}, {"sign", "1"}, {"verify", "x"}, {"reseal", tok}} {
		args := append([]string{"secrets", "--keyring", path, "--scope", "\xff"}, verb...)
		r := run(t, nil, "", args...)
		if r.code != exitcode.Usage || !strings.HasPrefix(r.err, "error: invalid_value: --scope is not UTF-8") {
			t.Errorf("%v: exit %d %q", verb, r.code, r.err)
		}
		r = run(t, nil, "", append(args, "-o", "json")...)
		var rep SecretErrorReport
		if err := json.Unmarshal([]byte(r.out), &rep); err != nil || r.code != exitcode.Usage || rep.Error.Kind != "invalid_value" {
			t.Errorf("%v -o json: exit %d %q", verb, r.code, r.out)
		}
	}
}
