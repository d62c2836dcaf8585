package secret

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

var (
	kA = base64.RawURLEncoding.EncodeToString(keyA)
	kB = base64.RawURLEncoding.EncodeToString(keyB)
)

func doc(keys string, primary string) string {
	return `{"keys":[` + keys + `],"primary":` + primary + `}`
}

func jwk(kid, k string) string {
	return fmt.Sprintf(`{"kty":"oct","kid":%q,"k":%q}`, kid, k)
}

func TestParseKeyring(t *testing.T) {
	kr, err := ParseKeyring([]byte(doc(jwk("prod-2025-01", kA)+","+jwk("prod-2026-07", kB), `"prod-2026-07"`)))
	if err != nil {
		t.Fatal(err)
	}
	if kr.Primary() != "prod-2026-07" || strings.Join(kr.Kids(), ",") != "prod-2025-01,prod-2026-07" {
		t.Errorf("parsed %v", kr)
	}
	want := []KeyInfo{{"prod-2025-01", false}, {"prod-2026-07", true}}
	if got := kr.List(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("List = %v", got)
	}
}

func TestParseKeyringRejects(t *testing.T) {
	cases := map[string]string{
		"not JSON":           `{`,
		"empty":              ``,
		"array":              `[]`,
		"no keys":            `{"primary":"a"}`,
		"keys not array":     `{"keys":{},"primary":"a"}`,
		"zero keys":          doc(``, `"a"`),
		"no primary":         `{"keys":[` + jwk("a", kA) + `]}`,
		"primary not string": doc(jwk("a", kA), `1`),
		"primary unknown":    doc(jwk("a", kA), `"b"`),
		"duplicate kid":      doc(jwk("a", kA)+","+jwk("a", kB), `"a"`),
		"empty kid":          doc(jwk("", kA), `""`),
		"kid missing":        doc(`{"kty":"oct","k":"`+kA+`"}`, `"a"`),
		"kid not string":     doc(`{"kty":"oct","kid":1,"k":"`+kA+`"}`, `"a"`),
		"kty RSA":            doc(`{"kty":"RSA","kid":"a","k":"`+kA+`"}`, `"a"`),
		"kty missing":        doc(`{"kid":"a","k":"`+kA+`"}`, `"a"`),
		"k missing":          doc(`{"kty":"oct","kid":"a"}`, `"a"`),
		"k 16 bytes":         doc(jwk("a", base64.RawURLEncoding.EncodeToString(keyA[:16])), `"a"`),
		"k 33 bytes":         doc(jwk("a", base64.RawURLEncoding.EncodeToString(append(keyA, 0))), `"a"`),
		"k with newline":     doc(jwk("a", kA[:20]+`\n`+kA[20:]), `"a"`),
		"entry not object":   doc(`"x"`, `"a"`),
	}
	for name, d := range cases {
		_, err := ParseKeyring([]byte(d))
		if !errors.Is(err, ErrKeyringInvalid) {
			t.Errorf("%s: err = %v", name, err)
			continue
		}
		if strings.Contains(err.Error(), kA) || strings.Contains(err.Error(), kA[:20]) {
			t.Errorf("%s: error shows key material: %v", name, err)
		}
	}
}

// Key material decodes as upstream's _decode_key does: either base64
// alphabet, padding optional, non-canonical trailing bits tolerated.
func TestParseKeyringDecodesKeyMaterialAsUpstream(t *testing.T) {
	std := base64.RawStdEncoding.EncodeToString(append([]byte{0xfb, 0xff}, keyA[2:]...))
	for name, k := range map[string]string{
		"padded":        kA + "=",
		"std alphabet":  std,
		"std padded":    std + "=",
		"trailing bits": kA[:len(kA)-1] + "h",
	} {
		kr, err := ParseKeyring([]byte(doc(jwk("a", k), `"a"`)))
		if err != nil || kr.Type("a") != TypeOct {
			t.Errorf("%s: %v", name, err)
		}
	}
	for name, k := range map[string]string{"three pads": kA + "===", "inner pad": kA[:20] + "=" + kA[21:], "space": " " + kA} {
		if _, err := ParseKeyring([]byte(doc(jwk("a", k), `"a"`))); !errors.Is(err, ErrKeyringInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestJWKSRoundTripKeepsUnknownMembers(t *testing.T) {
	in := `{"keys":[{"kty":"oct","kid":"a","k":"` + kA + `","alg":"A256GCM","use":"enc"}],"primary":"a","comment":"ops"}`
	kr, err := ParseKeyring([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	out, err := kr.JWKS()
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatal(err)
	}
	key := m["keys"].([]any)[0].(map[string]any)
	if m["comment"] != "ops" || key["use"] != "enc" || key["alg"] != "A256GCM" || key["k"] != kA || key["kty"] != "oct" {
		t.Errorf("JWKS = %s", out)
	}
	again, err := ParseKeyring(out)
	if err != nil || !again.Equal(kr) {
		t.Errorf("re-parse: %v", err)
	}
}

func TestAddPromoteRemove(t *testing.T) {
	kr, err := NewKeyring("prod-2025-01")
	if err != nil {
		t.Fatal(err)
	}
	if kr.Primary() != "prod-2025-01" {
		t.Fatalf("primary %q", kr.Primary())
	}
	next, err := kr.Add("prod-2026-07")
	if err != nil {
		t.Fatal(err)
	}
	if next.Primary() != "prod-2025-01" || kr.Has("prod-2026-07") {
		t.Error("Add changed the primary or the original keyring")
	}
	if _, err := next.Add("prod-2026-07"); !errors.Is(err, ErrKeyringConflict) {
		t.Errorf("duplicate Add: %v", err)
	}
	if _, err := next.Add(""); !errors.Is(err, ErrKeyringInvalid) {
		t.Errorf("empty kid: %v", err)
	}
	if _, err := next.AddKey("short", keyA[:31]); !errors.Is(err, ErrKeyringInvalid) {
		t.Errorf("31-byte key: %v", err)
	}
	promoted, err := next.Promote("prod-2026-07")
	if err != nil || promoted.Primary() != "prod-2026-07" || next.Primary() != "prod-2025-01" {
		t.Fatalf("Promote: %v", err)
	}
	if _, err := promoted.Promote("nope"); !errors.Is(err, ErrUnknownKid) {
		t.Errorf("promote unknown: %v", err)
	}
	if _, err := promoted.Remove("prod-2026-07"); !errors.Is(err, ErrKeyringConflict) {
		t.Errorf("removing the primary must be refused: %v", err)
	}
	if _, err := promoted.Remove("nope"); !errors.Is(err, ErrUnknownKid) {
		t.Errorf("remove unknown: %v", err)
	}
	retired, err := promoted.Remove("prod-2025-01")
	if err != nil || retired.Has("prod-2025-01") || !promoted.Has("prod-2025-01") {
		t.Errorf("Remove: %v", err)
	}
	// Two fresh keys differ (crypto/rand, not a constant).
	k1, _ := NewKeyring("x")
	k2, _ := NewKeyring("x")
	if k1.Equal(k2) {
		t.Error("two random keys are equal")
	}
}

func TestKeyringNeverPrintsKeyBytes(t *testing.T) {
	kr := testKeyring(t, true)
	type holder struct {
		KR   *Keyring
		kr   *Keyring
		Val  Keyring
		List []KeyInfo
	}
	h := holder{KR: kr, kr: kr, Val: *kr, List: kr.List()}
	j, err := json.Marshal(kr)
	if err != nil {
		t.Fatal(err)
	}
	outputs := []string{
		kr.String(), fmt.Sprint(kr), fmt.Sprintf("%v %+v %#v %s %q %x", kr, kr, kr, kr, kr, kr),
		fmt.Sprintf("%v %+v %#v", h, h, h), fmt.Sprintf("%#v", *kr), string(j),
		fmt.Sprintf("%v %#v", kr.keys[0], kr.keys),
	}
	for _, out := range outputs {
		for _, leak := range []string{kA, kB, fmt.Sprint(keyA), fmt.Sprintf("%x", keyA), string(keyA[1:8]), fmt.Sprintf("%#v", keyA[:4])} {
			if strings.Contains(out, leak) {
				t.Errorf("printed key material: %s", out)
			}
		}
	}
	if !strings.Contains(string(j), `"kid":"a"`) || !strings.Contains(string(j), `"primary":"a"`) {
		t.Errorf("redacted JSON lost the kids: %s", j)
	}
}

func TestKeyringEqual(t *testing.T) {
	a, b := testKeyring(t, true), testKeyring(t, true)
	if !a.Equal(b) {
		t.Error("same material not equal")
	}
	c, _ := b.Promote("b")
	impostor, _ := (&Keyring{}).AddKey("a", keyB)
	if a.Equal(c) || testKeyring(t, false).Equal(impostor) || a.Equal(nil) {
		t.Error("different keyrings equal")
	}
}

// A new kid must display in one piece: no control or other non-printable
// characters, no surrounding whitespace, at most MaxKidLen bytes. Loading
// stays as lenient as upstream (any non-empty string), so a keyring written
// elsewhere still loads, and such a keyring can still take new keys.
func TestNewKidsMustBePrintable(t *testing.T) {
	kr := testKeyring(t, false)
	for _, kid := range []string{" ", "\t", " a", "a ", "a\nb", "a\x00b", "a\x1b[2Jb", "a\u202eb", "a\u0085b", strings.Repeat("k", MaxKidLen+1)} {
		if _, err := kr.AddKey(kid, keyB); !errors.Is(err, ErrKeyringInvalid) {
			t.Errorf("AddKey(%q): %v", kid, err)
		}
		if _, err := NewKeyring(kid); !errors.Is(err, ErrKeyringInvalid) {
			t.Errorf("NewKeyring(%q): %v", kid, err)
		}
	}
	for _, kid := range []string{"prod-2026-07", "a b", "Zürich/1", strings.Repeat("k", MaxKidLen)} {
		if _, err := kr.AddKey(kid, keyB); err != nil {
			t.Errorf("AddKey(%q): %v", kid, err)
		}
	}
	loaded, err := ParseKeyring([]byte(doc(jwk(" odd\nkid ", kA), `" odd\nkid "`)))
	if err != nil {
		t.Fatalf("a keyring with an odd kid no longer loads: %v", err)
	}
	if next, err := loaded.Add("new"); err != nil || !next.Has(" odd\nkid ") {
		t.Errorf("adding to it: %v", err)
	}
}
