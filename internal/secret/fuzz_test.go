package secret

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"unicode/utf8"
)

// FuzzDecrypt: any string through any field scope either opens or fails with
// one *Error of a token kind, never panics, and a keyless Inspect agrees with
// the keyed path on every keyless verdict.
func FuzzDecrypt(f *testing.F) {
	kr := testKeyring(f, true)
	for _, scope := range []string{"", "api_key"} {
		tok, _ := kr.Encrypt([]byte(`"seed"`), scope)
		f.Add(tok, scope)
		f.Add(tok, "other")
	}
	if b, err := os.ReadFile(filepath.Join("testdata", "interop", "vectors.json")); err == nil {
		var v vectors
		json.Unmarshal(b, &v)
		for _, tv := range v.Tokens {
			f.Add(tv.Token, tv.Scope)
		}
		for _, rv := range v.Rejects {
			f.Add(rv.Token, "")
		}
	}
	for _, s := range []string{"flenc:jwe:", "flenc:cbor:x", "flenc:jwe:....", "flenc:jwe:e30....", "plain"} {
		f.Add(s, "")
	}
	tokenKinds := []Kind{KindMalformed, KindHeaderRejected, KindUnknownKid, KindTagMismatch, KindScopeViolation}
	f.Fuzz(func(t *testing.T, tok, scope string) {
		payload, kid, err := kr.Decrypt(tok, scope)
		info, inspectErr := Inspect(tok)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || !slices.Contains(tokenKinds, e.Kind) {
				t.Fatalf("error %T %v", err, err)
			}
			if inspectErr != nil && KindOf(inspectErr) != e.Kind {
				t.Fatalf("Inspect says %v, Decrypt says %v", inspectErr, err)
			}
			return
		}
		if inspectErr != nil || info.Kid != kid {
			t.Fatalf("opened a token Inspect rejects: %v", inspectErr)
		}
		if info.Scope != "" && info.Scope != scope {
			t.Fatalf("scope ratchet broken: token %q opened in field %q", info.Scope, scope)
		}
		// What opens re-seals and opens to the same bytes; a scope that is
		// not UTF-8 cannot be stamped faithfully, so it may not seal.
		again, err := kr.Reencrypt(tok, scope)
		if len(b64url.EncodeToString(headerJSON(kr.Primary(), scope))) > maxHdr {
			// A header no reader accepts is refused at write time.
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("sealed a token whose header readers refuse: %v", err)
			}
			return
		}
		if !utf8.ValidString(scope) {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("sealed under a non-UTF-8 scope: %v", err)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		p2, _, err := kr.Decrypt(again, scope)
		if err != nil || !bytes.Equal(p2, payload) {
			t.Fatalf("re-encryption changed the payload: %v", err)
		}
	})
}

// FuzzParseKeyring: any document either parses to a keyring whose own JWKS
// parses back to an equal keyring, or fails with KindKeyringInvalid.
func FuzzParseKeyring(f *testing.F) {
	f.Add([]byte(doc(jwk("a", kA)+","+jwk("b", kB), `"b"`)))
	f.Add([]byte(`{"keys":[{"kty":"oct","kid":"a","k":"` + kA + `","use":"enc"}],"primary":"a","x":1}`))
	f.Add([]byte(doc(jwk("a", kA)+","+jwk("a", kB), `"a"`)))
	f.Add([]byte(`{"keys":[],"primary":""}`))
	f.Add([]byte(`[]`))
	if b, err := os.ReadFile(filepath.Join("testdata", "interop", "vectors.json")); err == nil {
		var v vectors
		json.Unmarshal(b, &v)
		f.Add([]byte(v.Keyring))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		kr, err := ParseKeyring(in)
		if err != nil {
			if !errors.Is(err, ErrKeyringInvalid) {
				t.Fatalf("error %T %v", err, err)
			}
			return
		}
		if !kr.Has(kr.Primary()) {
			t.Fatal("primary not among the keys")
		}
		out, err := kr.JWKS()
		if err != nil {
			t.Fatal(err)
		}
		again, err := ParseKeyring(out)
		if err != nil || !again.Equal(kr) {
			t.Fatalf("JWKS does not round-trip: %v\n%s", err, out)
		}
		// A keyring whose primary is bound seals no unscoped value.
		if _, err := kr.Encrypt([]byte(`1`), ""); err != nil && !errors.Is(err, ErrKeyBinding) {
			t.Fatal(err)
		}
	})
}

// FuzzOpen017: any string through any scope, against a keyring of every
// kind, either opens or fails with one *Error of a token kind; Inspect's
// verdict is Open's whenever Inspect refuses; what opens re-seals.
func FuzzOpen017(f *testing.F) {
	kr, err := ParseKeyring([]byte(fullDoc()))
	if err != nil {
		f.Fatal(err)
	}
	for _, scope := range []string{"", "api"} {
		tok, _ := kr.Encrypt([]byte(`"seed"`), scope)
		f.Add(tok, scope)
	}
	if b, err := os.ReadFile(filepath.Join("testdata", "upstream", "vectors.json")); err == nil {
		var v upstreamVectors
		json.Unmarshal(b, &v)
		for _, tv := range v.Tokens {
			f.Add(tv.Token, tv.Scope)
		}
		for _, rv := range v.Rejects {
			f.Add(rv.Token, rv.Scope)
		}
	}
	kinds := []Kind{KindMalformed, KindHeaderRejected, KindUnknownKid, KindTagMismatch, KindScopeViolation, KindKeyBinding, KindSealOnly}
	f.Fuzz(func(t *testing.T, tok, scope string) {
		payload, info, err := kr.Open(tok, scope)
		_, inspectErr := Inspect(tok)
		if err != nil {
			if !slices.Contains(kinds, KindOf(err)) {
				t.Fatalf("error %T %v", err, err)
			}
			if inspectErr != nil && KindOf(inspectErr) != KindOf(err) {
				t.Fatalf("Inspect says %v, Open says %v", inspectErr, err)
			}
			return
		}
		if inspectErr != nil {
			t.Fatalf("opened a token Inspect rejects: %v", inspectErr)
		}
		if info.Scope != "" && info.Scope != scope {
			t.Fatalf("scope ratchet broken")
		}
		again, err := kr.Reencrypt(tok, scope)
		if err != nil {
			return // the scope's sealing key may refuse it (binding, header size, UTF-8)
		}
		if p2, _, err := kr.Open(again, scope); err != nil || !bytes.Equal(p2, payload) {
			t.Fatalf("re-sealing changed the payload: %v", err)
		}
	})
}

// FuzzVerify: any string through any scope either verifies or fails with one
// *Error of a signature kind, and InspectSigned agrees on keyless verdicts.
func FuzzVerify(f *testing.F) {
	kr, err := ParseKeyring([]byte(fullDoc()))
	if err != nil {
		f.Fatal(err)
	}
	tok, _ := kr.Sign([]byte(`{"a":1}`), "api")
	f.Add(tok, "api")
	f.Add(tok, "cfg")
	f.Add("flsig:jws:..", "api")
	kinds := []Kind{KindMalformed, KindHeaderRejected, KindUnknownSigner, KindBadSignature, KindScopeViolation, KindKeyBinding}
	f.Fuzz(func(t *testing.T, tok, scope string) {
		_, info, err := kr.Verify(tok, scope)
		_, inspectErr := InspectSigned(tok)
		if err != nil {
			if !slices.Contains(kinds, KindOf(err)) {
				t.Fatalf("error %T %v", err, err)
			}
			if scope != "" && inspectErr != nil && KindOf(inspectErr) != KindOf(err) {
				t.Fatalf("InspectSigned says %v, Verify says %v", inspectErr, err)
			}
			return
		}
		if inspectErr != nil || info.Scope != scope {
			t.Fatalf("verified %+v for scope %q, inspect %v", info, scope, inspectErr)
		}
	})
}

// FuzzReadKeyring: any document, plain or protected, either loads to a
// keyring whose own document loads back equal, or fails with a keyring kind.
func FuzzReadKeyring(f *testing.F) {
	withIterations(f, MinProtectedIterations)
	f.Add([]byte(fullDoc()))
	kr, _ := ParseKeyring([]byte(fullDoc()))
	p, _ := kr.Protect([]byte("fourteen bytes!"))
	prot, _ := p.Document()
	f.Add(prot)
	if b, err := os.ReadFile(filepath.Join("testdata", "upstream", "vectors.json")); err == nil {
		var v upstreamVectors
		json.Unmarshal(b, &v)
		for _, d := range v.Keyrings {
			f.Add([]byte(d))
		}
		f.Add([]byte(v.Protected))
	}
	pw := func() ([]byte, error) { return []byte("fourteen bytes!"), nil }
	f.Fuzz(func(t *testing.T, in []byte) {
		kr, err := ReadKeyring(in, pw)
		if err != nil {
			if k := KindOf(err); k != KindKeyringInvalid && k != KindKeyringPassword {
				t.Fatalf("error %T %v", err, err)
			}
			return
		}
		out, err := kr.JWKS()
		if err != nil {
			t.Fatal(err)
		}
		again, err := ParseKeyring(out)
		if err != nil || !again.Equal(kr) {
			t.Fatalf("JWKS does not round-trip: %v\n%s", err, out)
		}
	})
}
