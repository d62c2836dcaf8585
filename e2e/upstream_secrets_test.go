//go:build e2e

package e2e

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Keyrings and tokens between flecht and the real flechtctl 0.17.0, both
// ways. Table-driven, so that the next round adds the 0.17 shapes (per-scope
// primaries, X25519 + Ed25519, seal-only, protected) as rows: today every
// key is oct.

// keyringView is what both tools say a keyring holds: the kids, sorted,
// and the primary.
type keyringView struct {
	Kids    []string
	Primary string
}

// keyringStep is one verb on a keyring file by one of the tools.
type keyringStep struct {
	tool string   // "flechtctl" or "flecht"
	args []string // the verb; KEYRING stands for the file
	want keyringView
	code int // the exit code; a refusal (flechtctl 1, flecht 3) must leave the file as it was
}

func TestUpstreamKeyrings(t *testing.T) {
	upstreamRoot(t)
	view := func(primary string, kids ...string) keyringView { return keyringView{Kids: kids, Primary: primary} }
	cases := []struct {
		name  string
		steps []keyringStep
	}{
		{"written by flechtctl", []keyringStep{
			{"flechtctl", []string{"keyring", "new", "KEYRING", "--kid", "up-a"}, view("up-a", "up-a"), 0},
			{"flechtctl", []string{"keyring", "add", "KEYRING", "--kid", "up-b"}, view("up-a", "up-a", "up-b"), 0},
			{"flechtctl", []string{"keyring", "primary", "KEYRING", "up-b"}, view("up-b", "up-a", "up-b"), 0},
			{"flechtctl", []string{"keyring", "add", "KEYRING", "--kid", "up-c", "--primary"}, view("up-c", "up-a", "up-b", "up-c"), 0},
			{"flechtctl", []string{"keyring", "remove", "KEYRING", "up-a"}, view("up-c", "up-b", "up-c"), 0},
		}},
		{"written by flecht", []keyringStep{
			{"flecht", []string{"keys", "init", "--kid", "fl-a"}, view("fl-a", "fl-a"), 0},
			{"flecht", []string{"keys", "add", "--kid", "fl-b"}, view("fl-a", "fl-a", "fl-b"), 0},
			{"flecht", []string{"keys", "promote", "--kid", "fl-b"}, view("fl-b", "fl-a", "fl-b"), 0},
			{"flecht", []string{"keys", "add", "--kid", "fl-c"}, view("fl-b", "fl-a", "fl-b", "fl-c"), 0},
			{"flecht", []string{"keys", "promote", "--kid", "fl-c"}, view("fl-c", "fl-a", "fl-b", "fl-c"), 0},
			{"flecht", []string{"keys", "remove", "--kid", "fl-a"}, view("fl-c", "fl-b", "fl-c"), 0},
		}},
		{"edited by both in turn", []keyringStep{
			{"flechtctl", []string{"keyring", "new", "KEYRING", "--kid", "mix-a"}, view("mix-a", "mix-a"), 0},
			{"flecht", []string{"keys", "add", "--kid", "mix-b"}, view("mix-a", "mix-a", "mix-b"), 0},
			{"flechtctl", []string{"keyring", "primary", "KEYRING", "mix-b"}, view("mix-b", "mix-a", "mix-b"), 0},
			{"flecht", []string{"keys", "remove", "--kid", "mix-a"}, view("mix-b", "mix-b"), 0},
			{"flechtctl", []string{"keyring", "add", "KEYRING", "--kid", "mix-c"}, view("mix-b", "mix-b", "mix-c"), 0},
			{"flecht", []string{"keys", "promote", "--kid", "mix-c"}, view("mix-c", "mix-b", "mix-c"), 0},
			// Both refuse to remove the primary, and the file stays as it was.
			{"flechtctl", []string{"keyring", "remove", "KEYRING", "mix-c"}, view("mix-c", "mix-b", "mix-c"), 1},
			{"flecht", []string{"keys", "remove", "--kid", "mix-c"}, view("mix-c", "mix-b", "mix-c"), 3},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := upstreamTempDir(t)
			keyring := filepath.Join(dir, "keyring.json")
			for i, step := range tc.steps {
				args := slices.Clone(step.args)
				for j, a := range args {
					if a == "KEYRING" {
						args[j] = keyring
					}
				}
				before, _ := os.ReadFile(keyring)
				if step.tool == "flecht" {
					flechtOK(t, step.code, append(args, "--keyring", keyring)...)
				} else {
					flechtctl(t, dir, step.code, args...)
				}
				if after, _ := os.ReadFile(keyring); step.code != 0 && !bytes.Equal(before, after) {
					t.Fatalf("step %d: %s refused (exit %d) but changed the file", i+1, step.tool, step.code)
				}
				what := step.tool + " " + strings.Join(step.args, " ")
				if got := flechtKeyringView(t, keyring); !equalView(got, step.want) {
					t.Fatalf("step %d (%s): flecht keys list reads %+v, want %+v", i+1, what, got, step.want)
				}
				if got := flechtctlKeyringView(t, dir, keyring); !equalView(got, step.want) {
					t.Fatalf("step %d (%s): flechtctl keyring show reads %+v, want %+v", i+1, what, got, step.want)
				}
				// Loading is not enough: each side seals under the
				// primary, and the other opens it.
				crossSeal(t, dir, keyring, step.want.Primary)
			}
		})
	}
}

func equalView(a, b keyringView) bool { return a.Primary == b.Primary && slices.Equal(a.Kids, b.Kids) }

func flechtKeyringView(t *testing.T, keyring string) keyringView {
	t.Helper()
	list := decodeJSON[struct {
		Primary string `json:"primary"`
		Keys    []struct {
			Kid     string `json:"kid"`
			Primary bool   `json:"primary"`
		} `json:"keys"`
	}](t, flechtOK(t, 0, "keys", "list", "--keyring", keyring, "-o", "json"))
	v := keyringView{Primary: list.Primary}
	for _, k := range list.Keys {
		v.Kids = append(v.Kids, k.Kid)
		if k.Primary != (k.Kid == list.Primary) {
			t.Fatalf("flecht keys list marks %s primary=%v with primary %s", k.Kid, k.Primary, list.Primary)
		}
	}
	slices.Sort(v.Kids)
	return v
}

// flechtctlKeyringView parses `flechtctl keyring show`: one line per entry,
// "KID  KIND  HALF  scopes=…  roles=…", fields two spaces apart.
func flechtctlKeyringView(t *testing.T, dir, keyring string) keyringView {
	t.Helper()
	var v keyringView
	out, _, code := runUpstream(t, []string{dir}, "", "/opt/fw/bin/flechtctl", "keyring", "show", keyring)
	if code != 0 {
		t.Fatalf("flechtctl keyring show %s: exit %d\n%s", keyring, code, out)
	}
	for line := range strings.SplitSeq(strings.TrimSpace(out), "\n") {
		f := strings.Split(line, "  ")
		if len(f) != 5 || f[1] != "oct" || f[2] != "private" || f[3] != "scopes=-" {
			t.Fatalf("flechtctl keyring show: unexpected line %q (this round: unbound private oct keys only)", line)
		}
		v.Kids = append(v.Kids, f[0])
		roles := strings.TrimPrefix(f[4], "roles=")
		if slices.Contains(strings.Split(roles, ","), "primary") {
			v.Primary = f[0]
		}
	}
	slices.Sort(v.Kids)
	return v
}

// crossSeal seals a value on each side under keyring and opens it on the
// other, requiring the primary's kid in the token.
func crossSeal(t *testing.T, dir, keyring, primary string) {
	t.Helper()
	const value = `{"n":12345678901234567890,"s":"sk-ü😀","z":[true,null]}`
	up := strings.TrimSpace(flechtctl(t, dir, 0, "encrypt", "-k", keyring, "--scope", "api_key", value))
	fl := strings.TrimSpace(flechtOK(t, 0, "secrets", "encrypt", "--keyring", keyring, "--scope", "api_key", value))
	for _, tok := range []string{up, fl} {
		if h := tokenHeader(t, tok); h["kid"] != primary || h["flenc_scope"] != "api_key" {
			t.Fatalf("token header %v, want kid %s scope api_key", h, primary)
		}
	}
	opened := decodeJSON[struct {
		Value json.RawMessage `json:"value"`
	}](t, flechtOK(t, 0, "secrets", "decrypt", "--keyring", keyring, "--scope", "api_key", up, "-o", "json"))
	if got := canonicalJSON(t, string(opened.Value)); got != value {
		t.Fatalf("flecht opened flechtctl's token to %s, want %s", got, value)
	}
	if got := canonicalJSON(t, flechtctl(t, dir, 0, "decrypt", "-k", keyring, "--scope", "api_key", fl)); got != value {
		t.Fatalf("flechtctl opened flecht's token to %s, want %s", got, value)
	}
}

// tokenHeader decodes the (unauthenticated) protected header of a flenc token.
func tokenHeader(t *testing.T, token string) map[string]any {
	t.Helper()
	seg, _, _ := strings.Cut(strings.TrimPrefix(token, "flenc:jwe:"), ".")
	raw, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		t.Fatalf("token header of %.40s…: %v", token, err)
	}
	return decodeJSON[map[string]any](t, string(raw))
}

// canonicalJSON re-encodes a JSON value with sorted keys and no spaces,
// keeping number literals, so that two writers' renderings compare.
func canonicalJSON(t *testing.T, s string) string {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("not JSON: %v: %q", err, s)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(b.String())
}

// TestUpstreamTokens: tokens sealed by each side open on the other, and
// where upstream refuses one, flecht refuses it too, with the same class of
// error.
func TestUpstreamTokens(t *testing.T) {
	upstreamRoot(t)
	dir := upstreamTempDir(t)
	path := func(name string) string { return filepath.Join(dir, name) }
	// main: two keys, t-new primary, made by flechtctl.
	flechtctl(t, dir, 0, "keyring", "new", path("main.json"), "--kid", "t-old")
	flechtctl(t, dir, 0, "keyring", "add", path("main.json"), "--kid", "t-new", "--primary")
	// other: a kid main does not hold; twin: main's primary kid with other bytes.
	flechtOK(t, 0, "keys", "init", "--kid", "t-other", "--keyring", path("other.json"))
	flechtOK(t, 0, "keys", "init", "--kid", "t-new", "--keyring", path("twin.json"))

	type tokenCase struct {
		name      string
		sealWith  string // keyring file
		sealScope string
		tamper    bool
		openScope string
		want      string // "ok" or the class of the refusal
		wantKid   string
		value     string // canonical JSON
	}
	cases := []tokenCase{
		{name: "unscoped", sealWith: "main.json", want: "ok", wantKid: "t-new", value: `"p@ss\"wörd\n"`},
		{name: "scoped", sealWith: "main.json", sealScope: "api_key", openScope: "api_key", want: "ok", wantKid: "t-new", value: `"sk-live-ü😀"`},
		{name: "unscoped token in a scoped read (the upgrade path)", sealWith: "main.json", openScope: "api_key", want: "ok", wantKid: "t-new", value: `{"n":12345678901234567890,"ok":true,"user":"u"}`},
		{name: "another scope", sealWith: "main.json", sealScope: "api_key", openScope: "db_password", want: "scope_violation", wantKid: "t-new", value: `"x"`},
		{name: "scoped token in an unscoped read", sealWith: "main.json", sealScope: "api_key", want: "scope_violation", wantKid: "t-new", value: `"x"`},
		{name: "unknown kid", sealWith: "other.json", want: "unknown_kid", wantKid: "t-other", value: `"x"`},
		{name: "unknown kid, scoped", sealWith: "other.json", sealScope: "api_key", openScope: "api_key", want: "unknown_kid", wantKid: "t-other", value: `"x"`},
		{name: "known kid, other key bytes", sealWith: "twin.json", want: "tag_mismatch", wantKid: "t-new", value: `"x"`},
		{name: "tampered ciphertext", sealWith: "main.json", tamper: true, want: "tag_mismatch", wantKid: "t-new", value: `["a",null,1.5]`},
	}

	type sealed struct {
		tokenCase
		sealer, token string
	}
	var all []sealed
	for _, tc := range cases {
		scope := []string{}
		if tc.sealScope != "" {
			scope = []string{"--scope", tc.sealScope}
		}
		up := flechtctl(t, dir, 0, append(append([]string{"encrypt", "-k", path(tc.sealWith)}, scope...), tc.value)...)
		fl := flechtOK(t, 0, append(append([]string{"secrets", "encrypt", "--keyring", path(tc.sealWith)}, scope...), tc.value)...)
		for _, by := range [][2]string{{"flechtctl", up}, {"flecht", fl}} {
			sealer, tok := by[0], strings.TrimSpace(by[1])
			if h := tokenHeader(t, tok); h["kid"] != tc.wantKid || h["alg"] != "dir" || h["enc"] != "A256GCM" || (h["flenc_scope"] != nil) != (tc.sealScope != "") {
				t.Fatalf("%s: %s sealed a token with header %v", tc.name, sealer, h)
			}
			if tc.tamper {
				tok = tamperCiphertext(tok)
			}
			all = append(all, sealed{tc, sealer, tok})
		}
	}

	// Upstream's verdicts: its library, classified (open_tokens.py), and its
	// command, which must agree on success or failure.
	type item struct {
		Token string `json:"token"`
		Scope string `json:"scope"`
	}
	items := make([]item, len(all))
	for i, s := range all {
		items[i] = item{s.token, s.openScope}
	}
	in, _ := json.Marshal(items)
	out, errOut, code := runUpstream(t, []string{dir}, string(in), upstreamPython, upstreamDir("py", "open_tokens.py"), path("main.json"))
	if code != 0 {
		t.Fatalf("open_tokens.py: exit %d\n%s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != len(all) {
		t.Fatalf("open_tokens.py gave %d results for %d tokens:\n%s", len(lines), len(all), out)
	}

	for i, s := range all {
		upstream := decodeJSON[struct {
			OK    bool   `json:"ok"`
			Value string `json:"value"`
			Class string `json:"class"`
			Error string `json:"error"`
			Cause string `json:"cause"`
		}](t, lines[i])
		name := s.name + ", sealed by " + s.sealer
		upVerdict := "ok"
		if !upstream.OK {
			upVerdict = upstream.Class
		}
		if upVerdict != s.want {
			t.Errorf("%s: upstream's verdict %s (%s caused by %s), want %s", name, upVerdict, upstream.Error, upstream.Cause, s.want)
		}
		if upstream.OK && upstream.Value != s.value {
			t.Errorf("%s: upstream opened it to %s, want %s", name, upstream.Value, s.value)
		}

		args := []string{"secrets", "decrypt", "--keyring", path("main.json"), s.token, "-o", "json"}
		if s.openScope != "" {
			args = append(args, "--scope", s.openScope)
		}
		flOut, flErr, flCode := runFlecht(t, "", args...)
		res := decodeJSON[struct {
			Value json.RawMessage `json:"value"`
			Kid   string          `json:"kid"`
			Error *struct {
				Kind string `json:"kind"`
				Kid  string `json:"kid"`
			} `json:"error"`
		}](t, flOut)
		flVerdict := "ok"
		switch {
		case flCode == 0 && res.Error == nil:
			if got := canonicalJSON(t, string(res.Value)); got != s.value {
				t.Errorf("%s: flecht opened it to %s, want %s", name, got, s.value)
			}
			if res.Kid != s.wantKid {
				t.Errorf("%s: flecht reports kid %q, want %q", name, res.Kid, s.wantKid)
			}
		case flCode == 4 && res.Error != nil:
			flVerdict = res.Error.Kind
			if res.Error.Kid != s.wantKid {
				t.Errorf("%s: flecht's refusal names kid %q, want %q", name, res.Error.Kid, s.wantKid)
			}
		default:
			t.Errorf("%s: flecht secrets decrypt exit %d: %s %s", name, flCode, flOut, flErr)
			continue
		}
		if flVerdict != upVerdict {
			t.Errorf("%s: flecht's verdict %s, upstream's %s (%s caused by %s)", name, flVerdict, upVerdict, upstream.Error, upstream.Cause)
		}

		// And upstream's command line agrees with its library.
		ctlArgs := []string{"/opt/fw/bin/flechtctl", "decrypt", "-k", path("main.json"), s.token}
		if s.openScope != "" {
			ctlArgs = append(ctlArgs, "--scope", s.openScope)
		}
		ctlOut, ctlErr, ctlCode := runUpstream(t, []string{dir}, "", ctlArgs...)
		switch {
		case upstream.OK && (ctlCode != 0 || canonicalJSON(t, ctlOut) != s.value):
			t.Errorf("%s: flechtctl decrypt exit %d %s%s, want the value %s", name, ctlCode, ctlOut, ctlErr, s.value)
		case !upstream.OK && (ctlCode != 1 || !strings.Contains(ctlErr, "flechtctl: error:")):
			t.Errorf("%s: flechtctl decrypt exit %d %s%s, want a refusal (exit 1)", name, ctlCode, ctlOut, ctlErr)
		}
		t.Logf("%-55s flecht %-16s upstream %s", name, flVerdict, upVerdict)
	}
}

// tamperCiphertext flips one character of the ciphertext segment.
func tamperCiphertext(token string) string {
	parts := strings.Split(token, ".")
	ct := []byte(parts[3])
	ct[0] = map[bool]byte{true: 'B', false: 'A'}[ct[0] == 'A']
	parts[3] = string(ct)
	return strings.Join(parts, ".")
}
