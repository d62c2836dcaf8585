package secret

import (
	"encoding/json"
	"errors"
	"testing"
)

// A broken pair (a private half of another public half) is never imported
// and takes no role in a keyring that holds one; a short key is invalid,
// not a conflict.
func TestBrokenPairsAreRefusedAtEveryEdit(t *testing.T) {
	kr, err := NewKeyring("a")
	if err == nil {
		kr, err = kr.Generate("x1", TypeX25519, []string{"s"})
	}
	if err == nil {
		kr, err = kr.Generate("x2", TypeX25519, []string{"s"})
	}
	if err != nil {
		t.Fatal(err)
	}
	doc, _ := kr.JWKS()
	var m struct{ Keys []map[string]any }
	_ = json.Unmarshal(doc, &m)
	bad := m.Keys[1]
	bad["kid"], bad["d"] = "x", m.Keys[2]["d"]
	jwk, _ := json.Marshal(bad)
	if _, err := kr.Import(jwk); !errors.Is(err, ErrKeyringInvalid) {
		t.Errorf("import: %v", err)
	}
	short, _ := json.Marshal(map[string]any{"kty": "oct", "kid": "short", "k": "c2hvcnQ"})
	if _, err := kr.Import(short); !errors.Is(err, ErrKeyringInvalid) {
		t.Errorf("short: %v", err)
	}
	var full map[string]any
	_ = json.Unmarshal(doc, &full)
	full["keys"] = append(full["keys"].([]any), bad)
	b, _ := json.Marshal(full)
	held, err := ParseKeyring(b)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := held.SetPrimaryFor("s", "x"); !errors.Is(err, ErrKeyringInvalid) {
		t.Errorf("primary for: %v", err)
	}
	if _, err := held.Promote("x"); !errors.Is(err, ErrKeyringInvalid) {
		t.Errorf("promote: %v", err)
	}
	if _, err := held.SetPrimaryFor("s", "x1"); err != nil {
		t.Errorf("a sound pair: %v", err)
	}
}
