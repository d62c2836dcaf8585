package cli

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/launch"
	"github.com/flecht-dev/flecht/internal/metrics"
	"github.com/flecht-dev/flecht/internal/secret"
	"github.com/flecht-dev/flecht/internal/ui"
)

// upstreamVectors reads the keyrings and tokens flechtctl 0.17.0 made
// (internal/secret/testdata/upstream, see its README).
type cliUpstreamVectors struct {
	Password  string                     `json:"password"`
	Keyrings  map[string]json.RawMessage `json:"keyrings"`
	Protected string                     `json:"protected"`
	Tokens    []struct {
		Keyring, Scope, Payload, Token, Kid string
	} `json:"tokens"`
}

func loadCLIVectors(t *testing.T) cliUpstreamVectors {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "secret", "testdata", "upstream", "vectors.json"))
	if err != nil {
		t.Fatal(err)
	}
	var v cliUpstreamVectors
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func writeKeyringFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Every keyring shape flechtctl 0.17 writes loads in keys list, and the
// tokens made with it decrypt through secrets decrypt.
func TestCommandsLoadUpstreamKeyrings(t *testing.T) {
	v := loadCLIVectors(t)
	dir := t.TempDir()
	for name, doc := range v.Keyrings {
		path := writeKeyringFile(t, dir, name+".json", string(doc))
		rep := decodeReport(t, mustRun(t, nil, "", "keys", "list", "-o", "json", "--keyring", path))
		if len(rep.Keys) == 0 || rep.Primary == "" {
			t.Errorf("%s: %+v", name, rep)
		}
	}
	for _, tv := range v.Tokens {
		path := filepath.Join(dir, tv.Keyring+".json")
		r := mustRun(t, nil, "", "secrets", "decrypt", "-o", "json", "--keyring", path, "--scope", tv.Scope, tv.Token)
		var res secret.DecryptResult
		var compact bytes.Buffer
		err := json.Unmarshal([]byte(r.out), &res)
		if err == nil {
			err = json.Compact(&compact, res.Value)
		}
		if err != nil || compact.String() != tv.Payload || res.Kid != tv.Kid {
			t.Errorf("decrypt %s: %s %v", tv.Kid, r.out, err)
		}
	}
}

// A protected keyring opens with --password-file or
// FLECHT_KEYRING_PASSWORD_FILE; without either it is a keyring_password
// failure that says what to give, never echoing a password.
func TestCommandsOpenProtectedKeyrings(t *testing.T) {
	v := loadCLIVectors(t)
	dir := t.TempDir()
	path := writeKeyringFile(t, dir, "protected.json", v.Protected+"\n")
	pw := writeKeyringFile(t, dir, "pw", v.Password+"\n")
	var tok string
	for _, tv := range v.Tokens {
		if tv.Keyring == "x25519_ed25519" {
			tok = tv.Token
		}
	}
	r := mustRun(t, nil, "", "secrets", "decrypt", "--keyring", path, "--password-file", pw, "--scope", "api", tok)
	if strings.TrimSpace(r.out) == "" {
		t.Error("decrypt printed nothing")
	}
	env := map[string]string{EnvKeyring: path, EnvKeyringPasswordFile: pw}
	mustRun(t, env, "", "keys", "list")
	r = run(t, map[string]string{EnvKeyring: path}, "", "secrets", "decrypt", "--scope", "api", tok)
	if r.code != exitcode.KindFindings.Code() || !strings.Contains(r.err, "keyring_password") || !strings.Contains(r.err, "--password-file") {
		t.Errorf("no password: exit %d %q", r.code, r.err)
	}
	wrong := writeKeyringFile(t, dir, "wrong", "not the password at all\n")
	r = run(t, map[string]string{EnvKeyring: path, EnvKeyringPasswordFile: wrong}, "", "keys", "list")
	if r.code == 0 || !strings.Contains(r.err, "wrong password or damaged file") || strings.Contains(r.err, "not the password") {
		t.Errorf("wrong password: exit %d %q", r.code, r.err)
	}
	// A keys edit of a protected keyring writes it protected again.
	mustRun(t, env, "", "keys", "add", "--kid", "added")
	b, _ := os.ReadFile(path)
	if !secret.IsProtectedDocument(b) {
		t.Fatalf("keys add wrote the protected keyring plain:\n%s", b)
	}
	rep := decodeReport(t, mustRun(t, env, "", "keys", "list", "-o", "json"))
	if rep.Keys[len(rep.Keys)-1].Kid != "added" {
		t.Errorf("after add: %+v", rep)
	}
	// run --keyring publishes every kind's kid.
	io, _, _, _ := ui.Test()
	opts := &RunOptions{Factory: &Factory{IO: io, Getenv: func(k string) string { return env[k] }}}
	obs := metrics.New(nil)
	if _, err := launch.New(launchOptions(opts)).LoadKeyring(obs, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	for _, kid := range []string{"a", "r", "s", "added"} {
		if v := metrics.Value(obs.KeysLoaded.WithLabelValues(kid)); v != 1 {
			t.Errorf("keyring_keys_loaded{kid=%q} = %v", kid, v)
		}
	}
}

// keys remove refuses (exit 3) a kid that a role names, saying which.
func TestKeysRemoveRefusesRoles(t *testing.T) {
	v := loadCLIVectors(t)
	path := writeKeyringFile(t, t.TempDir(), "k.json", string(v.Keyrings["x25519_ed25519"]))
	before, _ := os.ReadFile(path)
	for kid, want := range map[string]string{"a": "primary", "r": `scope "api"`, "s": "flenc_signing"} {
		r := run(t, keysEnv(path), "", "keys", "remove", "--kid", kid)
		if r.code != exitcode.KindRefused.Code() || !strings.Contains(r.err, "keyring_conflict") || !strings.Contains(r.err, want) {
			t.Errorf("remove %s: exit %d %q", kid, r.code, r.err)
		}
	}
	if after, _ := os.ReadFile(path); string(after) != string(before) {
		t.Error("a refused remove changed the file")
	}
}

// secrets encrypt --scope S seals under the scope's sealing key.
func TestSecretsEncryptUsesTheScopesSealingKey(t *testing.T) {
	v := loadCLIVectors(t)
	path := writeKeyringFile(t, t.TempDir(), "k.json", string(v.Keyrings["per_scope_primaries"]))
	var res secret.EncryptResult
	r := mustRun(t, nil, "", "secrets", "encrypt", "-o", "json", "--keyring", path, "--scope", "api", `"v"`)
	if err := json.Unmarshal([]byte(r.out), &res); err != nil || res.Kid != "b" {
		t.Fatalf("encrypt --scope api: %s", r.out)
	}
	if info, _ := secret.Inspect(res.Token); info.Kid != "b" {
		t.Errorf("sealed under %q", info.Kid)
	}
	r = mustRun(t, nil, "", "secrets", "encrypt", "-o", "json", "--keyring", path, `"v"`)
	if err := json.Unmarshal([]byte(r.out), &res); err != nil || res.Kid != "a" {
		t.Errorf("unscoped: %s", r.out)
	}
}

// A password file that cannot be read is named as what it is: never as a
// missing keyring, which a newcomer would then try to create.
func TestMissingPasswordFileIsNotAMissingKeyring(t *testing.T) {
	v := loadCLIVectors(t)
	dir := t.TempDir()
	path := writeKeyringFile(t, dir, "protected.json", v.Protected+"\n")
	missing := filepath.Join(dir, "no-such-password")
	for _, args := range [][]string{
		{"keys", "list"},
		{"keys", "add", "--kid", "k9"},
		{"secrets", "encrypt", "--scope", "api", `"v"`},
	} {
		r := run(t, map[string]string{EnvKeyring: path, EnvKeyringPasswordFile: missing}, "", args...)
		if r.code == 0 || !strings.Contains(r.err, "password file "+missing) || strings.Contains(r.err, "does not exist; create it") ||
			strings.Contains(r.err, "keyring file "+path+" does not exist") {
			t.Errorf("%v: exit %d %q", args, r.code, r.err)
		}
	}
	if b, _ := os.ReadFile(path); string(b) != v.Protected+"\n" {
		t.Error("the keyring changed")
	}
	plain := writeKeyringFile(t, dir, "plain.json", `{"keys":[{"kty":"oct","kid":"a","k":"`+strings.Repeat("A", 43)+`"}],"primary":"a"}`)
	r := run(t, map[string]string{EnvKeyring: plain, EnvKeyringPasswordFile: missing}, "", "keys", "protect")
	if r.code != 2 || !strings.HasPrefix(r.err, "error: keyring_password: cannot read the password file "+missing+": no such file or directory\n") {
		t.Errorf("keys protect: exit %d %q", r.code, r.err)
	}
}
