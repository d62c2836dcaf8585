package secret

import (
	"bytes"
	"crypto/ecdh"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flecht-dev/flecht/internal/attr"
)

// Fixed OKP test keys: X25519 and Ed25519 pairs from fixed private halves.
var (
	xPriv, _ = ecdh.X25519().NewPrivateKey(seq(64))
	xD, xX   = b64(xPriv.Bytes()), b64(xPriv.PublicKey().Bytes())
	edPriv   = ed25519.NewKeyFromSeed(seq(96))
	edD, edX = b64(edPriv.Seed()), b64(edPriv.Public().(ed25519.PublicKey))
)

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func okp(kid, crv, x, d, scopes string) string {
	s := `{"kty":"OKP","crv":"` + crv + `","kid":"` + kid + `","x":"` + x + `"`
	if d != "" {
		s += `,"d":"` + d + `"`
	}
	if scopes != "" {
		s += `,"flenc_scopes":` + scopes
	}
	return s + "}"
}

// fullDoc: oct "a" (primary), X25519 "r" bound to api (primary for api),
// Ed25519 "s" bound to api and cfg (signing for both).
func fullDoc() string {
	return `{"keys":[` + jwk("a", kA) + "," + okp("r", "X25519", xX, xD, `["api"]`) + "," +
		okp("s", "Ed25519", edX, edD, `["api","cfg"]`) + `],"primary":"a",` +
		`"flenc_primaries":{"api":"r"},"flenc_signing":{"api":"s","cfg":"s"}}`
}

func mustParse(t testing.TB, d string) *Keyring {
	t.Helper()
	kr, err := ParseKeyring([]byte(d))
	if err != nil {
		t.Fatal(err)
	}
	return kr
}

// Each of upstream's rules, and _parse_jwk's order, with the exact kid or
// scope the message names.
func TestParseKeyringRules(t *testing.T) {
	x := okp("r", "X25519", xX, xD, `["api"]`)
	s := okp("s", "Ed25519", edX, edD, `["api"]`)
	cases := []struct{ name, doc, want string }{
		{"rule 1: signers only", `{"keys":[` + s + `],"primary":"s"}`, "at least one key"},
		{"keys absent", `{"primary":"a"}`, "at least one key"},
		{"keys null", `{"keys":null,"primary":"a"}`, `"keys" must be a JSON array`},
		{"duplicate across kinds", doc(jwk("r", kA)+","+x, `"r"`), `duplicate kid "r"`},
		{"duplicate before bad material", doc(jwk("a", kA)+`,{"kty":"oct","kid":"a","k":"!"}`, `"a"`), `duplicate kid "a"`},
		{"scopes before material", doc(`{"kty":"oct","kid":"a","k":"!","flenc_scopes":[]}`, `"a"`), `JWK "a": "flenc_scopes"`},
		{"scopes with empty name", doc(`{"kty":"oct","kid":"a","k":"`+kA+`","flenc_scopes":[""]}`, `"a"`), `JWK "a": "flenc_scopes"`},
		{"bad crv", doc(jwk("a", kA)+","+okp("p", "P-256", xX, "", `["x"]`), `"a"`), `JWK "p" has an unsupported curve`},
		{"x missing", doc(jwk("a", kA)+`,{"kty":"OKP","crv":"X25519","kid":"r","flenc_scopes":["x"]}`, `"a"`), `JWK "r" has no "x"`},
		{"d malformed", doc(jwk("a", kA)+","+okp("r", "X25519", xX, "@@", `["x"]`), `"a"`), `JWK "r" has malformed base64url "d"`},
		{"rule 3: public length", doc(jwk("a", kA)+","+okp("r", "X25519", xX[:20], "", `["x"]`), `"a"`), `X25519 key "r" has a 15-byte public half`},
		{"rule 3: private length", doc(jwk("a", kA)+","+okp("s", "Ed25519", edX, edD[:20], `["x"]`), `"a"`), `Ed25519 key "s" has a 15-byte private half`},
		{"rule 4: signer as primary", doc(jwk("a", kA)+","+s, `"s"`), `primary "s" is not among the sealing keys ["a"]`},
		{"rule 6: unbound recipient", doc(jwk("a", kA)+","+okp("r", "X25519", xX, "", ""), `"a"`), `public-key kid "r" must be bound`},
		{"rule 7: empty scope", strings.Replace(fullDoc(), `"flenc_primaries":{"api":"r"}`, `"flenc_primaries":{"":"a"}`, 1), `flenc_primaries map an empty scope to "a"`},
		{"rule 7: not sealing", strings.Replace(fullDoc(), `"flenc_primaries":{"api":"r"}`, `"flenc_primaries":{"api":"s"}`, 1), `scope "api" to "s", which is not a sealing key`},
		{"rule 7: unknown kid", strings.Replace(fullDoc(), `"flenc_primaries":{"api":"r"}`, `"flenc_primaries":{"api":"zz"}`, 1), `scope "api" to "zz", which is not a sealing key`},
		{"rule 7: outside binding", strings.Replace(fullDoc(), `"flenc_primaries":{"api":"r"}`, `"flenc_primaries":{"db":"r"}`, 1), `scope "db" to "r", which is not bound to it`},
		{"rule 8: not a signer", strings.Replace(fullDoc(), `"cfg":"s"`, `"cfg":"a"`, 1), `scope "cfg" to "a", which is not a private signing key`},
		{"rule 8: outside binding", strings.Replace(fullDoc(), `"cfg":"s"`, `"db":"s"`, 1), `scope "db" to "s", which is not bound to it`},
		{"rule 8: public only", strings.Replace(fullDoc(), `,"d":"`+edD+`"`, "", 1), `scope "api" to "s", which is not a private signing key`},
		{"map not strings", strings.Replace(fullDoc(), `{"api":"r"}`, `{"api":1}`, 1), `"flenc_primaries" must be a JSON object`},
	}
	for _, c := range cases {
		_, err := ParseKeyring([]byte(c.doc))
		if !errors.Is(err, ErrKeyringInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v\n  want %q", c.name, err, c.want)
		}
		for _, secret := range []string{kA, xD, edD} {
			if err != nil && strings.Contains(err.Error(), secret) {
				t.Errorf("%s: error shows key material", c.name)
			}
		}
	}
}

func TestKeyringRoundTripKeepsEveryMember(t *testing.T) {
	in := strings.Replace(fullDoc(), `"primary":"a"`, `"primary":"a","x_future":{"v":2}`, 1)
	in = strings.Replace(in, `"kid":"r"`, `"kid":"r","use":"enc"`, 1)
	kr := mustParse(t, in)
	out, err := kr.JWKS()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasSuffix(out, []byte("}\n")) || !bytes.Contains(out, []byte("\n  \"flenc_primaries\": {")) ||
		!bytes.Contains(out, []byte(`"use": "enc"`)) || !bytes.Contains(out, []byte(`"x_future": {`)) {
		t.Errorf("JWKS:\n%s", out)
	}
	if again := mustParse(t, string(out)); !again.Equal(kr) {
		t.Error("round trip changed the keyring")
	}
	// Redaction covers every kind.
	for _, s := range []string{kr.String(), fmt.Sprintf("%#v %+v %v", kr, kr, kr.byKid["s"])} {
		for _, secret := range []string{kA, xD, edD} {
			if strings.Contains(s, secret) {
				t.Errorf("printed key material: %s", s)
			}
		}
	}
	if b, _ := kr.MarshalJSON(); bytes.Contains(b, []byte(xD)) || bytes.Contains(b, []byte(edD)) {
		t.Errorf("MarshalJSON shows key material: %s", b)
	}
}

func TestMismatchedHalvesLoadButRefuseAtUse(t *testing.T) {
	other, _ := ecdh.X25519().NewPrivateKey(seq(1))
	d := strings.Replace(fullDoc(), `"d":"`+xD+`"`, `"d":"`+b64(other.Bytes())+`"`, 1)
	kr := mustParse(t, d)
	if e, _ := kr.Entry("r"); !e.Mismatch {
		t.Error("mismatch not reported")
	}
	good := mustParse(t, fullDoc())
	tok, _ := good.Encrypt([]byte(`1`), "api")
	for name, err := range map[string]error{
		"open": func() error { _, _, err := kr.Open(tok, "api"); return err }(),
		"seal": func() error { _, err := kr.Encrypt([]byte(`1`), "api"); return err }(),
	} {
		var e *Error
		if !errors.As(err, &e) || e.Kind != KindKeyringInvalid || e.Kid != "r" {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestEditsValidateAndRemoveRefusesRoles(t *testing.T) {
	kr := mustParse(t, fullDoc())
	for _, c := range []struct {
		kid, want string
	}{{"a", "primary"}, {"r", `sealing key of scope "api"`}, {"s", `signing key of scope "api"`}} {
		_, err := kr.Remove(c.kid)
		var e *Error
		if !errors.As(err, &e) || e.Kind != KindKeyringConflict || e.Kid != c.kid || !strings.Contains(e.Detail, c.want) {
			t.Errorf("remove %s: %v", c.kid, err)
		}
	}
	if _, err := kr.Promote("s"); !errors.Is(err, ErrKeyringConflict) {
		t.Errorf("promote a signer: %v", err)
	}
	if _, err := kr.SetPrimaryFor("db", "r"); !errors.Is(err, ErrKeyringConflict) || !strings.Contains(err.Error(), `"db"`) {
		t.Errorf("primary-for outside binding: %v", err)
	}
	if _, err := kr.SetSigningFor("db", "s"); !errors.Is(err, ErrKeyringConflict) {
		t.Errorf("signing-for outside binding: %v", err)
	}
	if _, err := kr.Generate("z", TypeX25519, nil); !errors.Is(err, ErrKeyringConflict) {
		t.Errorf("unbound X25519: %v", err)
	}
	if _, err := kr.Generate("bad\nkid", TypeOct, nil); !errors.Is(err, ErrKeyringInvalid) {
		t.Errorf("bad kid: %v", err)
	}
	// Moving the roles first lets the removal through.
	next, err := kr.ClearSigningFor("api")
	if err == nil {
		next, err = next.ClearSigningFor("cfg")
	}
	if err == nil {
		next, err = next.Remove("s")
	}
	if err != nil || next.Has("s") || !kr.Has("s") {
		t.Fatalf("remove after clearing: %v", err)
	}
	// Export and import: the public half only, scopes kept, no duplicates.
	pub, err := kr.PublicJWK("r")
	if err != nil || bytes.Contains(pub, []byte(xD)) || !bytes.Contains(pub, []byte(`"flenc_scopes"`)) {
		t.Fatalf("export: %s %v", pub, err)
	}
	if _, err := kr.PublicJWK("a"); !errors.Is(err, ErrKeyringConflict) {
		t.Errorf("export oct: %v", err)
	}
	if _, err := kr.Import(pub); !errors.Is(err, ErrKeyringConflict) {
		t.Errorf("import a held kid: %v", err)
	}
	w, err := NewKeyring("w")
	if err == nil {
		w, err = w.Import(pub)
	}
	if err != nil {
		t.Fatal(err)
	}
	if e, _ := w.Entry("r"); e.Private || e.Type != TypeX25519 {
		t.Errorf("imported %+v", e)
	}
	if k, err := w.Generate("sig", TypeEd25519, []string{"cfg"}); err != nil || k.Type("sig") != TypeEd25519 {
		t.Errorf("generate ed25519: %v", err)
	}
}

func TestTokensOfBothGenerations(t *testing.T) {
	kr := mustParse(t, fullDoc())
	seal := func(scope string) string {
		tok, err := kr.Encrypt([]byte(`"v"`), scope)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	ecdhTok, dirTok := seal("api"), seal("")
	if h, _ := InspectHeader(ecdhTok); h.Alg != algECDH || h.Kid != "r" || h.Scope != "api" {
		t.Errorf("scope api sealed as %+v", h)
	}
	if h, _ := InspectHeader(dirTok); h.Alg != algDir || h.Kid != "a" {
		t.Errorf("unscoped sealed as %+v", h)
	}
	if p, info, err := kr.Open(ecdhTok, "api"); err != nil || string(p) != `"v"` || info.Kid != "r" {
		t.Errorf("open ecdh: %q %v", p, err)
	}
	// The binding on seal: "db" goes to the primary, which is unbound, so
	// it seals; a keyring whose primary is bound refuses an unscoped value.
	bound := mustParse(t, `{"keys":[`+okp("r", "X25519", xX, xD, `["api"]`)+`],"primary":"r"}`)
	if _, err := bound.Encrypt([]byte(`1`), ""); !errors.Is(err, ErrKeyBinding) {
		t.Errorf("bound primary sealed unscoped: %v", err)
	}
	// The binding on open: a token stamped outside the key's binding.
	wide := mustParse(t, `{"keys":[`+okp("r", "X25519", xX, xD, `["api","db"]`)+`],"primary":"r","flenc_primaries":{"db":"r"}}`)
	dbTok, _ := wide.Encrypt([]byte(`1`), "db")
	if _, _, err := bound.Open(dbTok, "db"); !errors.Is(err, ErrKeyBinding) {
		t.Errorf("opened outside the binding: %v", err)
	}
	// Seal-only.
	sealOnly := mustParse(t, strings.Replace(fullDoc(), `,"d":"`+xD+`"`, "", 1))
	fromWriter, err := sealOnly.Encrypt([]byte(`"w"`), "api")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := sealOnly.Open(fromWriter, "api"); !errors.Is(err, ErrSealOnly) {
		t.Errorf("seal-only opened: %v", err)
	}
	if p, _, err := kr.Open(fromWriter, "api"); err != nil || string(p) != `"w"` {
		t.Errorf("reader cannot open the writer's token: %v", err)
	}
	if _, err := sealOnly.DeriveKey("x"); err != nil {
		t.Errorf("oct primary derives: %v", err)
	}
	if _, err := bound.DeriveKey("x"); err != nil {
		t.Errorf("X25519 primary with d derives: %v", err)
	}
	pubOnly := mustParse(t, `{"keys":[`+okp("r", "X25519", xX, "", `["api"]`)+`],"primary":"r"}`)
	if _, err := pubOnly.DeriveKey("x"); !errors.Is(err, ErrSealOnly) {
		t.Errorf("seal-only primary derived: %v", err)
	}
	// An Ed25519 kid opens nothing.
	sTok := handToken(t, keyA, `{"alg":"dir","enc":"A256GCM","kid":"s"}`, []byte(`1`))
	if _, _, err := kr.Open(sTok, ""); !errors.Is(err, ErrUnknownKid) || !strings.Contains(err.Error(), "signing key") {
		t.Errorf("Ed25519 kid: %v", err)
	}
}

// The kind of the key behind the kid picks the allowlist, before any crypto.
func TestKeyKindPicksTheAllowlist(t *testing.T) {
	kr := mustParse(t, fullDoc())
	ecdhTok, _ := kr.Encrypt([]byte(`1`), "api")
	asOct := mustParse(t, doc(jwk("r", kA), `"r"`))
	dirOnR, _ := asOct.Encrypt([]byte(`1`), "api")
	opens := countOpens(t)
	if _, _, err := asOct.Open(ecdhTok, "api"); !errors.Is(err, ErrHeaderRejected) {
		t.Errorf("ECDH header on an oct kid: %v", err)
	}
	if _, _, err := kr.Open(dirOnR, "api"); !errors.Is(err, ErrHeaderRejected) {
		t.Errorf("dir header on an X25519 kid: %v", err)
	}
	if *opens != 0 {
		t.Errorf("%d crypto steps before the refusal", *opens)
	}
	// Keyless, both profiles are accepted; each violation of one is refused.
	segs := strings.Split(strings.TrimPrefix(ecdhTok, Prefix), ".")
	hdr, _ := b64url.DecodeString(segs[0])
	for name, c := range map[string]struct {
		from, to string
		kind     Kind
	}{
		"epk with d":     {`"kty":"OKP"}`, `"kty":"OKP","d":"AA"}`, KindHeaderRejected},
		"epk P-256":      {`"crv":"X25519"`, `"crv":"P-256"`, KindHeaderRejected},
		"apu":            {`"enc":"A256GCM"`, `"enc":"A256GCM","apu":""`, KindHeaderRejected},
		"apv":            {`"enc":"A256GCM"`, `"enc":"A256GCM","apv":""`, KindHeaderRejected},
		"zip":            {`"enc":"A256GCM"`, `"enc":"A256GCM","zip":"DEF"`, KindHeaderRejected},
		"crit":           {`"enc":"A256GCM"`, `"enc":"A256GCM","crit":["x"]`, KindHeaderRejected},
		"no epk":         {`,"epk"`, `,"x_epk"`, KindHeaderRejected},
		"ECDH-ES direct": {`"ECDH-ES+A256KW"`, `"ECDH-ES"`, KindHeaderRejected},
		"A128KW":         {`"ECDH-ES+A256KW"`, `"ECDH-ES+A128KW"`, KindHeaderRejected},
	} {
		h := strings.Replace(string(hdr), c.from, c.to, 1)
		tok := Prefix + b64url.EncodeToString([]byte(h)) + "." + strings.Join(segs[1:], ".")
		if _, err := Inspect(tok); KindOf(err) != c.kind {
			t.Errorf("%s: %v", name, err)
		}
	}
	// A low-order epk: all-zero shared secret, refused.
	zero := strings.Replace(string(hdr), `"x":"`, `"x":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA","y":"`, 1)
	zero = strings.Replace(zero, `,"y":"`+segsX(hdr)+`"`, "", 1)
	tok := Prefix + b64url.EncodeToString([]byte(zero)) + "." + strings.Join(segs[1:], ".")
	if _, _, err := kr.Open(tok, "api"); !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "low-order") {
		t.Errorf("low-order epk: %v", err)
	}
	// Tampered encrypted key: tag_mismatch.
	wrapped, _ := b64url.DecodeString(segs[1])
	wrapped[0] ^= 1
	tok = Prefix + segs[0] + "." + b64url.EncodeToString(wrapped) + "." + strings.Join(segs[2:], ".")
	if _, _, err := kr.Open(tok, "api"); !errors.Is(err, ErrTagMismatch) {
		t.Errorf("tampered key: %v", err)
	}
}

// segsX returns the epk x of an ECDH header.
func segsX(hdr []byte) string {
	s := string(hdr)
	i := strings.Index(s, `"x":"`) + 5
	return s[i : i+strings.Index(s[i:], `"`)]
}

func TestSignedValues(t *testing.T) {
	kr := mustParse(t, fullDoc())
	tok, err := kr.Sign([]byte(`{"a":1}`), "api")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(tok, SignedPrefix) {
		t.Fatal(tok)
	}
	segs := strings.Split(strings.TrimPrefix(tok, SignedPrefix), ".")
	if h, _ := b64url.DecodeString(segs[0]); string(h) != `{"alg":"Ed25519","flenc_scope":"api","kid":"s"}` {
		t.Errorf("header %s", h)
	}
	if p, info, err := kr.Verify(tok, "api"); err != nil || string(p) != `{"a":1}` || info.Kid != "s" {
		t.Errorf("verify: %q %v", p, err)
	}
	if _, err := kr.Sign([]byte(`1`), "db"); !errors.Is(err, ErrNoSigningKey) {
		t.Errorf("no signing key: %v", err)
	}
	if _, err := kr.Sign([]byte(`1`), ""); !errors.Is(err, ErrNoSigningKey) {
		t.Errorf("unscoped sign: %v", err)
	}
	tampered := SignedPrefix + segs[0] + "." + b64url.EncodeToString([]byte(`{"a":2}`)) + "." + segs[2]
	if _, _, err := kr.Verify(tampered, "api"); !errors.Is(err, ErrBadSignature) {
		t.Errorf("tampered: %v", err)
	}
	if _, _, err := kr.Verify(tok, "cfg"); !errors.Is(err, ErrScopeViolation) {
		t.Errorf("other scope: %v", err)
	}
	if _, _, err := mustParse(t, doc(jwk("a", kA), `"a"`)).Verify(tok, "api"); !errors.Is(err, ErrUnknownSigner) {
		t.Errorf("unknown signer: %v", err)
	}
	asOct := mustParse(t, doc(jwk("s", kA), `"s"`))
	if _, _, err := asOct.Verify(tok, "api"); !errors.Is(err, ErrUnknownSigner) || !strings.Contains(err.Error(), "oct") {
		t.Errorf("oct kid as signer: %v", err)
	}
	// A signer bound to api only reads no cfg value, even one signed for cfg.
	cfgTok, _ := kr.Sign([]byte(`1`), "cfg")
	narrow := mustParse(t, strings.Replace(strings.Replace(fullDoc(), `["api","cfg"]`, `["api"]`, 1), `,"cfg":"s"`, "", 1))
	if _, _, err := narrow.Verify(cfgTok, "cfg"); !errors.Is(err, ErrKeyBinding) {
		t.Errorf("signer outside its binding: %v", err)
	}
	// The header allowlist, keyless, before any crypto.
	opens := countOpens(t)
	for name, c := range map[string]struct {
		hdr  string
		kind Kind
	}{
		"EdDSA":     {`{"alg":"EdDSA","flenc_scope":"api","kid":"s"}`, KindHeaderRejected},
		"no scope":  {`{"alg":"Ed25519","kid":"s"}`, KindMalformed},
		"crit":      {`{"alg":"Ed25519","crit":["b64"],"flenc_scope":"api","kid":"s"}`, KindHeaderRejected},
		"b64":       {`{"alg":"Ed25519","b64":false,"flenc_scope":"api","kid":"s"}`, KindHeaderRejected},
		"jwk":       {`{"alg":"Ed25519","flenc_scope":"api","jwk":{},"kid":"s"}`, KindHeaderRejected},
		"x5c":       {`{"alg":"Ed25519","flenc_scope":"api","kid":"s","x5c":[]}`, KindHeaderRejected},
		"unknown":   {`{"alg":"Ed25519","flenc_scope":"api","kid":"s","x":1}`, KindHeaderRejected},
		"duplicate": {`{"alg":"Ed25519","alg":"Ed25519","flenc_scope":"api","kid":"s"}`, KindHeaderRejected},
	} {
		bad := SignedPrefix + b64url.EncodeToString([]byte(c.hdr)) + "." + segs[1] + "." + segs[2]
		if _, _, err := kr.Verify(bad, "api"); KindOf(err) != c.kind {
			t.Errorf("%s: %v", name, err)
		}
	}
	if *opens != 0 {
		t.Errorf("%d signature checks on refused headers", *opens)
	}
	if _, err := InspectSigned(SignedPrefix + segs[0] + "." + segs[1] + ".AAAA"); !errors.Is(err, ErrMalformed) {
		t.Errorf("short signature: %v", err)
	}
}

func TestSignedCodec(t *testing.T) {
	kr := mustParse(t, fullDoc())
	rec := &recorder{}
	c := SIGNED(attr.INT, "api", WithKeyring(kr), WithObserver(rec))
	w, err := c.Encode(7)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := c.Decode(w); err != nil || v != 7 || len(rec.verified) != 1 {
		t.Errorf("round trip: %v %v %v", v, err, rec.verified)
	}
	if _, err := c.Decode(json7()); !errors.Is(err, ErrUnsigned) {
		t.Errorf("unsigned in a strict field: %v", err)
	}
	m := SIGNED(attr.INT, "api", WithKeyring(kr), WithObserver(rec), ReadUnsigned(), WithLogger(discard()))
	if v, err := m.Decode(json7()); err != nil || v != 7 || len(rec.unsigned) != 1 || rec.unsigned[0] != "api" {
		t.Errorf("read unsigned: %v %v %v", v, err, rec.unsigned)
	}
	if s, ok := SignedOf(c); !ok || s.Scope() != "api" || s.ReadsUnsigned() {
		t.Errorf("SignedOf: %v %v", s, ok)
	}
	if _, ok := SignedOf(ENCRYPTED(attr.INT)); ok {
		t.Error("SignedOf found a signed field in ENCRYPTED(INT)")
	}
	// ENCRYPTED(SIGNED) end to end through flecht's own writer.
	es := ENCRYPTED(SIGNED(attr.STR, "api", WithKeyring(kr)), Scope("api"), WithKeyring(kr))
	tok, err := es.Encode("pw")
	if err != nil {
		t.Fatal(err)
	}
	if v, err := es.Decode(tok); err != nil || v != "pw" {
		t.Errorf("ENCRYPTED(SIGNED): %q %v", v, err)
	}
	// A token of an unsigned value: the inner SIGNED's kind is the
	// reason, as upstream raises UnsignedSecretError, not "malformed".
	unsigned, _ := ENCRYPTED(attr.STR, Scope("api"), WithKeyring(kr)).Encode("pw")
	if _, err := es.Decode(unsigned); !errors.Is(err, ErrUnsigned) {
		t.Errorf("ENCRYPTED(SIGNED) of an unsigned value: %v", err)
	}
	// Another inner codec's failure stays malformed, without the value.
	notInt, _ := ENCRYPTED(attr.STR, Scope("api"), WithKeyring(kr)).Encode("SECRET-x")
	if _, err := ENCRYPTED(attr.INT, Scope("api"), WithKeyring(kr)).Decode(notInt); !errors.Is(err, ErrMalformed) || strings.Contains(err.Error(), "SECRET") {
		t.Errorf("ENCRYPTED(INT) of a string: %v", err)
	}
	if c.String() != `SIGNED(INT, scope="api")` {
		t.Errorf("String = %s", c.String())
	}
}

func json7() any { v, _ := attr.ParseJSON([]byte(`7`)); return v }

// TestSignValue: the write-side boundary signs with the field's codec and
// refuses a field that does not sign, naming it but never the value.
func TestSignValue(t *testing.T) {
	kr := mustParse(t, fullDoc())
	endpoint := attr.New("endpoint", SIGNED(attr.STR, "api", WithKeyring(kr)))
	tok, err := SignValue(endpoint, "https://hooks.example/7")
	if err != nil {
		t.Fatal(err)
	}
	if payload, info, err := kr.Verify(tok, "api"); err != nil || string(payload) != `"https://hooks.example/7"` || info.Scope != "api" {
		t.Errorf("Verify = %s %+v %v", payload, info, err)
	}
	for _, a := range []attr.Attribute[string]{
		attr.New("plain", attr.STR),
		attr.New("sealed", ENCRYPTED(SIGNED(attr.STR, "api", WithKeyring(kr)), Scope("api"), WithKeyring(kr))),
	} {
		_, err := SignValue(a, "SECRET-v")
		if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), a.String()+" is not a signed attribute") || strings.Contains(err.Error(), "SECRET") {
			t.Errorf("SignValue(%s) = %v", a.Name(), err)
		}
	}
	if _, err := EncryptValue(endpoint, "x"); err == nil || !strings.Contains(err.Error(), endpoint.String()+" is not an encrypted attribute") {
		t.Errorf("EncryptValue on a SIGNED field = %v", err)
	}
}

func TestProtectedKeyringFile(t *testing.T) {
	withIterations(t, 2000)
	kr := mustParse(t, fullDoc())
	pw := []byte("fourteen bytes!")
	if _, err := kr.Protect([]byte("thirteen byte")); !errors.Is(err, ErrKeyringPassword) {
		t.Errorf("short password: %v", err)
	}
	p, err := kr.Protect(pw)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "k.json")
	if err := p.Save(path); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(path)
	if !IsProtectedDocument(raw) || bytes.Contains(raw, []byte(`"keys"`)) || !bytes.HasSuffix(raw, []byte("\n")) {
		t.Fatalf("saved %s", raw)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", fi.Mode())
	}
	if _, _, err := Load(path); !errors.Is(err, ErrKeyringPassword) {
		t.Errorf("load without a password: %v", err)
	}
	pwFile := filepath.Join(dir, "pw")
	os.WriteFile(pwFile, append(bytes.Clone(pw), '\n'), 0o600)
	loaded, _, err := Load(path, WithPassword(PasswordFile(pwFile)))
	if err != nil || !loaded.Equal(kr) || !loaded.Protected() {
		t.Fatalf("load: %v", err)
	}
	// An edit of a protected keyring saves protected again, same password.
	next, _ := loaded.Add("b")
	if err := next.Save(path); err != nil {
		t.Fatal(err)
	}
	again, err := ReadKeyring(mustRead(t, path), func() ([]byte, error) { return pw, nil })
	if err != nil || !again.Has("b") {
		t.Fatalf("re-saved: %v", err)
	}
	if plain, _ := again.Unprotect().Document(); IsProtectedDocument(plain) {
		t.Error("unprotected document is protected")
	}
	// The header profile is checked before any derivation.
	segs := strings.Split(strings.TrimSpace(string(raw)), ".")
	hdr, _ := b64url.DecodeString(segs[0])
	opens := countOpens(t)
	for name, c := range map[string]struct{ from, to, want string }{
		"p2c too high": {`"p2c":2000`, `"p2c":300001`, "1000 to 300000"},
		"p2c huge":     {`"p2c":2000`, `"p2c":99999999999999999999`, "1000 to 300000"},
		"p2c too low":  {`"p2c":2000`, `"p2c":999`, "1000 to 300000"},
		"p2c float":    {`"p2c":2000`, `"p2c":2000.0`, "integer"},
		"other alg":    {`"PBES2-HS512+A256KW"`, `"PBES2-HS256+A128KW"`, "alg"},
		"zip":          {`"enc":"A256GCM"`, `"enc":"A256GCM","zip":"DEF"`, "zip"},
		"crit":         {`"enc":"A256GCM"`, `"enc":"A256GCM","crit":["p2c"]`, "crit"},
		"unknown":      {`"enc":"A256GCM"`, `"enc":"A256GCM","x":1`, "outside"},
		"short salt":   {`"p2s":"`, `"p2s":"AAAA","q":"`, "p2s"},
	} {
		h := strings.Replace(string(hdr), c.from, c.to, 1)
		d := b64url.EncodeToString([]byte(h)) + "." + strings.Join(segs[1:], ".")
		_, err := OpenProtected([]byte(d), pw)
		if !errors.Is(err, ErrKeyringInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if *opens != 0 {
		t.Errorf("%d derivations for refused headers", *opens)
	}
	if _, err := OpenProtected(raw, []byte("wrong password!!")); !errors.Is(err, ErrKeyringPassword) || strings.Contains(err.Error(), "wrong password!!") {
		t.Errorf("wrong password: %v", err)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// The written header is upstream's: p2c 210000, a 16-byte p2s, cty
// jwk-set+json; two writes never share a salt.
func TestProtectedHeaderAsUpstreamWrites(t *testing.T) {
	kr := mustParse(t, fullDoc())
	var salts []string
	for range 2 {
		d, err := kr.SealProtected([]byte("fourteen bytes!"))
		if err != nil {
			t.Fatal(err)
		}
		hdr, _ := b64url.DecodeString(strings.SplitN(string(d), ".", 2)[0])
		var h struct {
			Alg, Cty, Enc, P2s string
			P2c                int
		}
		if err := json.Unmarshal(hdr, &h); err != nil {
			t.Fatal(err)
		}
		p2s, _ := b64url.DecodeString(h.P2s)
		if h.Alg != ProtectedAlg || h.Cty != "jwk-set+json" || h.Enc != "A256GCM" || h.P2c != 210000 || len(p2s) != 16 {
			t.Errorf("header %s", hdr)
		}
		salts = append(salts, h.P2s)
	}
	if salts[0] == salts[1] {
		t.Error("two writes share a salt")
	}
}

// A password file is read as flechtctl reads it (Python's text mode:
// UTF-8, universal newlines, then one trailing newline dropped), so one
// password file opens a keyring in both tools.
func TestPasswordFileReadAsFlechtctlReadsIt(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ file, want string }{
		{"correct horse battery\n", "correct horse battery"},
		{"correct horse battery", "correct horse battery"},
		{"correct horse battery\r\n", "correct horse battery"},
		{"correct horse battery\r", "correct horse battery"},
		{"correct horse battery\n\n", "correct horse battery\n"},
		{"line one\r\nline two\rthree\n", "line one\nline two\nthree"},
		{"pässwort mit umlaut\n", "pässwort mit umlaut"},
	} {
		path := filepath.Join(dir, "pw")
		if err := os.WriteFile(path, []byte(c.file), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := PasswordFile(path)()
		if err != nil || string(got) != c.want {
			t.Errorf("%q: got %q, %v; want %q", c.file, got, err, c.want)
		}
	}
	path := filepath.Join(dir, "latin1")
	os.WriteFile(path, []byte("correct horse b\xe9ttery\n"), 0o600)
	if _, err := PasswordFile(path)(); !errors.Is(err, ErrKeyringPassword) || !strings.Contains(err.Error(), "UTF-8") ||
		strings.Contains(err.Error(), "horse") {
		t.Errorf("a password file that is not UTF-8: %v", err)
	}
}
