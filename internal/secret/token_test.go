package secret

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flecht-dev/flecht/internal/attr"
)

func TestTokenShape(t *testing.T) {
	kr := testKeyring(t, false)
	tok, err := kr.Encrypt([]byte(`"sk-live-123"`), "api_key")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(tok, "flenc:jwe:") {
		t.Fatalf("prefix: %s", tok)
	}
	segs := strings.Split(strings.TrimPrefix(tok, Prefix), ".")
	if len(segs) != 5 || segs[1] != "" {
		t.Fatalf("want 5 segments with an empty encrypted key: %q", segs)
	}
	dec := base64.RawURLEncoding.Strict()
	hdr, err := dec.DecodeString(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	// Byte-exact: member order and compact separators as the Python
	// library's encoder writes them.
	if string(hdr) != `{"alg":"dir","enc":"A256GCM","kid":"a","flenc_scope":"api_key"}` {
		t.Errorf("header = %s", hdr)
	}
	iv, _ := dec.DecodeString(segs[2])
	ct, _ := dec.DecodeString(segs[3])
	tag, _ := dec.DecodeString(segs[4])
	if len(iv) != 12 || len(tag) != 16 {
		t.Fatalf("iv %d bytes, tag %d bytes", len(iv), len(tag))
	}
	// An independent AES-256-GCM open with AAD = the ASCII header segment.
	block, _ := aes.NewCipher(keyA)
	gcm, _ := cipher.NewGCM(block)
	pt, err := gcm.Open(nil, iv, append(ct, tag...), []byte(segs[0]))
	if err != nil || string(pt) != `"sk-live-123"` {
		t.Errorf("independent open: %q, %v", pt, err)
	}
}

func TestUnscopedHeaderOmitsScope(t *testing.T) {
	tok, _ := testKeyring(t, false).Encrypt([]byte(`1`), "")
	hdr, _ := base64.RawURLEncoding.DecodeString(strings.Split(strings.TrimPrefix(tok, Prefix), ".")[0])
	if string(hdr) != `{"alg":"dir","enc":"A256GCM","kid":"a"}` {
		t.Errorf("header = %s", hdr)
	}
}

func TestHeaderEscapesLikePython(t *testing.T) {
	// Expected bytes from CPython: json.dumps(h, separators=(",", ":")).
	got := string(headerJSON("k\u00e9\U0001F600/<\"\\\n\x01\x7f", "s"))
	want := `{"alg":"dir","enc":"A256GCM","kid":"k\u00e9\ud83d\ude00/<\"\\\n\u0001` + "\x7f" + `","flenc_scope":"s"}`
	if got != want {
		t.Errorf("header\n got %s\nwant %s", got, want)
	}
}

func TestRandomIVs(t *testing.T) {
	kr := testKeyring(t, false)
	a, _ := kr.Encrypt([]byte(`"s"`), "")
	b, _ := kr.Encrypt([]byte(`"s"`), "")
	if a == b {
		t.Error("two encryptions of one value gave one token: the IV is not fresh")
	}
}

func TestEncryptUsesPrimaryDecryptUsesKid(t *testing.T) {
	old := testKeyring(t, false) // primary a
	tok, _ := old.Encrypt([]byte(`"s"`), "")
	both, _ := old.AddKey("b", keyB)
	both, _ = both.Promote("b")
	if pt, kid, err := both.Decrypt(tok, ""); err != nil || kid != "a" || string(pt) != `"s"` {
		t.Errorf("old token after promotion: %q %q %v", pt, kid, err)
	}
	fresh, _ := both.Encrypt([]byte(`"s"`), "")
	if info, _ := Inspect(fresh); info.Kid != "b" {
		t.Errorf("new token kid = %q, want the primary b", info.Kid)
	}
	re, err := both.Reencrypt(tok, "")
	if info, _ := Inspect(re); err != nil || info.Kid != "b" {
		t.Errorf("Reencrypt: kid %q, %v", info.Kid, err)
	}
}

// Every header the acceptance rule refuses, refused before any cipher runs.
func TestAcceptanceRuleBeforeCrypto(t *testing.T) {
	kr := testKeyring(t, false)
	opens := countOpens(t)
	cases := map[string]string{
		"alg A256KW":         `{"alg":"A256KW","enc":"A256GCM","kid":"a"}`,
		"alg none":           `{"alg":"none","enc":"A256GCM","kid":"a"}`,
		"alg lower case":     `{"alg":"DIR","enc":"A256GCM","kid":"a"}`,
		"alg missing":        `{"enc":"A256GCM","kid":"a"}`,
		"alg not a string":   `{"alg":["dir"],"enc":"A256GCM","kid":"a"}`,
		"enc A128GCM":        `{"alg":"dir","enc":"A128GCM","kid":"a"}`,
		"enc CBC":            `{"alg":"dir","enc":"A256CBC-HS512","kid":"a"}`,
		"enc missing":        `{"alg":"dir","kid":"a"}`,
		"zip":                `{"alg":"dir","enc":"A256GCM","kid":"a","zip":"DEF"}`,
		"zip null":           `{"alg":"dir","enc":"A256GCM","kid":"a","zip":null}`,
		"crit":               `{"alg":"dir","enc":"A256GCM","kid":"a","crit":["flenc_scope"]}`,
		"crit empty":         `{"alg":"dir","enc":"A256GCM","kid":"a","crit":[]}`,
		"unknown member":     `{"alg":"dir","enc":"A256GCM","kid":"a","jku":"https://x"}`,
		"pbes2 huge p2c":     `{"alg":"PBES2-HS512+A256KW","enc":"A256GCM","kid":"a","p2c":2000000000,"p2s":"AAAAAAAAAAAAAAAAAAAAAA"}`,
		"pbes2 unknown kid":  `{"alg":"PBES2-HS512+A256KW","enc":"A256GCM","kid":"nobody","p2c":2000000000,"p2s":"AAAAAAAAAAAAAAAAAAAAAA"}`,
		"duplicate alg":      `{"alg":"dir","alg":"A256KW","enc":"A256GCM","kid":"a"}`,
		"duplicate harmless": `{"alg":"dir","enc":"A256GCM","enc":"A256GCM","kid":"a"}`,
	}
	for name, hdr := range cases {
		tok := handToken(t, keyA, hdr, []byte(`"s"`))
		start := time.Now()
		_, _, err := kr.Decrypt(tok, "")
		if !errors.Is(err, ErrHeaderRejected) {
			t.Errorf("%s: err = %v, want header_rejected", name, err)
		}
		if d := time.Since(start); d > 50*time.Millisecond {
			t.Errorf("%s: took %v; the rule must not do work", name, d)
		}
	}
	if *opens != 0 {
		t.Errorf("%d AEAD opens for rejected headers, want 0", *opens)
	}
	// The counter does count: an accepted token opens once.
	good := handToken(t, keyA, `{"alg":"dir","enc":"A256GCM","kid":"a","typ":"JWE"}`, []byte(`"s"`))
	if _, _, err := kr.Decrypt(good, ""); err != nil || *opens != 1 {
		t.Errorf("accepted token: err %v, opens %d", err, *opens)
	}
}

func TestMalformedTokens(t *testing.T) {
	kr := testKeyring(t, false)
	opens := countOpens(t)
	good, _ := kr.Encrypt([]byte(`"s"`), "")
	segs := strings.Split(strings.TrimPrefix(good, Prefix), ".")
	join := func(s ...string) string { return Prefix + strings.Join(s, ".") }
	b64 := base64.RawURLEncoding.EncodeToString
	cases := map[string]string{
		"other envelope":      "flenc:cbor:whatever",
		"envelope jwe2":       "flenc:jwe2:" + strings.TrimPrefix(good, Prefix),
		"no envelope":         "flenc:",
		"empty compact":       "flenc:jwe:",
		"4 segments":          join(segs[0], segs[1], segs[2], segs[3]),
		"6 segments":          join(append(segs, "x")...),
		"dots only":           "flenc:jwe:" + strings.Repeat(".", 100000),
		"header not base64":   join("@@", "", segs[2], segs[3], segs[4]),
		"header padded":       join(segs[0]+"=", "", segs[2], segs[3], segs[4]),
		"header not JSON":     join(b64([]byte("nope")), "", segs[2], segs[3], segs[4]),
		"header array":        join(b64([]byte(`["dir"]`)), "", segs[2], segs[3], segs[4]),
		"header empty":        join("", "", segs[2], segs[3], segs[4]),
		"no kid":              join(b64([]byte(`{"alg":"dir","enc":"A256GCM"}`)), "", segs[2], segs[3], segs[4]),
		"empty kid":           join(b64([]byte(`{"alg":"dir","enc":"A256GCM","kid":""}`)), "", segs[2], segs[3], segs[4]),
		"kid not a string":    join(b64([]byte(`{"alg":"dir","enc":"A256GCM","kid":["a"]}`)), "", segs[2], segs[3], segs[4]),
		"empty scope":         join(b64([]byte(`{"alg":"dir","enc":"A256GCM","kid":"a","flenc_scope":""}`)), "", segs[2], segs[3], segs[4]),
		"encrypted key set":   join(segs[0], "AAAA", segs[2], segs[3], segs[4]),
		"short iv":            join(segs[0], "", b64(make([]byte, 8)), segs[3], segs[4]),
		"iv not base64":       join(segs[0], "", "!!!!!!!!!!!!!!!!", segs[3], segs[4]),
		"ciphertext not b64":  join(segs[0], "", segs[2], "a+b/", segs[4]),
		"short tag":           join(segs[0], "", segs[2], segs[3], b64(make([]byte, 12))),
		"huge header":         join(strings.Repeat("A", 5000), "", segs[2], segs[3], segs[4]),
		"header invalid utf8": join(b64([]byte("{\"alg\":\"dir\",\"enc\":\"A256GCM\",\"kid\":\"\xff\"}")), "", segs[2], segs[3], segs[4]),
	}
	for name, tok := range cases {
		_, _, err := kr.Decrypt(tok, "")
		if !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: err = %v, want malformed", name, err)
		}
	}
	if *opens != 0 {
		t.Errorf("%d AEAD opens for malformed tokens, want 0", *opens)
	}
}

func TestUnknownKidAndTagMismatch(t *testing.T) {
	a := testKeyring(t, false)
	tok, _ := a.Encrypt([]byte(`"s"`), "")

	other, _ := (&Keyring{}).AddKey("z", keyB)
	_, _, err := other.Decrypt(tok, "")
	var e *Error
	if !errors.As(err, &e) || e.Kind != KindUnknownKid || e.Kid != "a" {
		t.Errorf("unknown kid: %v", err)
	}

	// The same kid bound to other bytes: the incident signature that reads
	// as tampering, kept apart from a missing key.
	impostor, _ := (&Keyring{}).AddKey("a", keyB)
	_, _, err = impostor.Decrypt(tok, "")
	if !errors.As(err, &e) || e.Kind != KindTagMismatch || e.Kid != "a" {
		t.Errorf("wrong bytes for known kid: %v", err)
	}

	segs := strings.Split(strings.TrimPrefix(tok, Prefix), ".")
	flip := func(s string) string {
		b, _ := base64.RawURLEncoding.DecodeString(s)
		b[0] ^= 1
		return base64.RawURLEncoding.EncodeToString(b)
	}
	for i, name := range map[int]string{2: "iv", 3: "ciphertext", 4: "tag"} {
		mod := append([]string(nil), segs...)
		mod[i] = flip(mod[i])
		_, _, err := a.Decrypt(Prefix+strings.Join(mod, "."), "")
		if !errors.Is(err, ErrTagMismatch) {
			t.Errorf("tampered %s: %v", name, err)
		}
	}
	// A header swapped for another accepted header fails authentication:
	// the header is the AAD.
	mod := append([]string(nil), segs...)
	mod[0] = base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"dir","enc":"A256GCM","kid":"a","typ":"JWE"}`))
	if _, _, err := a.Decrypt(Prefix+strings.Join(mod, "."), ""); !errors.Is(err, ErrTagMismatch) {
		t.Errorf("swapped header: %v", err)
	}
}

func TestScopeRatchet(t *testing.T) {
	kr := testKeyring(t, false)
	mint := func(scope string) string {
		tok, err := kr.Encrypt([]byte(`"s"`), scope)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	cases := []struct {
		name         string
		token, field string
		ok           bool
	}{
		{"scoped field, own scope", "api_key", "api_key", true},
		{"scoped field, unscoped token (upgrade path)", "", "api_key", true},
		{"unscoped field, unscoped token", "", "", true},
		{"unscoped field, scoped token (downgrade blocked)", "api_key", "", false},
		{"scope A field, scope B token (relocation)", "admin_token", "api_key", false},
	}
	for _, c := range cases {
		_, _, err := kr.Decrypt(mint(c.token), c.field)
		if c.ok && err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
		if !c.ok {
			var e *Error
			if !errors.As(err, &e) || e.Kind != KindScopeViolation || e.Scope != c.field || e.TokenScope != c.token || e.Kid != "a" {
				t.Errorf("%s: err = %#v", c.name, err)
			}
		}
	}
	// Reencrypt lifts an unscoped token into a scope and cannot strip one.
	lifted, err := kr.Reencrypt(mint(""), "api_key")
	if info, _ := Inspect(lifted); err != nil || info.Scope != "api_key" {
		t.Errorf("lift: %+v, %v", info, err)
	}
	if _, err := kr.Reencrypt(mint("api_key"), ""); !errors.Is(err, ErrScopeViolation) {
		t.Errorf("strip: %v", err)
	}
}

func TestNoKeyring(t *testing.T) {
	var kr *Keyring
	if _, err := kr.Encrypt([]byte(`1`), ""); !errors.Is(err, ErrNoKeyring) {
		t.Errorf("Encrypt: %v", err)
	}
	if _, _, err := kr.Decrypt("flenc:jwe:x", "s"); !errors.Is(err, ErrNoKeyring) {
		t.Errorf("Decrypt: %v", err)
	}
}

func TestInspect(t *testing.T) {
	tok, _ := testKeyring(t, false).Encrypt([]byte(`1`), "sc")
	info, err := Inspect(tok)
	if err != nil || info != (TokenInfo{Kid: "a", Scope: "sc"}) {
		t.Errorf("Inspect = %+v, %v", info, err)
	}
	if _, err := Inspect("plain"); !errors.Is(err, ErrMalformed) {
		t.Errorf("Inspect(plain) = %v", err)
	}
}

func TestIsEncrypted(t *testing.T) {
	for v, want := range map[string]bool{
		"flenc:jwe:x": true, "flenc:cbor:x": true, "flenc:": true,
		"https://x": false, "FLENC:jwe:x": false, "": false, "sk-live": false,
	} {
		if IsEncrypted(v) != want {
			t.Errorf("IsEncrypted(%q) = %v", v, !want)
		}
	}
}

func TestErrorsCarryNoSecrets(t *testing.T) {
	kr := testKeyring(t, false)
	secretText := "sk-live-TOPSECRET"
	tok, _ := kr.Encrypt([]byte(`"`+secretText+`"`), "s")
	impostor, _ := (&Keyring{}).AddKey("a", keyB)
	var errs []error
	_, _, err := impostor.Decrypt(tok, "s")
	errs = append(errs, err)
	_, _, err = kr.Decrypt(tok, "other")
	errs = append(errs, err)
	_, err = kr.AddKey("a", keyB)
	errs = append(errs, err)
	// A secret pasted after a stray "flenc:", or smuggled into a header's
	// alg, enc or member name: none of it may be echoed.
	for _, tok := range []string{
		"flenc:" + secretText,
		"flenc:" + secretText + ":x",
		handToken(t, keyA, `{"alg":"`+secretText+`","enc":"A256GCM","kid":"a"}`, []byte(`1`)),
		handToken(t, keyA, `{"alg":"dir","enc":"`+secretText+`","kid":"a"}`, []byte(`1`)),
		handToken(t, keyA, `{"alg":"dir","enc":"A256GCM","kid":"a","`+secretText+`":1}`, []byte(`1`)),
		handToken(t, keyA, `{"alg":"dir","`+secretText+`":1,"enc":"A256GCM","kid":"a","`+secretText+`":1}`, []byte(`1`)),
	} {
		_, _, err := kr.Decrypt(tok, "s")
		if err == nil {
			t.Fatalf("%s: opened", tok)
		}
		errs = append(errs, err)
	}
	for _, err := range errs {
		msg := err.Error()
		j, _ := err.(*Error).MarshalJSON()
		for _, leak := range []string{secretText, secretText[:8], base64.RawURLEncoding.EncodeToString(keyA), base64.RawURLEncoding.EncodeToString(keyB), string(keyA)} {
			if strings.Contains(msg, leak) || bytes.Contains(j, []byte(leak)) {
				t.Errorf("error leaks secret material: %s", msg)
			}
		}
	}
}

func TestScopeAndKidMustBeUTF8(t *testing.T) {
	kr := testKeyring(t, false)
	// Found by FuzzDecrypt: a non-UTF-8 scope was stamped as U+FFFD and the
	// token then failed its own field's ratchet.
	if _, err := kr.Encrypt([]byte(`1`), "\xa1"); !errors.Is(err, ErrMalformed) {
		t.Errorf("non-UTF-8 scope: %v", err)
	}
	if _, err := kr.AddKey("\xff", keyB); !errors.Is(err, ErrKeyringInvalid) {
		t.Errorf("non-UTF-8 kid: %v", err)
	}
}

// Every token Encrypt writes must parse: a kid and scope whose header
// exceeds what a reader accepts are refused when sealing, not discovered
// when the token will not open.
func TestEncryptRefusesOversizedHeader(t *testing.T) {
	kr := testKeyring(t, false)
	fixed := len(headerJSON("a", "")) + len(`,"flenc_scope":""`)
	fits := strings.Repeat("s", maxHdr/4*3-fixed)
	tok, err := kr.Encrypt([]byte(`1`), fits)
	if err != nil {
		t.Fatalf("largest scope: %v", err)
	}
	if _, _, err := kr.Decrypt(tok, fits); err != nil {
		t.Errorf("largest scope does not open: %v", err)
	}
	_, err = kr.Encrypt([]byte(`1`), fits+"s")
	if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "protected header") {
		t.Errorf("oversized header: %v", err)
	}
}

// One keyring serves every bucket of a stage at once (run with -race).
func TestConcurrentUse(t *testing.T) {
	kr := testKeyring(t, true)
	rec := &recorder{}
	field := ENCRYPTED(attr.STR, Scope("s"), WithKeyring(kr), WithObserver(rec))
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				v := fmt.Sprintf("secret-%d-%d", g, i)
				w, err := field.Encode(v)
				if err != nil {
					t.Error(err)
					return
				}
				if got, err := field.Decode(w); err != nil || got != v {
					t.Errorf("got %q, %v", got, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if len(rec.decrypted) != 400 {
		t.Errorf("observer saw %d decrypts, want 400", len(rec.decrypted))
	}
}

// A message names text taken from a value only when it is an identifier the
// message expects (a registered alg, enc or header name): then it helps the
// operator, and it cannot be a pasted secret.
func TestErrorsNameOnlyKnownIdentifiers(t *testing.T) {
	kr := testKeyring(t, false)
	cases := []struct{ header, want string }{
		{`{"alg":"A256KW","enc":"A256GCM","kid":"a"}`, `alg "A256KW" is not accepted`},
		{`{"alg":"PBES2-HS512+A256KW","enc":"A256GCM","kid":"a"}`, `"PBES2-HS512+A256KW"`},
		{`{"alg":"dir","enc":"A128CBC-HS256","kid":"a"}`, `enc "A128CBC-HS256" is not accepted`},
		{`{"alg":"dir","enc":"A256GCM","kid":"a","jku":"x"}`, `header member "jku" is outside`},
		{`{"alg":"hunter2","enc":"A256GCM","kid":"a"}`, `alg (7 chars) is not accepted`},
		{`{"alg":"dir","enc":"A256GCM","kid":"a","hunter2":1}`, `header member (7 chars) is outside`},
	}
	for _, c := range cases {
		_, _, err := kr.Decrypt(handToken(t, keyA, c.header, []byte(`1`)), "")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want it to contain %s", c.header, err, c.want)
		}
	}
	_, _, err := kr.Decrypt("flenc:cbor:abc", "")
	if err == nil || !strings.Contains(err.Error(), `envelope "cbor"`) {
		t.Errorf("known envelope: %v", err)
	}
	_, _, err = kr.Decrypt("flenc:hunter2", "")
	if err == nil || !strings.Contains(err.Error(), "envelope (7 chars)") {
		t.Errorf("unknown envelope: %v", err)
	}
}

// A kid chosen by whoever wrote the token is clipped in messages.
func TestErrorClipsLongKids(t *testing.T) {
	kid := strings.Repeat("k", 3000)
	err := &Error{Kind: KindUnknownKid, Kid: kid, TokenScope: kid}
	if n := len(err.Error()); n > 400 {
		t.Errorf("message of %d bytes", n)
	}
	if !strings.Contains(err.Error(), "…") {
		t.Errorf("clip not marked: %s", err.Error()[:80])
	}
}

// TestEnvelopeMessagesOfBothParsers pins what the flenc and flsig readers
// say of a value whose envelope or segment count is wrong: one set of
// checks serves both, each naming its own scheme and serialization.
func TestEnvelopeMessagesOfBothParsers(t *testing.T) {
	long := strings.Repeat("A", maxHdr+1)
	for _, c := range []struct {
		tok, want string
		parse     func(string) (TokenInfo, error)
	}{
		{"flenc:", `unknown flenc envelope (0 chars), this reader knows only jwe`, Inspect},
		{"flenc:jwe", `no compact JWE after "flenc:jwe"`, Inspect},
		{"flenc:cbor:x", `unknown flenc envelope "cbor", this reader knows only jwe`, Inspect},
		{"flenc:sk-live-123:x", `unknown flenc envelope (11 chars), this reader knows only jwe`, Inspect},
		{"flenc:jwe:a.b.c.d", `a compact JWE has 5 segments`, Inspect},
		{"flenc:jwe:" + long + "....", `protected header longer than 4096 characters`, Inspect},
		{"flsig:jws", `no compact JWS after "flsig:jws"`, InspectSigned},
		{"flsig:jwe:x", `unknown flsig envelope "jwe", this reader knows only jws`, InspectSigned},
		{"flsig:jws:a.b", `a compact JWS has 3 segments`, InspectSigned},
		{"flsig:jws:" + long + "..", `protected header longer than 4096 characters`, InspectSigned},
		{"flenc:jwe:a.b.c", `not a flsig: value`, InspectSigned},
		{"flsig:jws:a.b.c", `not a flenc: value`, Inspect},
	} {
		_, err := c.parse(c.tok)
		var e *Error
		if !errors.As(err, &e) || e.Kind != KindMalformed || e.Detail != c.want {
			t.Errorf("%.20q: %v, want malformed: %s", c.tok, err, c.want)
		}
	}
}

// A line break in the header segment is malformed before any crypto, as
// upstream says, not a tag mismatch after it.
func TestHeaderLineBreakIsMalformed(t *testing.T) {
	kr, err := NewKeyring("k")
	if err != nil {
		t.Fatal(err)
	}
	tok, err := kr.Encrypt([]byte(`"v"`), "")
	if err != nil {
		t.Fatal(err)
	}
	hdrEnd := len(Prefix) + 10
	broken := tok[:hdrEnd] + "\n" + tok[hdrEnd:]
	opened := 0
	beforeOpen = func() { opened++ }
	defer func() { beforeOpen = nil }()
	if _, _, err := kr.Decrypt(broken, ""); KindOf(err) != KindMalformed {
		t.Fatalf("a line break in the header: %v, want %s", err, KindMalformed)
	}
	if opened != 0 {
		t.Errorf("the cipher ran %d times on a malformed token", opened)
	}
}

// A remembered header gives the verdict a fresh parse gives, for every
// token that shares it, and a refused header is refused every time.
func TestRememberedHeadersKeepTheirVerdicts(t *testing.T) {
	kr := testKeyring(t, false)
	for i := range 3 {
		tok, err := kr.Encrypt([]byte(`1`), "sc")
		if err != nil {
			t.Fatal(err)
		}
		info, err := Inspect(tok)
		if err != nil || info != (TokenInfo{Kid: "a", Scope: "sc"}) {
			t.Fatalf("token %d: Inspect = %+v, %v", i, info, err)
		}
		if p, kid, err := kr.Decrypt(tok, "sc"); err != nil || string(p) != "1" || kid != "a" {
			t.Fatalf("token %d: Decrypt = %s, %s, %v", i, p, kid, err)
		}
	}
	zipped := handToken(t, seq(0), `{"alg":"dir","enc":"A256GCM","kid":"a","zip":"DEF"}`, []byte(`1`))
	for i := range 2 {
		if _, err := Inspect(zipped); !errors.Is(err, ErrHeaderRejected) {
			t.Fatalf("call %d: a zip header: %v", i, err)
		}
	}
}
