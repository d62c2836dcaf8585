//go:build e2e

package e2e

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// Keyrings of every 0.17 shape between flecht and the real flechtctl 0.17.0:
// oct only, per-scope primaries, X25519 + Ed25519 with scopes, seal-only and
// verify-only copies (export on one side, import on the other) and
// password-protected files. After every verb of either tool, on every
// keyring file of the case:
//
//   - the model each side loads (kid, kind, half, scopes, roles, protected)
//     is the one the step wants, on flecht (`keys list -o json`), in
//     flechtctl's library and in `flechtctl keyring show`;
//   - each side seals a value for every scope either names (and unscoped),
//     and signs one for every scope, where the model says it may, and
//     refuses with the same kind where it may not; the other side opens and
//     verifies each with every keyring file of the case, with the verdict
//     the models predict (a seal-only copy cannot open, a kid the file
//     lacks is unknown, a binding refuses outside its scopes).
//
// A refused verb (flechtctl exits 1; flecht 1, 2 or 3) leaves the file byte
// for byte as it was, and no verb touches another keyring file.

// modelKey is one key as a side loads it.
type modelKey struct {
	Kid    string   `json:"kid"`
	Kind   string   `json:"kind"` // oct, x25519, ed25519
	Half   string   `json:"half"` // private, public
	Scopes []string `json:"scopes"`
	Roles  []string `json:"roles"` // primary, primary-for:S, signing-for:S, in that order, scopes sorted
}

// String is the key as flechtctl keyring show prints it, single-spaced.
func (k modelKey) String() string {
	return fmt.Sprintf("%s %s %s %s %s", k.Kid, k.Kind, k.Half, orDash(k.Scopes), orDash(k.Roles))
}

func orDash(s []string) string {
	if len(s) == 0 {
		return "-"
	}
	return strings.Join(s, ",")
}

// keyringModel is what a side loads from a keyring file.
type keyringModel struct {
	Protected bool
	Keys      map[string]modelKey
}

// String renders the model as the steps spell what they want:
// "[protected] " then the keys sorted by kid, "; " between them.
func (m keyringModel) String() string {
	var lines []string
	for _, k := range m.Keys {
		lines = append(lines, k.String())
	}
	sort.Strings(lines)
	s := strings.Join(lines, "; ")
	if m.Protected {
		s = "[protected] " + s
	}
	return s
}

// primaryFor is the kid that seals scope ("" for unscoped values).
func (m keyringModel) sealingKid(scope string) string {
	var primary string
	for _, k := range m.Keys {
		for _, r := range k.Roles {
			if scope != "" && r == "primary-for:"+scope {
				return k.Kid
			}
			if r == "primary" {
				primary = k.Kid
			}
		}
	}
	return primary
}

func (m keyringModel) signingKid(scope string) string {
	for _, k := range m.Keys {
		if slices.Contains(k.Roles, "signing-for:"+scope) {
			return k.Kid
		}
	}
	return ""
}

// scopes lists every scope the model names, in bindings or roles.
func (m keyringModel) scopes() []string {
	var out []string
	for _, k := range m.Keys {
		out = append(out, k.Scopes...)
		for _, r := range k.Roles {
			if _, s, ok := strings.Cut(r, ":"); ok {
				out = append(out, s)
			}
		}
	}
	return out
}

func outside(k modelKey, scope string) bool {
	return len(k.Scopes) > 0 && !slices.Contains(k.Scopes, scope)
}

// sealVerdict predicts sealing a value of scope: the kid, or the refusal.
func (m keyringModel) sealVerdict(scope string) (kid, kind string) {
	kid = m.sealingKid(scope)
	if outside(m.Keys[kid], scope) {
		return kid, "key_binding"
	}
	return kid, "ok"
}

func (m keyringModel) signVerdict(scope string) (kid, kind string) {
	if kid = m.signingKid(scope); kid == "" {
		return "", "no_signing_key"
	}
	return kid, "ok"
}

// openVerdict predicts opening, in a field of the token's own scope, a
// token sealed under kid, a key of kind (the same key material wherever a
// case's files share a kid).
func (m keyringModel) openVerdict(kid, kind, scope string) string {
	k, ok := m.Keys[kid]
	switch {
	case !ok || k.Kind == "ed25519":
		return "unknown_kid"
	case k.Kind != kind:
		return "header_rejected"
	case k.Kind == "x25519" && k.Half != "private":
		return "seal_only"
	case outside(k, scope):
		return "key_binding"
	}
	return "ok"
}

func (m keyringModel) verifyVerdict(signer, scope string) string {
	k, ok := m.Keys[signer]
	switch {
	case !ok || k.Kind != "ed25519":
		return "unknown_signer"
	case outside(k, scope):
		return "key_binding"
	}
	return "ok"
}

func modelOf(protected bool, keys []modelKey) keyringModel {
	m := keyringModel{Protected: protected, Keys: map[string]modelKey{}}
	for _, k := range keys {
		m.Keys[k.Kid] = k
	}
	return m
}

// flechtModel is what `flecht keys list -o json` reads.
func flechtModel(t *testing.T, ring upRing) keyringModel {
	t.Helper()
	args := []string{"keys", "list", "--keyring", ring.Path, "-o", "json"}
	if ring.PasswordFile != "" {
		args = append(args, "--password-file", ring.PasswordFile)
	}
	list := decodeJSON[struct {
		Protected bool `json:"protected"`
		Keys      []struct {
			Kid        string   `json:"kid"`
			Type       string   `json:"type"`
			Private    bool     `json:"private"`
			Scopes     []string `json:"scopes"`
			Primary    bool     `json:"primary"`
			PrimaryFor []string `json:"primary_for"`
			SigningFor []string `json:"signing_for"`
			Mismatch   bool     `json:"mismatch"`
		} `json:"keys"`
	}](t, flechtOK(t, 0, args...))
	var keys []modelKey
	for _, k := range list.Keys {
		if k.Mismatch {
			t.Fatalf("flecht flags key %s of %s: its halves do not match", k.Kid, ring.Path)
		}
		mk := modelKey{Kid: k.Kid, Kind: k.Type, Half: "public", Scopes: slices.Sorted(slices.Values(k.Scopes))}
		if k.Private {
			mk.Half = "private"
		}
		if k.Primary {
			mk.Roles = append(mk.Roles, "primary")
		}
		for _, s := range slices.Sorted(slices.Values(k.PrimaryFor)) {
			mk.Roles = append(mk.Roles, "primary-for:"+s)
		}
		for _, s := range slices.Sorted(slices.Values(k.SigningFor)) {
			mk.Roles = append(mk.Roles, "signing-for:"+s)
		}
		keys = append(keys, mk)
	}
	return modelOf(list.Protected, keys)
}

// showModel parses `flechtctl keyring show`: "KID  KIND  HALF  scopes=…  roles=…".
func showModel(t *testing.T, protected bool, lines []string) keyringModel {
	t.Helper()
	var keys []modelKey
	for _, line := range lines {
		f := strings.Split(line, "  ")
		if len(f) != 5 || !strings.HasPrefix(f[3], "scopes=") || !strings.HasPrefix(f[4], "roles=") {
			t.Fatalf("flechtctl keyring show: unexpected line %q", line)
		}
		split := func(s string) []string {
			if s == "-" {
				return nil
			}
			return strings.Split(s, ",")
		}
		keys = append(keys, modelKey{Kid: f[0], Kind: f[1], Half: f[2],
			Scopes: split(strings.TrimPrefix(f[3], "scopes=")), Roles: split(strings.TrimPrefix(f[4], "roles="))})
	}
	return modelOf(protected, keys)
}

// krStep is one verb by one tool.
type krStep struct {
	tool string   // "flechtctl" or "flecht"
	args []string // the verb; upper-case words name the case's files (krFiles)
	code int      // flechtctl refuses with 1; flecht with 1, 2 or 3
	on   string   // the keyring file the verb changes (default KEYRING); "-" for none
	want string   // the model of that file afterwards (keyringModel.String)
}

// krFiles are the files a case may name: keyring files, JWK files,
// password files.
var krFiles = map[string]string{
	"KEYRING": "keyring.json", "WRITER": "writer.json", "PLAIN": "plain.json", "PLAIN2": "plain2.json",
	"FRESH": "fresh.json", "REC": "rec.jwk", "REC2": "rec2.jwk", "SIG": "sig.jwk",
	"PW": "password", "PWWRONG": "password-wrong", "PWSHORT": "password-short",
}

var krKeyrings = []string{"KEYRING", "WRITER", "PLAIN", "PLAIN2", "FRESH"}

func TestUpstreamKeyrings(t *testing.T) {
	upstreamRoot(t)
	cases := []struct {
		name  string
		steps []krStep
	}{
		{"oct only", []krStep{
			{tool: "flechtctl", args: []string{"keyring", "new", "KEYRING", "--kid", "o1"}, want: "o1 oct private - primary"},
			{tool: "flechtctl", args: []string{"keyring", "add", "KEYRING", "--kid", "o2"}, want: "o1 oct private - primary; o2 oct private - -"},
			{tool: "flecht", args: []string{"keys", "add", "--kid", "o3", "--primary"}, want: "o1 oct private - -; o2 oct private - -; o3 oct private - primary"},
			{tool: "flechtctl", args: []string{"keyring", "primary", "KEYRING", "o2"}, want: "o1 oct private - -; o2 oct private - primary; o3 oct private - -"},
			{tool: "flecht", args: []string{"keys", "promote", "--kid", "o1"}, want: "o1 oct private - primary; o2 oct private - -; o3 oct private - -"},
			// A duplicate kid, and the primary's removal: both refuse.
			{tool: "flechtctl", args: []string{"keyring", "add", "KEYRING", "--kid", "o2"}, code: 1, want: "o1 oct private - primary; o2 oct private - -; o3 oct private - -"},
			{tool: "flecht", args: []string{"keys", "add", "--kid", "o3"}, code: 3, want: "o1 oct private - primary; o2 oct private - -; o3 oct private - -"},
			{tool: "flechtctl", args: []string{"keyring", "remove", "KEYRING", "o1"}, code: 1, want: "o1 oct private - primary; o2 oct private - -; o3 oct private - -"},
			{tool: "flecht", args: []string{"keys", "remove", "--kid", "o1"}, code: 3, want: "o1 oct private - primary; o2 oct private - -; o3 oct private - -"},
			{tool: "flecht", args: []string{"keys", "remove", "--kid", "o2"}, want: "o1 oct private - primary; o3 oct private - -"},
			{tool: "flechtctl", args: []string{"keyring", "remove", "KEYRING", "o3"}, want: "o1 oct private - primary"},
		}},
		{"per-scope primaries", []krStep{
			{tool: "flecht", args: []string{"keys", "init", "--kid", "base"}, want: "base oct private - primary"},
			{tool: "flecht", args: []string{"keys", "add", "--kid", "db1", "--scope", "db", "--scope", "reports", "--primary-for", "db"},
				want: "base oct private - primary; db1 oct private db,reports primary-for:db"},
			{tool: "flechtctl", args: []string{"keyring", "add", "KEYRING", "--kid", "api1", "--type", "x25519", "--scope", "api", "--primary-for", "api"},
				want: "api1 x25519 private api primary-for:api; base oct private - primary; db1 oct private db,reports primary-for:db"},
			{tool: "flecht", args: []string{"keys", "add", "--kid", "api2", "--type", "x25519", "--scope", "api"},
				want: "api1 x25519 private api primary-for:api; api2 x25519 private api -; base oct private - primary; db1 oct private db,reports primary-for:db"},
			{tool: "flecht", args: []string{"keys", "promote", "--kid", "api2", "--scope", "api"},
				want: "api1 x25519 private api -; api2 x25519 private api primary-for:api; base oct private - primary; db1 oct private db,reports primary-for:db"},
			{tool: "flechtctl", args: []string{"keyring", "primary", "KEYRING", "db1", "--scope", "reports"},
				want: "api1 x25519 private api -; api2 x25519 private api primary-for:api; base oct private - primary; db1 oct private db,reports primary-for:db,primary-for:reports"},
			// A bound key as the primary: neither side seals an unscoped
			// value with this file (the cross-check's key_binding).
			{tool: "flechtctl", args: []string{"keyring", "primary", "KEYRING", "db1"},
				want: "api1 x25519 private api -; api2 x25519 private api primary-for:api; base oct private - -; db1 oct private db,reports primary,primary-for:db,primary-for:reports"},
			{tool: "flecht", args: []string{"keys", "promote", "--kid", "base"},
				want: "api1 x25519 private api -; api2 x25519 private api primary-for:api; base oct private - primary; db1 oct private db,reports primary-for:db,primary-for:reports"},
			{tool: "flecht", args: []string{"keys", "remove", "--kid", "db1"}, code: 3,
				want: "api1 x25519 private api -; api2 x25519 private api primary-for:api; base oct private - primary; db1 oct private db,reports primary-for:db,primary-for:reports"},
			{tool: "flecht", args: []string{"keys", "remove", "--kid", "api1"},
				want: "api2 x25519 private api primary-for:api; base oct private - primary; db1 oct private db,reports primary-for:db,primary-for:reports"},
			{tool: "flechtctl", args: []string{"keyring", "primary", "KEYRING", "base", "--scope", "api"},
				want: "api2 x25519 private api -; base oct private - primary,primary-for:api; db1 oct private db,reports primary-for:db,primary-for:reports"},
			// flechtctl drops a removed key's roles where flecht refuses.
			{tool: "flechtctl", args: []string{"keyring", "remove", "KEYRING", "db1"},
				want: "api2 x25519 private api -; base oct private - primary,primary-for:api"},
			{tool: "flecht", args: []string{"keys", "promote", "--kid", "api2", "--scope", "api"},
				want: "api2 x25519 private api primary-for:api; base oct private - primary"},
		}},
		{"X25519 and Ed25519 with scopes", []krStep{
			{tool: "flechtctl", args: []string{"keyring", "new", "KEYRING", "--kid", "rec1", "--type", "x25519", "--scope", "api", "--scope", "cfg"},
				want: "rec1 x25519 private api,cfg primary"},
			{tool: "flecht", args: []string{"keys", "add", "--kid", "sig1", "--type", "ed25519", "--scope", "api", "--scope", "cfg", "--signing-for", "api"},
				want: "rec1 x25519 private api,cfg primary; sig1 ed25519 private api,cfg signing-for:api"},
			{tool: "flechtctl", args: []string{"keyring", "signing", "KEYRING", "sig1", "--scope", "cfg"},
				want: "rec1 x25519 private api,cfg primary; sig1 ed25519 private api,cfg signing-for:api,signing-for:cfg"},
			{tool: "flecht", args: []string{"keys", "add", "--kid", "sig2", "--type", "ed25519", "--scope", "cfg"},
				want: "rec1 x25519 private api,cfg primary; sig1 ed25519 private api,cfg signing-for:api,signing-for:cfg; sig2 ed25519 private cfg -"},
			{tool: "flecht", args: []string{"keys", "signing", "--kid", "sig2", "--scope", "cfg"},
				want: "rec1 x25519 private api,cfg primary; sig1 ed25519 private api,cfg signing-for:api; sig2 ed25519 private cfg signing-for:cfg"},
			// A signer cannot seal: both refuse it as the primary.
			{tool: "flechtctl", args: []string{"keyring", "primary", "KEYRING", "sig1"}, code: 1,
				want: "rec1 x25519 private api,cfg primary; sig1 ed25519 private api,cfg signing-for:api; sig2 ed25519 private cfg signing-for:cfg"},
			{tool: "flecht", args: []string{"keys", "promote", "--kid", "sig1"}, code: 2,
				want: "rec1 x25519 private api,cfg primary; sig1 ed25519 private api,cfg signing-for:api; sig2 ed25519 private cfg signing-for:cfg"},
			{tool: "flechtctl", args: []string{"keyring", "add", "KEYRING", "--kid", "o1", "--primary"},
				want: "o1 oct private - primary; rec1 x25519 private api,cfg -; sig1 ed25519 private api,cfg signing-for:api; sig2 ed25519 private cfg signing-for:cfg"},
			{tool: "flecht", args: []string{"keys", "promote", "--kid", "rec1", "--scope", "api"},
				want: "o1 oct private - primary; rec1 x25519 private api,cfg primary-for:api; sig1 ed25519 private api,cfg signing-for:api; sig2 ed25519 private cfg signing-for:cfg"},
			{tool: "flechtctl", args: []string{"keyring", "add", "KEYRING", "--kid", "rec2", "--type", "x25519", "--scope", "cfg", "--primary-for", "cfg"},
				want: "o1 oct private - primary; rec1 x25519 private api,cfg primary-for:api; rec2 x25519 private cfg primary-for:cfg; sig1 ed25519 private api,cfg signing-for:api; sig2 ed25519 private cfg signing-for:cfg"},
			{tool: "flecht", args: []string{"keys", "remove", "--kid", "sig1"}, code: 3,
				want: "o1 oct private - primary; rec1 x25519 private api,cfg primary-for:api; rec2 x25519 private cfg primary-for:cfg; sig1 ed25519 private api,cfg signing-for:api; sig2 ed25519 private cfg signing-for:cfg"},
			{tool: "flechtctl", args: []string{"keyring", "remove", "KEYRING", "sig2"},
				want: "o1 oct private - primary; rec1 x25519 private api,cfg primary-for:api; rec2 x25519 private cfg primary-for:cfg; sig1 ed25519 private api,cfg signing-for:api"},
			{tool: "flecht", args: []string{"keys", "signing", "--kid", "sig1", "--scope", "cfg"},
				want: "o1 oct private - primary; rec1 x25519 private api,cfg primary-for:api; rec2 x25519 private cfg primary-for:cfg; sig1 ed25519 private api,cfg signing-for:api,signing-for:cfg"},
			{tool: "flecht", args: []string{"keys", "remove", "--kid", "rec2"}, code: 3,
				want: "o1 oct private - primary; rec1 x25519 private api,cfg primary-for:api; rec2 x25519 private cfg primary-for:cfg; sig1 ed25519 private api,cfg signing-for:api,signing-for:cfg"},
		}},
		{"public halves: export on one side, import on the other", []krStep{
			{tool: "flechtctl", args: []string{"keyring", "new", "KEYRING", "--kid", "r-base"}, want: "r-base oct private - primary"},
			{tool: "flechtctl", args: []string{"keyring", "add", "KEYRING", "--kid", "rec", "--type", "x25519", "--scope", "api"},
				want: "r-base oct private - primary; rec x25519 private api -"},
			{tool: "flecht", args: []string{"keys", "add", "--kid", "sig", "--type", "ed25519", "--scope", "api", "--signing-for", "api"},
				want: "r-base oct private - primary; rec x25519 private api -; sig ed25519 private api signing-for:api"},
			{tool: "flecht", args: []string{"keys", "init", "--kid", "w-base", "--keyring", "WRITER"}, on: "WRITER", want: "w-base oct private - primary"},
			// flechtctl exports, flecht imports: a seal-only recipient.
			{tool: "flechtctl", args: []string{"keyring", "export", "KEYRING", "rec", "-o", "REC"}, on: "-"},
			{tool: "flecht", args: []string{"keys", "import", "REC", "--primary-for", "api", "--keyring", "WRITER"}, on: "WRITER",
				want: "rec x25519 public api primary-for:api; w-base oct private - primary"},
			// flecht exports, flechtctl imports: a verify-only signer.
			{tool: "flecht", args: []string{"keys", "export", "sig", "--out", "SIG"}, on: "-"},
			{tool: "flechtctl", args: []string{"keyring", "import", "WRITER", "SIG"}, on: "WRITER",
				want: "rec x25519 public api primary-for:api; sig ed25519 public api -; w-base oct private - primary"},
			{tool: "flecht", args: []string{"keys", "add", "--kid", "rec2", "--type", "x25519", "--scope", "cfg"},
				want: "r-base oct private - primary; rec x25519 private api -; rec2 x25519 private cfg -; sig ed25519 private api signing-for:api"},
			{tool: "flecht", args: []string{"keys", "export", "rec2", "--out", "REC2"}, on: "-"},
			{tool: "flechtctl", args: []string{"keyring", "import", "WRITER", "REC2", "--primary-for", "cfg"}, on: "WRITER",
				want: "rec x25519 public api primary-for:api; rec2 x25519 public cfg primary-for:cfg; sig ed25519 public api -; w-base oct private - primary"},
			// What neither side does: export an oct key, sign with a public
			// half, import a kid twice.
			{tool: "flechtctl", args: []string{"keyring", "export", "KEYRING", "r-base"}, code: 1, on: "-"},
			{tool: "flecht", args: []string{"keys", "export", "r-base"}, code: 3, on: "-"},
			{tool: "flechtctl", args: []string{"keyring", "signing", "WRITER", "sig", "--scope", "api"}, code: 1, on: "WRITER",
				want: "rec x25519 public api primary-for:api; rec2 x25519 public cfg primary-for:cfg; sig ed25519 public api -; w-base oct private - primary"},
			{tool: "flecht", args: []string{"keys", "signing", "--kid", "sig", "--scope", "api", "--keyring", "WRITER"}, code: 2, on: "WRITER",
				want: "rec x25519 public api primary-for:api; rec2 x25519 public cfg primary-for:cfg; sig ed25519 public api -; w-base oct private - primary"},
			{tool: "flechtctl", args: []string{"keyring", "import", "WRITER", "REC"}, code: 1, on: "WRITER",
				want: "rec x25519 public api primary-for:api; rec2 x25519 public cfg primary-for:cfg; sig ed25519 public api -; w-base oct private - primary"},
			{tool: "flecht", args: []string{"keys", "import", "SIG", "--keyring", "WRITER"}, code: 3, on: "WRITER",
				want: "rec x25519 public api primary-for:api; rec2 x25519 public cfg primary-for:cfg; sig ed25519 public api -; w-base oct private - primary"},
			// A new keyring from an import alone: a seal-only primary.
			{tool: "flechtctl", args: []string{"keyring", "import", "FRESH", "REC", "--primary"}, on: "FRESH",
				want: "rec x25519 public api primary"},
			{tool: "flecht", args: []string{"keys", "import", "SIG", "--keyring", "FRESH"}, on: "FRESH",
				want: "rec x25519 public api primary; sig ed25519 public api -"},
		}},
		{"password-protected", []krStep{
			{tool: "flechtctl", args: []string{"keyring", "new", "KEYRING", "--kid", "p1", "--encrypt", "--password-file", "PW"},
				want: "[protected] p1 oct private - primary"},
			{tool: "flecht", args: []string{"keys", "add", "--kid", "p2", "--type", "x25519", "--scope", "api", "--primary-for", "api"},
				want: "[protected] p1 oct private - primary; p2 x25519 private api primary-for:api"},
			{tool: "flechtctl", args: []string{"keyring", "add", "KEYRING", "--kid", "p3", "--type", "ed25519", "--scope", "api", "--signing-for", "api", "--password-file", "PW"},
				want: "[protected] p1 oct private - primary; p2 x25519 private api primary-for:api; p3 ed25519 private api signing-for:api"},
			// The wrong password opens nothing and changes nothing.
			{tool: "flechtctl", args: []string{"keyring", "add", "KEYRING", "--kid", "p4", "--password-file", "PWWRONG"}, code: 1,
				want: "[protected] p1 oct private - primary; p2 x25519 private api primary-for:api; p3 ed25519 private api signing-for:api"},
			{tool: "flecht", args: []string{"keys", "add", "--kid", "p4", "--password-file", "PWWRONG"}, code: 1,
				want: "[protected] p1 oct private - primary; p2 x25519 private api primary-for:api; p3 ed25519 private api signing-for:api"},
			{tool: "flechtctl", args: []string{"keyring", "unprotect", "KEYRING", "-o", "PLAIN", "--password-file", "PW"}, on: "PLAIN",
				want: "p1 oct private - primary; p2 x25519 private api primary-for:api; p3 ed25519 private api signing-for:api"},
			{tool: "flecht", args: []string{"keys", "unprotect"},
				want: "p1 oct private - primary; p2 x25519 private api primary-for:api; p3 ed25519 private api signing-for:api"},
			// Passwords under 14 bytes: both refuse.
			{tool: "flechtctl", args: []string{"keyring", "protect", "KEYRING", "--password-file", "PWSHORT"}, code: 1,
				want: "p1 oct private - primary; p2 x25519 private api primary-for:api; p3 ed25519 private api signing-for:api"},
			{tool: "flecht", args: []string{"keys", "protect", "--password-file", "PWSHORT"}, code: 2,
				want: "p1 oct private - primary; p2 x25519 private api primary-for:api; p3 ed25519 private api signing-for:api"},
			{tool: "flechtctl", args: []string{"keyring", "protect", "KEYRING", "--password-file", "PW"},
				want: "[protected] p1 oct private - primary; p2 x25519 private api primary-for:api; p3 ed25519 private api signing-for:api"},
			{tool: "flecht", args: []string{"keys", "unprotect", "--out", "PLAIN2"}, on: "PLAIN2",
				want: "p1 oct private - primary; p2 x25519 private api primary-for:api; p3 ed25519 private api signing-for:api"},
			{tool: "flecht", args: []string{"keys", "protect", "--keyring", "PLAIN2"}, on: "PLAIN2",
				want: "[protected] p1 oct private - primary; p2 x25519 private api primary-for:api; p3 ed25519 private api signing-for:api"},
			{tool: "flechtctl", args: []string{"keyring", "remove", "PLAIN2", "p3", "--password-file", "PW"}, on: "PLAIN2",
				want: "[protected] p1 oct private - primary; p2 x25519 private api primary-for:api"},
			{tool: "flecht", args: []string{"keys", "remove", "--kid", "p2", "--keyring", "PLAIN2"}, code: 3, on: "PLAIN2",
				want: "[protected] p1 oct private - primary; p2 x25519 private api primary-for:api"},
			{tool: "flechtctl", args: []string{"keyring", "new", "FRESH", "--kid", "n1", "--type", "x25519", "--scope", "api", "--encrypt", "--password-file", "PW"}, on: "FRESH",
				want: "[protected] n1 x25519 private api primary"},
			{tool: "flecht", args: []string{"keys", "add", "--kid", "n2", "--type", "ed25519", "--scope", "api", "--signing-for", "api", "--keyring", "FRESH"}, on: "FRESH",
				want: "[protected] n1 x25519 private api primary; n2 ed25519 private api signing-for:api"},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			kc := newKeyringCase(t)
			for i, step := range tc.steps {
				kc.run(i+1, step)
			}
			t.Logf("%d steps; after each, %d models and %d values made and opened across the two tools", len(tc.steps), kc.models, kc.values)
		})
	}
}

// keyringCase is one case's directory and its files.
type keyringCase struct {
	t              *testing.T
	dir            string
	models, values int
}

func newKeyringCase(t *testing.T) *keyringCase {
	kc := &keyringCase{t: t, dir: upstreamTempDir(t)}
	for name, pw := range map[string]string{"PW": "a long enough keyring password", "PWWRONG": "another long password, wrong", "PWSHORT": "too short"} {
		if err := os.WriteFile(kc.path(name), []byte(pw+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return kc
}

func (kc *keyringCase) path(name string) string { return filepath.Join(kc.dir, krFiles[name]) }

// ring is a keyring file as both sides open it: with the password file
// when it is protected (a compact JWE, not a JSON object).
func (kc *keyringCase) ring(name string) (upRing, bool) {
	b, err := os.ReadFile(kc.path(name))
	if err != nil {
		return upRing{}, false
	}
	r := upRing{Path: kc.path(name)}
	if !bytes.HasPrefix(bytes.TrimSpace(b), []byte("{")) {
		r.PasswordFile = kc.path("PW")
	}
	return r, true
}

func (kc *keyringCase) snapshot() map[string][]byte {
	s := map[string][]byte{}
	for _, n := range krKeyrings {
		if b, err := os.ReadFile(kc.path(n)); err == nil {
			s[n] = b
		}
	}
	return s
}

func (kc *keyringCase) run(n int, step krStep) {
	t := kc.t
	t.Helper()
	args := slices.Clone(step.args)
	for i, a := range args {
		if _, ok := krFiles[a]; ok {
			args[i] = kc.path(a)
		}
	}
	on := step.on
	if on == "" {
		on = "KEYRING"
	}
	what := fmt.Sprintf("step %d (%s %s)", n, step.tool, strings.Join(step.args, " "))
	before := kc.snapshot()
	if step.tool == "flecht" {
		if !slices.Contains(args, "--keyring") {
			args = append(args, "--keyring", kc.path("KEYRING"))
		}
		out, errOut, code := flechtWithEnv(t, []string{"FLECHT_KEYRING_PASSWORD_FILE=" + kc.path("PW")}, args...)
		if code != step.code {
			t.Fatalf("%s: exit %d, want %d\nstdout: %s\nstderr: %s", what, code, step.code, out, errOut)
		}
	} else {
		flechtctl(t, kc.dir, step.code, args...)
	}
	after := kc.snapshot()
	for _, name := range krKeyrings {
		if (name != on || step.code != 0) && !bytes.Equal(before[name], after[name]) {
			t.Fatalf("%s changed %s (exit %d, it changes only %s when it succeeds)", what, name, step.code, on)
		}
	}
	kc.checkJWKs(what)
	check := []string{"KEYRING", "WRITER"}
	if on != "-" {
		check = append(check, on)
		ring, ok := kc.ring(on)
		if !ok {
			t.Fatalf("%s: no file %s", what, on)
		}
		if got := flechtModel(t, ring); got.String() != step.want {
			t.Fatalf("%s: flecht loads %s as\n  %s\nwant\n  %s", what, on, got, step.want)
		}
	}
	kc.crossCheck(what, check)
}

// checkJWKs requires every exported JWK to hold a public half only.
func (kc *keyringCase) checkJWKs(what string) {
	for _, n := range []string{"REC", "REC2", "SIG"} {
		b, err := os.ReadFile(kc.path(n))
		if err != nil {
			continue
		}
		jwk := decodeJSON[map[string]any](kc.t, string(b))
		if _, ok := jwk["d"]; ok || jwk["kty"] != "OKP" || jwk["x"] == nil || jwk["flenc_scopes"] == nil {
			kc.t.Fatalf("%s: %s is not a public OKP JWK with its scopes: members %v", what, n, slices.Sorted(mapKeys(jwk)))
		}
	}
}

// crossCheck compares what both sides load from the keyring files check
// names (the case's main files and the one the step changed; every file is
// checked right after each step that changes it), then makes values with
// each file on each side and opens them with every file on the other.
func (kc *keyringCase) crossCheck(what string, check []string) {
	t := kc.t
	t.Helper()
	rings := map[string]upRing{}
	var names []string
	for _, n := range krKeyrings {
		if r, ok := kc.ring(n); ok && slices.Contains(check, n) {
			rings[n] = r
			names = append(names, n)
		}
	}
	models := map[string]keyringModel{}
	scopeSet := map[string]bool{"": true}
	for _, n := range names {
		models[n] = flechtModel(t, rings[n])
		for _, s := range models[n].scopes() {
			scopeSet[s] = true
		}
	}
	scopes := slices.Sorted(mapKeys(scopeSet))
	const value = `{"n":12345678901234567890,"s":"sk-ü😀","z":[true,null]}`

	// What each side makes: seals for every scope, signatures for every
	// scope but the empty one.
	type made struct{ ring, op, scope, by, token string }
	type plan struct{ ring, op, scope string }
	var plans []plan
	for _, n := range names {
		for _, s := range scopes {
			plans = append(plans, plan{n, "encrypt", s})
			if s != "" {
				plans = append(plans, plan{n, "sign", s})
			}
		}
	}
	ops := make([]upOp, 0, len(names)+len(plans))
	for _, n := range names {
		ops = append(ops, upOp{Op: "model", Keyring: n})
	}
	// flechtctl's command line beside its library, but on a protected
	// file the library alone: the command derives the file's key again
	// for every run (about 0.1 s); `keyring show` covers its reading.
	noCLI := func(ring string) bool { return rings[ring].PasswordFile != "" }
	for _, p := range plans {
		ops = append(ops, upOp{Op: p.op, Keyring: p.ring, Scope: p.scope, Value: value, NoCLI: noCLI(p.ring)})
	}
	var flMade []made
	flVerdicts := make([]verdict, len(plans))
	for i, p := range plans {
		flVerdicts[i] = flechtMake(t, rings[p.ring], p.op, p.scope, value)
	}
	// Upstream opens flecht's values with every file (in the same run as
	// its own models and makes).
	for i, p := range plans {
		if flVerdicts[i].OK {
			flMade = append(flMade, made{ring: p.ring, op: p.op, scope: p.scope, by: "flecht", token: flVerdicts[i].Token})
		}
	}
	for _, m := range flMade {
		for _, g := range names {
			ops = append(ops, upOp{Op: openOpOf(m.op), Keyring: g, Scope: m.scope, Token: m.token, NoCLI: noCLI(g)})
		}
	}
	up := secretOps(t, kc.dir, rings, ops)

	// The models: flecht's, flechtctl's library's, flechtctl keyring show's.
	for i, n := range names {
		r := up[i]
		if !r.OK {
			t.Fatalf("%s: flechtctl cannot load %s: %s: %s", what, n, r.Error, r.Message)
		}
		lib := modelOf(r.Protected, r.Keys)
		if r.ShowCode != 0 {
			t.Fatalf("%s: flechtctl keyring show %s: exit %d: %s", what, n, r.ShowCode, r.ShowError)
		}
		show := showModel(t, r.Protected, r.Show)
		if fl := models[n]; fl.String() != lib.String() || fl.String() != show.String() {
			t.Fatalf("%s: %s loads differently:\n  flecht            %s\n  flechtctl library %s\n  keyring show      %s", what, n, fl, lib, show)
		}
		kc.models++
	}
	up = up[len(names):]

	// Both sides make each value, or refuse to, as the model says.
	var upMade []made
	for i, p := range plans {
		m := models[p.ring]
		wantKid, want := m.sealVerdict(p.scope)
		if p.op == "sign" {
			wantKid, want = m.signVerdict(p.scope)
		}
		for _, side := range []struct {
			by string
			v  verdict
		}{{"flecht", flVerdicts[i]}, {"flechtctl", up[i]}} {
			if side.v.kind() != want {
				t.Fatalf("%s: %s %s with %s, scope %q: %s %s, want %s", what, side.by, p.op, p.ring, p.scope, side.v, side.v.Message, want)
			}
			if side.v.OK {
				if kid := tokenHeader(t, side.v.Token)["kid"]; kid != wantKid {
					t.Fatalf("%s: %s %s with %s, scope %q: kid %v, want %s", what, side.by, p.op, p.ring, p.scope, kid, wantKid)
				}
			}
		}
		if !up[i].CLIAgrees && !noCLI(p.ring) {
			t.Fatalf("%s: flechtctl's command line and library disagree on %s with %s, scope %q", what, p.op, p.ring, p.scope)
		}
		if up[i].OK {
			upMade = append(upMade, made{ring: p.ring, op: p.op, scope: p.scope, by: "flechtctl", token: up[i].Token})
		}
	}
	up = up[len(plans):]

	// The other side's verdicts on each value, with every file.
	judge := func(m made, g string, v verdict) {
		t.Helper()
		kid := tokenHeader(t, m.token)["kid"].(string)
		want := models[g].verifyVerdict(kid, m.scope)
		if m.op == "encrypt" {
			want = models[g].openVerdict(kid, models[m.ring].Keys[kid].Kind, m.scope)
		}
		opener := map[string]string{"flecht": "flechtctl", "flechtctl": "flecht"}[m.by]
		if v.kind() != want {
			t.Fatalf("%s: %s's %s of scope %q with %s, opened by %s with %s: %s %s, want %s", what, m.by, m.op, m.scope, m.ring, opener, g, v, v.Message, want)
		}
		if v.OK && v.Value != value {
			t.Fatalf("%s: %s's %s of scope %q opened by %s to %s", what, m.by, m.op, m.scope, opener, v.Value)
		}
		kc.values++
	}
	i := 0
	for _, m := range flMade {
		for _, g := range names {
			if !up[i].CLIAgrees && !noCLI(g) {
				t.Fatalf("%s: flechtctl's command line and library disagree opening flecht's %s with %s", what, m.op, g)
			}
			judge(m, g, up[i])
			i++
		}
	}
	for _, m := range upMade {
		for _, g := range names {
			judge(m, g, flechtOpen(t, rings[g], openOpOf(m.op), m.scope, m.token))
		}
	}
}

func openOpOf(makeOp string) string {
	if makeOp == "sign" {
		return "verify"
	}
	return "decrypt"
}

// flechtWithEnv runs the flecht binary with env added.
func flechtWithEnv(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := command(flechtBin, args...)
	cmd.Env = append(append(os.Environ(), "FLECHT_BROKERS="+brokers, "NO_COLOR=1", "HOME="+t.TempDir()), env...)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	code := exitCode(cmd.Run())
	if code < 0 {
		t.Fatalf("running flecht %v failed to start", args)
	}
	return out.String(), errOut.String(), code
}
