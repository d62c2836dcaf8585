package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/secret"
)

// brokenPair is an Ed25519 JWK "e" bound to s whose d belongs to another x.
func brokenPair(t *testing.T) string {
	t.Helper()
	kr, err := secret.NewKeyring("a")
	if err == nil {
		kr, err = kr.Generate("e1", secret.TypeEd25519, []string{"s"})
	}
	if err == nil {
		kr, err = kr.Generate("e2", secret.TypeEd25519, []string{"s"})
	}
	if err != nil {
		t.Fatal(err)
	}
	doc, _ := kr.JWKS()
	var m struct{ Keys []map[string]any }
	if err := json.Unmarshal(doc, &m); err != nil {
		t.Fatal(err)
	}
	e := m.Keys[1]
	e["kid"], e["d"] = "e", m.Keys[2]["d"]
	b, _ := json.Marshal(e)
	return string(b)
}

// Item 7: a key pair whose private half does not belong to its public half
// is never imported, and a keyring written elsewhere that holds one cannot
// give it a role: every signature or seal under that role would fail.
func TestBrokenPairsGetNoRoles(t *testing.T) {
	path := newKeyring(t, "a")
	env := keysEnv(path)
	jwk := brokenPair(t)
	before := fileBytes(t, path)
	for _, args := range [][]string{{"-"}, {"-", "--signing-for", "s"}} {
		r := run(t, env, jwk, append([]string{"keys", "import"}, args...)...)
		if r.code != exitcode.Usage || !strings.Contains(r.err, `keyring_invalid: key "e": the ed25519 key's private half does not match its public half`) ||
			strings.Contains(r.out, "signs and verifies") {
			t.Errorf("import %v: exit %d %q %q", args, r.code, r.out, r.err)
		}
	}
	if fileBytes(t, path) != before {
		t.Fatal("a refused import changed the keyring")
	}

	// The same pair in a file written by another tool loads, and takes no role.
	var doc map[string]any
	_ = json.Unmarshal([]byte(before), &doc)
	var e map[string]any
	_ = json.Unmarshal([]byte(jwk), &e)
	doc["keys"] = append(doc["keys"].([]any), e)
	b, _ := json.Marshal(doc)
	path = writeKeyringFile(t, t.TempDir(), "elsewhere.json", string(b))
	env = keysEnv(path)
	before = fileBytes(t, path)
	if r := run(t, env, "", "keys", "list"); r.code != 0 || !strings.Contains(r.out, "MISMATCH") {
		t.Errorf("list: exit %d %q", r.code, r.out)
	}
	for _, args := range [][]string{{"signing", "--kid", "e", "--scope", "s"}} {
		r := run(t, env, "", append([]string{"keys"}, args...)...)
		if r.code != exitcode.Usage || !strings.Contains(r.err, "a broken pair takes no role") {
			t.Errorf("%v: exit %d %q", args, r.code, r.err)
		}
	}
	if fileBytes(t, path) != before {
		t.Error("a refused role changed the keyring")
	}
}
