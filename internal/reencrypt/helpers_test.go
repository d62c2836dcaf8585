package reencrypt

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/flecht-dev/flecht/internal/attr"
	"github.com/flecht-dev/flecht/internal/secret"
)

// rings returns a keyring with old (primary) and, rotated, the same keys
// with new as primary.
func rings(t testing.TB) (old, rotated *secret.Keyring) {
	t.Helper()
	old, err := secret.NewKeyring("old")
	if err != nil {
		t.Fatal(err)
	}
	rotated, err = old.Add("new")
	if err != nil {
		t.Fatal(err)
	}
	if rotated, err = rotated.Promote("new"); err != nil {
		t.Fatal(err)
	}
	return old, rotated
}

func mustTok(t testing.TB, kr *secret.Keyring, payload, scope string) string {
	t.Helper()
	tok, err := kr.Encrypt([]byte(payload), scope)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func mustFields(t testing.TB, specs ...string) []Field {
	t.Helper()
	fs, err := ParseFields(specs)
	if err != nil {
		t.Fatal(err)
	}
	return fs
}

// masked replaces the value at each path with a constant, so two record
// values can be compared byte for byte apart from their secrets.
func masked(t testing.TB, value []byte, paths ...string) []byte {
	t.Helper()
	out := value
	for _, p := range paths {
		var err error
		if out, err = attr.ReplaceField(out, attr.SplitPath(p), []byte(`"MASKED"`)); err != nil {
			t.Fatalf("masking %s: %v", p, err)
		}
	}
	return out
}

// opened decrypts the token at path of value through scope.
func opened(t testing.TB, kr *secret.Keyring, value []byte, path, scope string) (payload, kid string) {
	t.Helper()
	raw, err := attr.LookupField(value, attr.SplitPath(path))
	if err != nil {
		t.Fatalf("%s: %v in %s", path, err, value)
	}
	var tok string
	if err := json.Unmarshal(raw, &tok); err != nil {
		t.Fatalf("%s is not a string: %s", path, raw)
	}
	p, k, err := kr.Decrypt(tok, scope)
	if err != nil {
		t.Fatalf("%s does not open: %v", path, err)
	}
	return string(p), k
}

func tokenKid(t testing.TB, raw []byte) string {
	t.Helper()
	var tok string
	if err := json.Unmarshal(raw, &tok); err != nil {
		t.Fatalf("not a string: %s", raw)
	}
	info, err := secret.Inspect(tok)
	if err != nil {
		t.Fatalf("not a token: %v", err)
	}
	return info.Kid
}

// jsonOf renders a report for "never contains" checks.
func jsonOf(t testing.TB, v any) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.NewEncoder(&b).Encode(v); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func containsAny(s string, subs ...string) string {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return sub
		}
	}
	return ""
}

func tp(topic string, p int32) TP { return TP{Topic: topic, Partition: p} }

// transformWith runs the sweep's rule with the keyring's targets for the
// fields.
func transformWith(value []byte, fields []Field, kr *secret.Keyring, encryptPlaintext bool) (transformed, error) {
	return transform(value, fields, rule{kr: kr, targets: targetsFor(kr, fields), encryptPlaintext: encryptPlaintext})
}
