package secret

import (
	"bytes"
	"errors"
	"log/slog"
	"reflect"
	"strings"
	"testing"

	"github.com/flecht-dev/flecht/internal/attr"
)

func TestEncryptedFieldRoundTrip(t *testing.T) {
	kr := testKeyring(t, false)
	rec := &recorder{}
	apiKey := attr.New("api_key", ENCRYPTED(attr.STR, Scope("api_key"), WithKeyring(kr), WithObserver(rec)))
	url := attr.New("url", attr.STR)

	cfg, err := attr.Build[attr.Config](apiKey.Of("sk-live-123"), url.Of("https://api"))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := cfg.RawValue("api_key")
	tok, ok := raw.(string)
	if !ok || !strings.HasPrefix(tok, Prefix) {
		t.Fatalf("wire value %v is not a token", raw)
	}
	b, _ := cfg.Bytes()
	if bytes.Contains(b, []byte("sk-live-123")) {
		t.Fatal("plaintext on the wire")
	}
	got, err := apiKey.MustGet(cfg)
	if err != nil || got != "sk-live-123" {
		t.Fatalf("read back %q, %v", got, err)
	}
	if len(rec.decrypted) != 1 || rec.decrypted[0] != [2]string{"api_key", "a"} {
		t.Errorf("observer saw %v", rec.decrypted)
	}
	// A spread that does not touch the field keeps the token byte for byte
	// (no re-encryption, so a carried-forward state stays stable).
	next, _ := cfg.With(url.Of("https://api2"))
	if v, _ := next.RawValue("api_key"); v != tok {
		t.Error("spread re-encrypted an untouched field")
	}
}

func TestEncryptedPayloadIsInnerWireJSON(t *testing.T) {
	kr := testKeyring(t, false)
	creds := ENCRYPTED(attr.DICT(attr.ANY), WithKeyring(kr))
	w, err := creds.Encode(map[string]any{"user": "ü", "n": 12345678901234567890.0, "z": true})
	if err != nil {
		t.Fatal(err)
	}
	payload, _, err := kr.Decrypt(w.(string), "")
	if err != nil {
		t.Fatal(err)
	}
	// Canonical JSON as Python writes it: sorted keys, compact, UTF-8,
	// floats in repr form.
	if string(payload) != `{"n":1.2345678901234567e+19,"user":"ü","z":true}` {
		t.Errorf("payload = %s", payload)
	}
}

func TestEncryptedComposes(t *testing.T) {
	kr := testKeyring(t, false)
	each := attr.LIST(ENCRYPTED(attr.STR, WithKeyring(kr)))
	w, err := each.Encode([]string{"a", "b"})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range w.([]any) {
		if !IsEncrypted(e.(string)) {
			t.Errorf("element %v not encrypted", e)
		}
	}
	back, err := each.Decode(w)
	if err != nil || !reflect.DeepEqual(back, []string{"a", "b"}) {
		t.Errorf("LIST(ENCRYPTED) = %v, %v", back, err)
	}
	whole := ENCRYPTED(attr.LIST(attr.INT), WithKeyring(kr))
	w, _ = whole.Encode([]int64{1, 2})
	if n, err := whole.Decode(w); err != nil || !reflect.DeepEqual(n, []int64{1, 2}) {
		t.Errorf("ENCRYPTED(LIST(INT)) = %v, %v", n, err)
	}
	if s := whole.String(); s != "ENCRYPTED(LIST(INT))" {
		t.Errorf("String = %s", s)
	}
	if s := ENCRYPTED(attr.STR, Scope("k"), ReadPlaintext()).String(); s != `ENCRYPTED(STR, scope="k", read_plaintext)` {
		t.Errorf("String = %s", s)
	}
}

func TestStrictFieldRejectsPlaintext(t *testing.T) {
	rec := &recorder{}
	apiKey := attr.New("api_key", ENCRYPTED(attr.STR, Scope("api_key"), WithKeyring(testKeyring(t, false)), WithObserver(rec)))
	cfg, _ := attr.Wrap[attr.Config](map[string]any{"api_key": "sk-live-pasted"})
	_, err := apiKey.MustGet(cfg)
	var e *Error
	if !errors.As(err, &e) || e.Kind != KindPlaintext || e.Scope != "api_key" {
		t.Fatalf("err = %v", err)
	}
	if strings.Contains(err.Error(), "sk-live-pasted") {
		t.Error("the error repeats the pasted secret")
	}
	if len(rec.plaintext) != 0 {
		t.Error("a rejected plaintext counted as a plaintext read")
	}
	// A non-string value is plaintext too.
	if _, err := ENCRYPTED(attr.INT).Decode(nil); !errors.Is(err, ErrPlaintext) {
		t.Errorf("null: %v", err)
	}
}

func TestReadPlaintextWarnsAndCounts(t *testing.T) {
	var logs bytes.Buffer
	rec := &recorder{}
	migrating := ENCRYPTED(attr.STR, Scope("m"), ReadPlaintext(), WithKeyring(testKeyring(t, false)),
		WithObserver(rec), WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	v, err := migrating.Decode("legacy-SECRET-value")
	if err != nil || v != "legacy-SECRET-value" {
		t.Fatalf("Decode = %q, %v", v, err)
	}
	if len(rec.plaintext) != 1 || rec.plaintext[0] != "m" {
		t.Errorf("observer: %v", rec.plaintext)
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "scope=m") {
		t.Errorf("no warning: %q", logs.String())
	}
	if strings.Contains(logs.String(), "legacy-SECRET-value") {
		t.Error("the warning logs the secret")
	}
	// Ciphertext still decodes in migration mode, and counts as a decrypt.
	w, _ := migrating.Encode("s")
	if v, err := migrating.Decode(w); err != nil || v != "s" || len(rec.decrypted) != 1 {
		t.Errorf("ciphertext in migration: %q %v %v", v, err, rec.decrypted)
	}
	// A flenc: value with another envelope is an error, never plaintext.
	if _, err := migrating.Decode("flenc:cbor:abc"); !errors.Is(err, ErrMalformed) {
		t.Errorf("unknown envelope: %v", err)
	}
	if len(rec.plaintext) != 1 {
		t.Error("a flenc: value was read as plaintext")
	}
	// Plaintext that does not fit the inner codec: no value in the error.
	_, err = ENCRYPTED(attr.DATE, ReadPlaintext(), WithLogger(slog.New(slog.DiscardHandler))).Decode("not-a-date-SECRET")
	if !errors.Is(err, ErrMalformed) || strings.Contains(err.Error(), "SECRET") {
		t.Errorf("bad plaintext: %v", err)
	}
}

func TestDecryptedPayloadThatDoesNotFit(t *testing.T) {
	kr := testKeyring(t, false)
	tok, _ := kr.Encrypt([]byte(`"2026-99-99-SECRET"`), "")
	_, err := ENCRYPTED(attr.DATE, WithKeyring(kr)).Decode(tok)
	if !errors.Is(err, ErrMalformed) || strings.Contains(err.Error(), "SECRET") {
		t.Errorf("inner decode failure: %v", err)
	}
	tok, _ = kr.Encrypt([]byte(`not json SECRET`), "")
	_, err = ENCRYPTED(attr.STR, WithKeyring(kr)).Decode(tok)
	if !errors.Is(err, ErrMalformed) || strings.Contains(err.Error(), "SECRET") {
		t.Errorf("non-JSON payload: %v", err)
	}
	_, err = ENCRYPTED(attr.STR, WithKeyring(kr)).Encode(string([]byte{0xff}))
	if !errors.Is(err, ErrMalformed) {
		t.Errorf("unencodable value: %v", err)
	}
}

func TestProcessKeyring(t *testing.T) {
	withProcess(t, nil, nil)
	field := ENCRYPTED(attr.STR, Scope("s"))
	if _, err := field.Encode("x"); !errors.Is(err, ErrNoKeyring) {
		t.Errorf("encode without keyring: %v", err)
	}
	if _, err := field.Decode("flenc:jwe:x"); !errors.Is(err, ErrNoKeyring) {
		t.Errorf("decode without keyring: %v", err)
	}
	kr := testKeyring(t, false)
	if err := Install(kr); err != nil {
		t.Fatal(err)
	}
	if err := Install(testKeyring(t, false)); err != nil {
		t.Errorf("same material again: %v", err)
	}
	if err := Install(testKeyring(t, true)); !errors.Is(err, ErrKeyringConflict) {
		t.Errorf("different material: %v", err)
	}
	rec, other := &recorder{}, &recorder{}
	var logs bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, nil)))
	t.Cleanup(func() { slog.SetDefault(prev) })
	SetObserver(rec)
	SetObserver(rec)   // the same observer again: silent
	SetObserver(other) // ignored: the first wins, with a warning
	if strings.Count(logs.String(), "level=WARN") != 1 {
		t.Errorf("want one warning for the second observer, got %q", logs.String())
	}
	w, err := field.Encode("x")
	if err != nil {
		t.Fatal(err)
	}
	if v, err := field.Decode(w); err != nil || v != "x" {
		t.Errorf("Decode = %q, %v", v, err)
	}
	if len(rec.decrypted) != 1 || len(other.decrypted) != 0 {
		t.Errorf("observers: first %v, second %v", rec.decrypted, other.decrypted)
	}
	if Installed() != kr {
		t.Error("Installed")
	}
}

func TestEncryptValueAndSealedOf(t *testing.T) {
	kr := testKeyring(t, false)
	apiKey := attr.New("api_key", ENCRYPTED(attr.STR, Scope("api_key"), WithKeyring(kr)))
	tok, err := EncryptValue(apiKey, "v")
	if err != nil {
		t.Fatal(err)
	}
	if info, _ := Inspect(tok); info.Scope != "api_key" {
		t.Errorf("scope %q", info.Scope)
	}
	if _, err := EncryptValue(attr.New("name", attr.STR), "x"); err == nil {
		t.Error("EncryptValue on a plain attribute")
	}
	s, ok := SealedOf(apiKey.Codec())
	if !ok || s.Scope() != "api_key" || s.ReadsPlaintext() {
		t.Errorf("SealedOf = %v, %v", s, ok)
	}
	if _, ok := SealedOf(attr.STR); ok {
		t.Error("STR reported as encrypted")
	}
}

func TestEncryptedFieldErrorsSurviveAttrWrapping(t *testing.T) {
	kr := testKeyring(t, false)
	apiKey := attr.New("api_key", ENCRYPTED(attr.STR, Scope("api_key"), WithKeyring(kr)))
	adminTok, _ := kr.Encrypt([]byte(`"x"`), "admin_token")
	cfg, _ := attr.Wrap[attr.Config](map[string]any{"api_key": adminTok})
	_, err := apiKey.MustGet(cfg)
	var fe *attr.FieldError
	if !errors.As(err, &fe) || fe.Name != "api_key" || KindOf(err) != KindScopeViolation {
		t.Errorf("err = %v", err)
	}
}
