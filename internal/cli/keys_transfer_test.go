package cli

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/secret"
)

// privateHalves returns every key's secret member (k or d) of a plain
// keyring document, in the forms it could leak in.
func privateHalves(t *testing.T, doc []byte) []string {
	t.Helper()
	var d struct {
		Keys []map[string]any `json:"keys"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, k := range d.Keys {
		for _, m := range []string{"k", "d"} {
			if s, ok := k[m].(string); ok {
				raw, _ := base64.RawURLEncoding.DecodeString(s)
				out = append(out, s, base64.StdEncoding.EncodeToString(raw))
			}
		}
	}
	return out
}

func TestKeysExportPrintsThePublicHalfOnly(t *testing.T) {
	v := loadCLIVectors(t)
	dir := t.TempDir()
	doc := string(v.Keyrings["x25519_ed25519"])
	path := writeKeyringFile(t, dir, "k.json", doc)
	env := keysEnv(path)
	kr, _, _ := secret.Load(path)
	for _, kid := range []string{"r", "s"} {
		r := mustRun(t, env, "", "keys", "export", kid)
		want, _ := kr.PublicJWK(kid)
		if r.out != string(want) {
			t.Errorf("export %s:\n%s\nwant\n%s", kid, r.out, want)
		}
		// -o json prints the JWK too; --kid is the same as KID.
		if j := mustRun(t, env, "", "keys", "export", "--kid", kid, "-o", "json"); j.out != r.out {
			t.Errorf("export --kid %s -o json: %s", kid, j.out)
		}
		var jwk map[string]any
		json.Unmarshal([]byte(r.out), &jwk)
		if _, hasD := jwk["d"]; hasD || jwk["kid"] != kid || jwk["flenc_scopes"] == nil {
			t.Errorf("export %s: %v", kid, jwk)
		}
	}
	// --out: written with mode 0644, never over an existing file unless
	// --force, never over the keyring.
	out := filepath.Join(dir, "r.jwk")
	rep := mustRun(t, env, "", "keys", "export", "r", "--out", out, "-o", "json")
	var er KeyExportReport
	if err := json.Unmarshal([]byte(rep.out), &er); err != nil || er.Action != "exported" || er.File != out || er.Type != secret.TypeX25519 || !slices.Equal(er.Scopes, []string{"api"}) {
		t.Errorf("export --out report: %s %v", rep.out, err)
	}
	if fi, err := os.Stat(out); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("export file: %v %v", fi, err)
	}
	if r := run(t, env, "", "keys", "export", "s", "--out", out); r.code != exitcode.Refused || !strings.Contains(r.err, "--force") {
		t.Errorf("export over a file: exit %d %q", r.code, r.err)
	}
	mustRun(t, env, "", "keys", "export", "s", "--out", out, "--force")
	if !strings.Contains(fileBytes(t, out), `"kid": "s"`) {
		t.Error("--force did not replace the file")
	}
	for _, force := range [][]string{nil, {"--force"}} {
		if r := run(t, env, "", append([]string{"keys", "export", "s", "--out", path}, force...)...); r.code != exitcode.Refused || !strings.Contains(r.err, "the keyring file itself") {
			t.Errorf("export over the keyring %v: exit %d %q", force, r.code, r.err)
		}
	}
	if fileBytes(t, path) != doc {
		t.Fatal("export changed the keyring")
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"a"}, exitcode.Refused, "symmetric (oct) key"},
		{[]string{"zz"}, exitcode.Failure, `unknown_kid: key "zz"`},
		{nil, exitcode.Usage, "give KID"},
		{[]string{"r", "--kid", "s"}, exitcode.Usage, "give the key once"},
		{[]string{"r", "--force"}, exitcode.Usage, "--force only applies with --out"},
	} {
		r := run(t, env, "", append([]string{"keys", "export"}, tc.args...)...)
		if r.code != tc.code || !strings.Contains(r.err, tc.want) || r.out != "" {
			t.Errorf("export %v: exit %d %q %q", tc.args, r.code, r.err, r.out)
		}
	}
	// Nothing any export printed holds a private half.
	for _, secretHalf := range privateHalves(t, []byte(doc)) {
		if strings.Contains(fileBytes(t, out), secretHalf) {
			t.Fatal("a private half was exported")
		}
	}
}

func TestKeysImportAddsOneJWK(t *testing.T) {
	v := loadCLIVectors(t)
	dir := t.TempDir()
	src := writeKeyringFile(t, dir, "src.json", string(v.Keyrings["x25519_ed25519"]))
	srcKr, _, _ := secret.Load(src)
	r, _ := srcKr.PublicJWK("r")
	rFile := writeKeyringFile(t, dir, "r.jwk", string(r))
	dst := newKeyring(t, "w")
	env := keysEnv(dst)

	// An export imports as a seal-only recipient, and seals its scope.
	rep := decodeReport(t, mustRun(t, env, "", "keys", "import", rFile, "--primary-for", "api", "-o", "json"))
	if got := changes(rep); got != "key_added:r(x25519) primary_for:api=r<-" || rep.Action != "imported" || rep.Kid != "r" {
		t.Errorf("import: %s %+v", got, rep)
	}
	if k := row(t, rep, "r"); k.Private || !slices.Equal(k.Scopes, []string{"api"}) {
		t.Errorf("imported row %+v", k)
	}
	var tok secret.EncryptResult
	json.Unmarshal([]byte(mustRun(t, env, "", "secrets", "encrypt", "--scope", "api", "-o", "json", `"for-the-source"`).out), &tok)
	if tok.Kid != "r" || tok.Alg != "ECDH-ES+A256KW" {
		t.Errorf("sealed with %+v", tok)
	}
	if p, _, err := srcKr.Decrypt(tok.Token, "api"); err != nil || string(p) != `"for-the-source"` {
		t.Errorf("the source does not open what the importer sealed: %v", err)
	}
	if r := run(t, env, "", "secrets", "decrypt", "--scope", "api", tok.Token); r.code != exitcode.Findings || !strings.Contains(r.err, "seal_only") {
		t.Errorf("the importer opened with a public half: exit %d %q", r.code, r.err)
	}

	// A JWK with its private half keeps it; one without a binding takes
	// --scope; standard input works.
	var full struct {
		Keys []map[string]any `json:"keys"`
	}
	json.Unmarshal(v.Keyrings["x25519_ed25519"], &full)
	var signer map[string]any
	for _, k := range full.Keys {
		if k["kid"] == "s" {
			signer = k
		}
	}
	signer["kid"], signer["use"] = "s-copy", "sig" // an unknown member, kept
	delete(signer, "flenc_scopes")
	b, _ := json.Marshal(signer)
	rep = decodeReport(t, mustRun(t, env, string(b), "keys", "import", "-", "--scope", "api", "--signing-for", "api", "-o", "json"))
	if k := row(t, rep, "s-copy"); !k.Private || !slices.Equal(k.Scopes, []string{"api"}) || !slices.Equal(k.SigningFor, []string{"api"}) {
		t.Errorf("private import %+v", k)
	}
	if !strings.Contains(fileBytes(t, dst), `"use": "sig"`) {
		t.Error("the JWK's unknown member was dropped")
	}

	before := fileBytes(t, dst)
	protected := writeKeyringFile(t, dir, "prot.jwe", v.Protected+"\n")
	for _, tc := range []struct {
		args  []string
		stdin string
		code  int
		want  string
	}{
		{[]string{rFile}, "", exitcode.Refused, `key "r": kid already in the keyring`},
		{[]string{src}, "", exitcode.Usage, "a JWK Set (a keyring), not one JWK"},
		{[]string{protected}, "", exitcode.Usage, "password-protected keyring, not one JWK"},
		{[]string{"-"}, `[1,2]`, exitcode.Usage, "not one JWK"},
		{[]string{"-"}, `{"kty":"OKP","crv":"X25519","kid":"u","x":"9Y9sd6ZFie65yDWaAiqE78dUUJyQghFMNRgVLsJfe04"}`, exitcode.Usage, "give --scope S"},
		{[]string{rFile, "--scope", "db"}, "", exitcode.Usage, "--scope cannot change"},
		{[]string{"-"}, `{"kty":"oct","kid":"short","k":"c2hvcnQ"}`, exitcode.Usage, `keyring_invalid: key "short": key "short" is 5 bytes, expected 32`},
		{[]string{"-"}, `{"kty":"oct","kid":"bad\nkid","k":"` + strings.Repeat("A", 43) + `"}`, exitcode.Usage, "a kid must be printable"},
		{[]string{"-", "--protect"}, `{"kty":"oct","kid":"o","k":"` + strings.Repeat("A", 43) + `"}`, exitcode.Usage, "--protect applies only when import creates"},
		{[]string{filepath.Join(dir, "missing.jwk")}, "", exitcode.Failure, "no such file"},
	} {
		r := run(t, env, tc.stdin, append([]string{"keys", "import"}, tc.args...)...)
		if r.code != tc.code || !strings.Contains(r.err, tc.want) {
			t.Errorf("import %v %s: exit %d %q, want %d and %q", tc.args, tc.stdin, r.code, r.err, tc.code, tc.want)
		}
	}
	if fileBytes(t, dst) != before {
		t.Error("a refused import changed the keyring")
	}

	// A keyring that does not exist is created only with --primary, and
	// only from a sealing key.
	fresh := filepath.Join(dir, "fresh.json")
	if r := run(t, nil, "", "keys", "import", "--keyring", fresh, rFile); r.code != exitcode.Usage || !strings.Contains(r.err, "only with --primary") {
		t.Errorf("import into nothing: exit %d %q", r.code, r.err)
	}
	sJWK, _ := srcKr.PublicJWK("s")
	sFile := writeKeyringFile(t, dir, "s.jwk", string(sJWK))
	if r := run(t, nil, "", "keys", "import", "--keyring", fresh, sFile, "--primary"); r.code != exitcode.Usage || !strings.Contains(r.err, "ed25519 key cannot be the primary") {
		t.Errorf("signer as a new primary: exit %d %q", r.code, r.err)
	}
	if fileBytes(t, fresh) != "" {
		t.Fatal("a refused import created the keyring")
	}
	rep = decodeReport(t, mustRun(t, nil, "", "keys", "import", "--keyring", fresh, rFile, "--primary", "-o", "json"))
	if rep.Action != "created" || rep.Primary != "r" || changes(rep) != "key_added:r(x25519) primary:=r<-" {
		t.Errorf("import creating: %+v", rep)
	}
	if fi, _ := os.Stat(fresh); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", fi.Mode())
	}
	// A created keyring can be protected at once.
	pw := writeKeyringFile(t, dir, "pw", "correct horse battery staple\n")
	prot := filepath.Join(dir, "fresh.jwe")
	rep = decodeReport(t, mustRun(t, nil, "", "keys", "import", "--keyring", prot, rFile, "--primary", "--protect", "--password-file", pw, "-o", "json"))
	if !rep.Protected || !strings.HasSuffix(changes(rep), "protected") || !secret.IsProtectedDocument([]byte(fileBytes(t, prot))) {
		t.Errorf("import --protect: %+v", rep)
	}
}

func TestKeysProtectAndUnprotect(t *testing.T) {
	t.Parallel() // each protected read or write derives a key: slow under -race
	dir := t.TempDir()
	path := newKeyring(t, "k1")
	mustRun(t, keysEnv(path), "", "keys", "add", "--kid", "s", "--type", "ed25519", "--scope", "api", "--signing-for", "api")
	plainDoc := fileBytes(t, path)
	pw := writeKeyringFile(t, dir, "pw", "correct horse battery staple\n")
	short := writeKeyringFile(t, dir, "short", "13 bytes long\n")

	// Without a password source, or with a short one: usage, no change.
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{keysEnv(path), "--password-file FILE or set " + EnvKeyringPasswordFile},
		{map[string]string{EnvKeyring: path, EnvKeyringPasswordFile: short}, "at least 14 bytes"},
	} {
		if r := run(t, tc.env, "", "keys", "protect"); r.code != exitcode.Usage || !strings.Contains(r.err, tc.want) || strings.Contains(r.err, "13 bytes long") {
			t.Errorf("protect: exit %d %q", r.code, r.err)
		}
	}
	if fileBytes(t, path) != plainDoc {
		t.Fatal("a refused protect changed the file")
	}

	// protect through the environment's password file.
	env := map[string]string{EnvKeyring: path, EnvKeyringPasswordFile: pw}
	rep := decodeReport(t, mustRun(t, env, "", "keys", "protect", "-o", "json"))
	if rep.Action != "protected" || !rep.Protected || changes(rep) != "protected" {
		t.Errorf("protect: %+v", rep)
	}
	doc := fileBytes(t, path)
	if !secret.IsProtectedDocument([]byte(doc)) {
		t.Fatal("protect wrote a plain file")
	}
	for _, h := range privateHalves(t, []byte(plainDoc)) {
		if strings.Contains(doc, h) {
			t.Fatal("key bytes readable in the protected file")
		}
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", fi.Mode())
	}
	if rep := decodeReport(t, mustRun(t, env, "", "keys", "protect", "-o", "json")); rep.Action != "unchanged" {
		t.Errorf("protect twice: %+v", rep)
	}
	if fileBytes(t, path) != doc {
		t.Error("protecting a protected file rewrote it")
	}
	// A wrong password does not open it, and is a failure, not a usage error.
	wrong := writeKeyringFile(t, dir, "wrong", "not the password at all\n")
	if r := run(t, map[string]string{EnvKeyring: path, EnvKeyringPasswordFile: wrong}, "", "keys", "unprotect"); r.code != exitcode.Failure || !strings.Contains(r.err, "wrong password") {
		t.Errorf("wrong password: exit %d %q", r.code, r.err)
	}

	// unprotect --out: a plain copy; the protected file stays byte for byte.
	cp := filepath.Join(dir, "copy.json")
	rep = decodeReport(t, mustRun(t, nil, "", "keys", "unprotect", "--keyring", path, "--password-file", pw, "--out", cp, "-o", "json"))
	if rep.Action != "copied" || rep.File != cp || !rep.Protected || len(rep.Changes) != 0 {
		t.Errorf("unprotect --out: %+v", rep)
	}
	if fileBytes(t, path) != doc {
		t.Error("unprotect --out changed the protected file")
	}
	copyKr, _, err := secret.Load(cp)
	orig, _, _ := secret.Load(path, secret.WithPassword(secret.PasswordFile(pw)))
	if err != nil || copyKr.Protected() || !copyKr.Equal(orig) {
		t.Fatalf("the copy: %v", err)
	}
	if fi, _ := os.Stat(cp); fi.Mode().Perm() != 0o600 {
		t.Errorf("copy mode %v", fi.Mode())
	}
	for _, args := range [][]string{{"--out", cp}, {"--out", path, "--force"}, {"--force"}} {
		r := run(t, env, "", append([]string{"keys", "unprotect"}, args...)...)
		if r.code == 0 || fileBytes(t, path) != doc {
			t.Errorf("unprotect %v: exit %d %q", args, r.code, r.err)
		}
	}
	mustRun(t, env, "", "keys", "unprotect", "--out", cp, "--force")

	// unprotect in place, then again: unchanged.
	rep = decodeReport(t, mustRun(t, env, "", "keys", "unprotect", "-o", "json"))
	if rep.Action != "unprotected" || rep.Protected || changes(rep) != "unprotected" {
		t.Errorf("unprotect: %+v", rep)
	}
	kr, _, err := secret.Load(path)
	if err != nil || kr.Protected() || !kr.Equal(orig) {
		t.Errorf("in place: %v", err)
	}
	if h := mustRun(t, env, "", "keys", "unprotect"); !strings.Contains(h.out, "nothing changed") {
		t.Errorf("unprotect twice: %s", h.out)
	}
	// init --protect.
	fresh := filepath.Join(dir, "fresh.jwe")
	rep = decodeReport(t, mustRun(t, nil, "", "keys", "init", "--keyring", fresh, "--kid", "f", "--protect", "--password-file", pw, "-o", "json"))
	if !rep.Protected || !secret.IsProtectedDocument([]byte(fileBytes(t, fresh))) {
		t.Errorf("init --protect: %+v", rep)
	}
}

// Every verb on a protected keyring with members flecht does not know
// writes it back protected, with those members, mode 0600, and prints no
// key byte and no password.
func TestKeysEditsKeepProtectionAndUnknownMembers(t *testing.T) {
	t.Parallel() // each protected read or write derives a key: slow under -race
	v := loadCLIVectors(t)
	dir := t.TempDir()
	var doc map[string]any
	json.Unmarshal(v.Keyrings["x25519_ed25519"], &doc)
	doc["x-owner"] = "team-a"
	doc["keys"].([]any)[1].(map[string]any)["use"] = "enc" // on r
	plain, _ := json.Marshal(doc)
	kr, err := secret.ParseKeyring(plain)
	if err != nil {
		t.Fatal(err)
	}
	const password = "correct horse battery staple"
	kr, _ = kr.Protect([]byte(password))
	path := filepath.Join(dir, "k.jwe")
	if err := kr.Save(path); err != nil {
		t.Fatal(err)
	}
	pw := writeKeyringFile(t, dir, "pw", password+"\n")
	env := map[string]string{EnvKeyring: path, EnvKeyringPasswordFile: pw}
	rJWK, _ := kr.PublicJWK("r")
	jwkFile := writeKeyringFile(t, dir, "r.jwk", strings.Replace(string(rJWK), `"kid": "r"`, `"kid": "r-imported"`, 1))

	secrets := append(privateHalves(t, plain), password)
	var outputs []result
	for _, args := range [][]string{
		{"add", "--kid", "b"},
		{"add", "--kid", "s2", "--type", "ed25519", "--scope", "api", "--signing-for", "api"},
		{"promote", "--kid", "b"},
		{"promote", "--kid", "b", "--scope", "db"},
		{"signing", "--scope", "cfg", "--clear"},
		{"import", jwkFile},
		{"remove", "--kid", "a"},
		{"list", "-o", "json"},
		{"export", "s2"},
	} {
		r := mustRun(t, env, "", append([]string{"keys"}, args...)...)
		outputs = append(outputs, r)
		b := []byte(fileBytes(t, path))
		if !secret.IsProtectedDocument(b) {
			t.Fatalf("%v wrote the protected keyring plain", args)
		}
		after, err := secret.OpenProtected(b, []byte(password))
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		j, _ := after.JWKS()
		if !strings.Contains(string(j), `"x-owner": "team-a"`) || !strings.Contains(string(j), `"use": "enc"`) {
			t.Errorf("%v dropped an unknown member:\n%s", args, j)
		}
		if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
			t.Errorf("%v: mode %v", args, fi.Mode())
		}
	}
	for _, r := range outputs {
		for _, s := range secrets {
			if strings.Contains(r.out, s) || strings.Contains(r.err, s) {
				t.Fatalf("secret material in output:\n%s\n%s", r.out, r.err)
			}
		}
	}
}
