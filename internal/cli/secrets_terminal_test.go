package cli

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/flecht-dev/flecht/internal/secret"
	"github.com/flecht-dev/flecht/internal/textfmt"
	"github.com/flecht-dev/flecht/internal/ui"
	"github.com/flecht-dev/flecht/internal/ui/uitest"
)

// hostileKeyring is a keyring file as another tool may write it: scope
// names with terminal controls, an oct key sealing scope s, an ed25519 key
// signing it. Its keys are minted here, its scopes rewritten in the JSON.
func hostileKeyring(t *testing.T, s string) (path string, kr *secret.Keyring) {
	t.Helper()
	kr, err := secret.NewKeyring("a")
	if err == nil {
		kr, err = kr.Generate("sig", secret.TypeEd25519, []string{"placeholder"})
	}
	if err == nil {
		kr, err = kr.Add("x")
	}
	if err != nil {
		t.Fatal(err)
	}
	doc, err := kr.JWKS()
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(doc, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range m["keys"].([]any) {
		switch k := k.(map[string]any); k["kid"] {
		case "sig", "x":
			k["flenc_scopes"] = []string{s}
		}
	}
	m["flenc_primaries"] = map[string]string{s: "x"}
	m["flenc_signing"] = map[string]string{s: "sig"}
	b, _ := json.Marshal(m)
	path = writeKeyringFile(t, t.TempDir(), "keyring.json", string(b))
	kr, err = secret.ParseKeyring(b)
	if err != nil {
		t.Fatalf("scope %q: %v", s, err)
	}
	return path, kr
}

// Item 3: a token, a signed value or a keyring that carries terminal
// controls in its scope (ESC ] 0 ; … BEL ESC [ 2 J …, C1 CSI, DEL, bidi
// overrides) never gets them to the terminal raw: not in the
// `pass --scope …` hint, the keys remove refusals, the tables, the notes,
// the error lines; JSON and YAML stay parseable and hold the scope whole.
func TestHostileScopesReachNoTerminalRaw(t *testing.T) {
	for _, s := range uitest.Hostile(t) {
		if s == "" || !utf8.ValidString(s) {
			continue // no JSON document carries it
		}
		path, kr := hostileKeyring(t, s)
		env := keysEnv(path)
		tok, err := kr.Encrypt([]byte(`"v"`), s)
		if err != nil {
			t.Fatal(err)
		}
		signed, err := kr.Sign([]byte(`"v"`), s)
		if err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{
			{"secrets", "decrypt", tok}, // scope_violation: the `pass --scope` hint
			{"secrets", "decrypt", "--scope", s, tok},
			{"secrets", "decrypt", "--scope", "other", tok},
			{"secrets", "decrypt", "-o", "json", tok},
			{"secrets", "decrypt", "-o", "yaml", tok},
			{"secrets", "inspect", tok},
			{"secrets", "inspect", "-o", "yaml", signed},
			{"secrets", "reseal", tok},
			{"secrets", "verify", "--scope", s, signed},
			{"secrets", "verify", "--scope", "other", signed},
			{"secrets", "verify", "-o", "json", "--scope", "other", signed},
			{"secrets", "decrypt", "--scope", s, "--string", tok},
			{"keys", "list"},
			{"keys", "list", "-o", "yaml"},
			{"keys", "remove", "--kid", "x"},   // the sealing key of s: refused, naming s
			{"keys", "remove", "--kid", "sig"}, // the signing key of s
			{"keys", "remove", "--kid", "a"},
			{"keys", "promote", "--scope", s, "--kid", "a"},
		} {
			r := run(t, env, "", args...)
			for name, out := range map[string]string{"stdout": r.out, "stderr": r.err} {
				if i := uitest.RawControl(out, "\n"); i >= 0 {
					t.Errorf("%q %v: raw control on %s at %d: %q", s, args[:2], name, i, out)
				}
			}
			if r.code == 1 {
				t.Errorf("%q %v: exit 1: %s", s, args, r.err)
			}
		}
		// The hint stays a command a shell reads back as the scope.
		r := run(t, env, "", "secrets", "decrypt", tok)
		if !strings.Contains(r.err, "pass --scope "+textfmt.ShellQuote(s)+" ") {
			t.Errorf("%q: hint: %s", s, r.err)
		}
		r = run(t, env, "", "secrets", "decrypt", "-o", "json", tok)
		var rep SecretErrorReport
		if err := json.Unmarshal([]byte(r.out), &rep); err != nil || rep.Error.TokenScope != s {
			t.Errorf("%q: json: %v %s", s, err, r.out)
		}
		r = run(t, env, "", "secrets", "decrypt", "-o", "yaml", tok)
		if err := yaml.Unmarshal([]byte(r.out), &rep); err != nil || rep.Error.TokenScope != s {
			t.Errorf("%q: yaml: %v %s", s, err, r.out)
		}
	}
}

// Item 3: the value a token holds is shown escaped on a terminal and raw
// in a pipe, as ls shows names.
func TestDecryptedValueEscapedOnATerminal(t *testing.T) {
	path := newKeyring(t, "a")
	hostile := "\x1b]0;pwned\a\x1b[2J"
	tok := strings.TrimSpace(mustRun(t, keysEnv(path), hostile, "secrets", "encrypt", "--string", "-").out)
	if r := mustRun(t, keysEnv(path), "", "secrets", "decrypt", "--string", tok); r.out != hostile+"\n" {
		t.Errorf("a pipe gets the value raw: %q", r.out)
	}
	io, _, out, _ := ui.Test()
	io.SetTTY(false, true, false)
	f := &Factory{IO: io, Getenv: func(k string) string { return keysEnv(path)[k] }}
	if code := Main(t.Context(), f, []string{"secrets", "decrypt", "--string", tok}); code != 0 || out.String() != `\x1b]0;pwned\a\x1b[2J`+"\n" {
		t.Errorf("a terminal: exit %d %q", code, out.String())
	}
}
