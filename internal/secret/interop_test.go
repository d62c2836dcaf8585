package secret

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/flecht-dev/flecht/internal/attr"
)

// vectors.json is minted by testdata/interop/mint.mjs with panva jose (npm),
// an implementation that shares no code with this package. Reading its
// keyring and tokens proves the format, not a private dialect.
type vectors struct {
	Generator string          `json:"generator"`
	Keyring   json.RawMessage `json:"keyring"`
	Tokens    []struct {
		Name, Kid, Scope, Plaintext, Token string
	} `json:"tokens"`
	Rejects []struct {
		Name, Kind, Token string
	} `json:"rejects"`
}

func loadVectors(t *testing.T) vectors {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "interop", "vectors.json"))
	if err != nil {
		t.Fatal(err)
	}
	var v vectors
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Tokens) == 0 || len(v.Rejects) == 0 {
		t.Fatal("vectors.json holds no vectors")
	}
	return v
}

func TestJoseVectorsDecrypt(t *testing.T) {
	v := loadVectors(t)
	kr, err := ParseKeyring(v.Keyring)
	if err != nil {
		t.Fatalf("jose-exported keyring: %v", err)
	}
	for _, tv := range v.Tokens {
		pt, kid, err := kr.Decrypt(tv.Token, tv.Scope)
		if err != nil {
			t.Errorf("%s: %v", tv.Name, err)
			continue
		}
		if kid != tv.Kid || string(pt) != tv.Plaintext {
			t.Errorf("%s: kid %q payload %q, want %q %q", tv.Name, kid, pt, tv.Kid, tv.Plaintext)
		}
		info, err := Inspect(tv.Token)
		if err != nil || info.Kid != tv.Kid || info.Scope != tv.Scope {
			t.Errorf("%s: Inspect = %+v, %v", tv.Name, info, err)
		}
	}
}

func TestJoseVectorsThroughCodecs(t *testing.T) {
	v := loadVectors(t)
	kr, _ := ParseKeyring(v.Keyring)
	find := func(name string) (string, string) {
		for _, tv := range v.Tokens {
			if tv.Name == name {
				return tv.Token, tv.Scope
			}
		}
		t.Fatalf("no vector %q", name)
		return "", ""
	}
	tok, scope := find("scoped string")
	if s, err := ENCRYPTED(attr.STR, Scope(scope), WithKeyring(kr)).Decode(tok); err != nil || s != "from-panva-jose" {
		t.Errorf("STR: %q, %v", s, err)
	}
	// The ratchet holds for foreign tokens too.
	if _, err := ENCRYPTED(attr.STR, WithKeyring(kr)).Decode(tok); !errors.Is(err, ErrScopeViolation) {
		t.Errorf("scoped jose token in an unscoped field: %v", err)
	}
	tok, scope = find("scoped record with unicode")
	r, err := ENCRYPTED(attr.RECORD, Scope(scope), WithKeyring(kr)).Decode(tok)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := r.Bytes(); string(b) != `{"pass":"p😀","user":"ü"}` {
		t.Errorf("RECORD: %s", b)
	}
	tok, scope = find("second key, big integer")
	if _, err := ENCRYPTED(attr.INT, Scope(scope), WithKeyring(kr)).Decode(tok); !errors.Is(err, ErrMalformed) {
		t.Errorf("out-of-range INT: %v", err)
	}
	if n, err := ENCRYPTED(attr.ANY, Scope(scope), WithKeyring(kr)).Decode(tok); err != nil || n != json.Number("12345678901234567890") {
		t.Errorf("ANY keeps the big integer: %#v, %v", n, err)
	}
	tok, scope = find("list")
	if l, err := ENCRYPTED(attr.LIST(attr.STR), Scope(scope), WithKeyring(kr)).Decode(tok); err != nil || len(l) != 2 || l[1] != "write" {
		t.Errorf("LIST: %v, %v", l, err)
	}
}

func TestJoseRejectVectors(t *testing.T) {
	v := loadVectors(t)
	kr, _ := ParseKeyring(v.Keyring)
	opens := countOpens(t)
	for _, rv := range v.Rejects {
		_, _, err := kr.Decrypt(rv.Token, "")
		if KindOf(err) != Kind(rv.Kind) {
			t.Errorf("%s: err = %v, want %s", rv.Name, err, rv.Kind)
		}
	}
	if *opens != 0 {
		t.Errorf("%d AEAD opens on rejected jose tokens", *opens)
	}
}
