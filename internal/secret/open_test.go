package secret

import (
	"bytes"
	"testing"
)

// Open is Decrypt plus the header's kid and scope: the same payload, the
// same errors, and the info from the one parse.
func TestOpenIsDecryptWithTheHeader(t *testing.T) {
	kr, err := NewKeyring("a")
	if err != nil {
		t.Fatal(err)
	}
	other, _ := NewKeyring("b")
	scoped, _ := kr.Encrypt([]byte(`"v"`), "s")
	plain, _ := kr.Encrypt([]byte(`"w"`), "")
	foreign, _ := other.Encrypt([]byte(`"x"`), "s")
	tampered := scoped[:len(scoped)-2] + "AA"
	if tampered == scoped {
		tampered = scoped[:len(scoped)-2] + "BA"
	}
	cases := []struct {
		tok, scope string
		info       TokenInfo
		kind       Kind
	}{
		{scoped, "s", TokenInfo{Kid: "a", Scope: "s"}, ""},
		{plain, "s", TokenInfo{Kid: "a"}, ""}, // the upgrade path
		{plain, "", TokenInfo{Kid: "a"}, ""},
		{scoped, "", TokenInfo{Kid: "a", Scope: "s"}, KindScopeViolation},
		{scoped, "t", TokenInfo{Kid: "a", Scope: "s"}, KindScopeViolation},
		{foreign, "s", TokenInfo{Kid: "b", Scope: "s"}, KindUnknownKid},
		{tampered, "s", TokenInfo{Kid: "a", Scope: "s"}, KindTagMismatch},
		{"flenc:jwe:x", "s", TokenInfo{}, KindMalformed},
	}
	for i, c := range cases {
		p, info, err := kr.Open(c.tok, c.scope)
		dp, kid, derr := kr.Decrypt(c.tok, c.scope)
		if info != c.info || KindOf(err) != c.kind || !bytes.Equal(p, dp) || kid != info.Kid || KindOf(derr) != KindOf(err) {
			t.Errorf("case %d: Open %q %+v %v; Decrypt %q %q %v", i, p, info, err, dp, kid, derr)
		}
		if err == nil && len(p) == 0 {
			t.Errorf("case %d: no payload", i)
		}
	}
	if _, _, err := (*Keyring)(nil).Open(scoped, "s"); KindOf(err) != KindNoKeyring {
		t.Errorf("nil keyring: %v", err)
	}
}
