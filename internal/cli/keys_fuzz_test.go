package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flecht-dev/flecht/internal/secret"
	"github.com/flecht-dev/flecht/internal/ui"
)

// FuzzKeysImportJWK feeds arbitrary bytes to keys import's reader and the
// keyring's import: never a panic, an accepted JWK lands under one new kid
// and a keyring that still validates, and no message quotes a key member.
func FuzzKeysImportJWK(f *testing.F) {
	b, err := os.ReadFile(filepath.Join("..", "secret", "testdata", "upstream", "vectors.json"))
	if err != nil {
		f.Fatal(err)
	}
	var v struct {
		Keyrings map[string]struct {
			Keys []json.RawMessage `json:"keys"`
		} `json:"keyrings"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		f.Fatal(err)
	}
	for _, kr := range v.Keyrings {
		for _, k := range kr.Keys {
			f.Add(string(k), "")
			f.Add(string(k), "api")
		}
	}
	f.Add(`{"kty":"OKP","crv":"X25519","kid":"u","x":"9Y9sd6ZFie65yDWaAiqE78dUUJyQghFMNRgVLsJfe04"}`, "api")
	f.Add(`{"keys":[]}`, "")
	f.Add(`[`, "")
	f.Fuzz(func(t *testing.T, doc, scope string) {
		io, in, _, _ := ui.Test()
		in.WriteString(doc)
		opts := &KeysOptions{IO: io, Input: "-"}
		if scope != "" {
			opts.Scopes = []string{scope}
		}
		base, err := secret.NewKeyring("base")
		if err != nil {
			t.Fatal(err)
		}
		jwk, _, err := readJWK(opts)
		if err == nil {
			next, ierr := base.Import(jwk)
			if ierr == nil {
				if len(next.Kids()) != 2 || !next.Has("base") {
					t.Fatalf("import left kids %q", next.Kids())
				}
				if _, err := secret.ParseKeyring(mustJWKS(t, next)); err != nil {
					t.Fatalf("an accepted import does not reload: %v", err)
				}
			}
			err = ierr
		}
		if err == nil {
			return
		}
		var m map[string]any
		if json.Unmarshal([]byte(doc), &m) == nil {
			for _, member := range []string{"k", "d", "x"} {
				if s, ok := m[member].(string); ok && len(s) >= 8 && strings.Contains(err.Error(), s) {
					t.Fatalf("the error quotes member %q: %v", member, err)
				}
			}
		}
	})
}

func mustJWKS(t *testing.T, kr *secret.Keyring) []byte {
	t.Helper()
	b, err := kr.JWKS()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// FuzzSecretsInspect feeds arbitrary input to secrets inspect: never a
// panic; a success is a header that passed the acceptance rule; a failure
// is a kind and never the input itself.
func FuzzSecretsInspect(f *testing.F) {
	b, err := os.ReadFile(filepath.Join("..", "secret", "testdata", "upstream", "vectors.json"))
	if err != nil {
		f.Fatal(err)
	}
	var v struct {
		Tokens []struct{ Token string } `json:"tokens"`
		Signed []struct{ Token string } `json:"signed"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		f.Fatal(err)
	}
	for _, tv := range v.Tokens {
		f.Add(tv.Token)
		f.Add(`"` + tv.Token + `"`)
	}
	for _, tv := range v.Signed {
		f.Add(tv.Token)
	}
	f.Add("flenc:cbor:PASTED-SECRET")
	f.Add("sk-live-PASTED-SECRET-VALUE")
	f.Fuzz(func(t *testing.T, input string) {
		io, _, out, errOut := ui.Test()
		opts := &SecretsOptions{IO: io, Printer: func() *ui.Printer { return ui.NewPrinter(io, ui.FormatJSON) }, Input: input}
		if input == "-" {
			return // standard input: the same path as a positional token
		}
		err := runSecretsInspect(opts)
		if err == nil {
			var res secret.InspectResult
			if json.Unmarshal(out.Bytes(), &res) != nil || res.Authenticated || res.Kid == "" || !json.Valid(res.Header) {
				t.Fatalf("inspect printed %s", out.Bytes())
			}
			return
		}
		trimmed := strings.TrimSpace(input)
		if len(trimmed) >= 16 && (bytes.Contains(out.Bytes(), []byte(trimmed)) || bytes.Contains(errOut.Bytes(), []byte(trimmed)) || strings.Contains(err.Error(), trimmed)) {
			t.Fatalf("a failed inspect echoed its input: %v %s", err, out.Bytes())
		}
	})
}
