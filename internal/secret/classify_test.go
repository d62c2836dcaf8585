package secret

import (
	"encoding/json"
	"testing"
)

func TestClassify(t *testing.T) {
	kr := testKeyring(t, false)
	scoped, _ := kr.Encrypt([]byte(`"s"`), "api_key")
	plain, _ := kr.Encrypt([]byte(`"s"`), "")
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	cases := []struct {
		raw    string
		status Status
		kid    string
		scope  string
		kind   Kind
	}{
		{q(scoped), StatusEncrypted, "a", "api_key", ""},
		{q(plain), StatusEncrypted, "a", "", ""},
		{q("sk-live-pasted"), StatusPlaintext, "", "", ""},
		{q("https://flenc.example/"), StatusPlaintext, "", "", ""},
		{`{"user":"u","pass":"p"}`, StatusPlaintext, "", "", ""},
		{`42`, StatusPlaintext, "", "", ""},
		{`null`, StatusAbsent, "", "", ""},
		{q("flenc:cbor:x"), StatusCorrupt, "", "", KindMalformed},
		{q("flenc:jwe:@@bad@@..a.b.c"), StatusCorrupt, "", "", KindMalformed},
		{q(handToken(t, keyA, `{"alg":"A256KW","enc":"A256GCM","kid":"a"}`, []byte(`1`))), StatusCorrupt, "", "", KindHeaderRejected},
		{`{not json`, StatusCorrupt, "", "", KindMalformed},
	}
	for _, c := range cases {
		got := Classify([]byte(c.raw))
		if got.Status != c.status || got.Kid != c.kid || got.Scope != c.scope {
			t.Errorf("Classify(%.40s) = %+v", c.raw, got)
		}
		if (got.Err == nil) != (c.kind == "") || (got.Err != nil && got.Err.Kind != c.kind) {
			t.Errorf("Classify(%.40s) error = %v, want kind %q", c.raw, got.Err, c.kind)
		}
	}
}

func TestClassifyWithKeyring(t *testing.T) {
	kr := testKeyring(t, false)
	tok, _ := kr.Encrypt([]byte(`"s"`), "api_key")
	raw, _ := json.Marshal(tok)
	if c := kr.Classify(raw, "api_key"); c.Status != StatusEncrypted || c.Kid != "a" {
		t.Errorf("own keyring: %+v", c)
	}
	other, _ := (&Keyring{}).AddKey("z", keyB)
	if c := other.Classify(raw, "api_key"); c.Status != StatusCorrupt || c.Err.Kind != KindUnknownKid || c.Kid != "a" {
		t.Errorf("missing kid: %+v", c)
	}
	impostor, _ := (&Keyring{}).AddKey("a", keyB)
	if c := impostor.Classify(raw, "api_key"); c.Status != StatusCorrupt || c.Err.Kind != KindTagMismatch {
		t.Errorf("wrong bytes: %+v", c)
	}
	if c := kr.Classify(raw, "other"); c.Status != StatusCorrupt || c.Err.Kind != KindScopeViolation {
		t.Errorf("wrong scope: %+v", c)
	}
	if c := kr.Classify([]byte(`"plain"`), "api_key"); c.Status != StatusPlaintext {
		t.Errorf("plaintext: %+v", c)
	}
	j, _ := json.Marshal(other.Classify(raw, "api_key"))
	var back map[string]any
	json.Unmarshal(j, &back)
	if back["status"] != "corrupt" || back["error"].(map[string]any)["kind"] != "unknown_kid" {
		t.Errorf("JSON form: %s", j)
	}
}

// A flsig value is classified as signed (its signer kid and scope from the
// header), never as plaintext; one that does not parse is corrupt; with a
// keyring it is verified through the field's scope.
func TestClassifySigned(t *testing.T) {
	kr, err := testKeyring(t, false).Generate("sig", TypeEd25519, []string{"billing"})
	if err == nil {
		kr, err = kr.SetSigningFor("billing", "sig")
	}
	if err != nil {
		t.Fatal(err)
	}
	tok, err := kr.Sign([]byte(`"v"`), "billing")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(tok)
	if c := Classify(raw); c.Status != StatusSigned || c.Kid != "sig" || c.Scope != "billing" || c.Err != nil {
		t.Errorf("signed: %+v", c)
	}
	for _, bad := range []string{"flsig:jws:e30.e30.AAAA", "flsig:cose:x", "flsig:"} {
		b, _ := json.Marshal(bad)
		if c := Classify(b); c.Status != StatusCorrupt || c.Err == nil {
			t.Errorf("%q: %+v", bad, c)
		}
	}
	if c := kr.Classify(raw, "billing"); c.Status != StatusSigned || c.Err != nil {
		t.Errorf("verified: %+v", c)
	}
	if c := kr.Classify(raw, "other"); c.Status != StatusCorrupt || c.Err.Kind != KindScopeViolation {
		t.Errorf("wrong scope: %+v", c)
	}
	if c := testKeyring(t, false).Classify(raw, "billing"); c.Status != StatusCorrupt || c.Err.Kind != KindUnknownSigner || c.Kid != "sig" {
		t.Errorf("unknown signer: %+v", c)
	}
}
