package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/secret"
	"github.com/flecht-dev/flecht/internal/ui"
)

// row finds the row of kid in a report.
func row(t *testing.T, rep secret.KeyringReport, kid string) secret.KeyRow {
	t.Helper()
	for _, k := range rep.Keys {
		if k.Kid == kid {
			return k
		}
	}
	t.Fatalf("no key %q in %+v", kid, rep.Keys)
	return secret.KeyRow{}
}

// changes renders a report's changes compactly: "key_added:r(x25519)",
// "primary_for:api=r<-", "signing_for:api=<-s".
func changes(rep secret.KeyringReport) string {
	var out []string
	for _, c := range rep.Changes {
		switch c.Change {
		case secret.ChangeKeyAdded:
			out = append(out, fmt.Sprintf("%s:%s(%s)", c.Change, c.Kid, c.Type))
		case secret.ChangeKeyRemoved:
			out = append(out, c.Change+":"+c.Kid)
		case secret.ChangeProtected, secret.ChangeUnprotected:
			out = append(out, c.Change)
		default:
			out = append(out, fmt.Sprintf("%s:%s=%s<-%s", c.Change, c.Scope, c.Kid, c.From))
		}
	}
	return strings.Join(out, " ")
}

// fileBytes reads a file, "" when it does not exist.
func fileBytes(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	return string(b)
}

func TestKeysInitOfEachKind(t *testing.T) {
	dir := t.TempDir()
	path := func(name string) string { return filepath.Join(dir, name) }

	rep := decodeReport(t, mustRun(t, nil, "", "keys", "init", "--keyring", path("x.json"), "--kid", "r", "--type", "x25519",
		"--scope", "db", "--scope", "api", "--primary-for", "api", "-o", "json"))
	r := row(t, rep, "r")
	if r.Type != secret.TypeX25519 || !r.Private || !slices.Equal(r.Scopes, []string{"api", "db"}) ||
		!slices.Equal(r.Roles, []string{"primary", "primary-for:api"}) || rep.PrimaryFor["api"] != "r" {
		t.Errorf("x25519 init: %+v", rep)
	}
	if got := changes(rep); got != "key_added:r(x25519) primary:=r<- primary_for:api=r<-" {
		t.Errorf("changes: %s", got)
	}
	// A bound primary seals only its scopes: the report says so.
	if len(rep.Warnings) != 1 || !strings.Contains(rep.Warnings[0], "cannot seal unscoped values") {
		t.Errorf("warnings %q", rep.Warnings)
	}
	kr, _, err := secret.Load(path("x.json"))
	if err != nil || kr.Primary() != "r" || kr.Type("r") != secret.TypeX25519 {
		t.Fatalf("x25519 keyring: %v %v", kr, err)
	}
	if _, err := kr.Encrypt([]byte(`"v"`), "api"); err != nil {
		t.Errorf("the new x25519 key does not seal its scope: %v", err)
	}

	// Usage errors, each saying what to do, and no file written.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--type", "ed25519", "--scope", "api"}, "keys add --type ed25519"},
		{[]string{"--type", "x25519"}, "give --scope S"},
		{[]string{"--type", "rsa"}, `unknown --type "rsa"`},
		{[]string{"--signing-for", "api"}, "drop --signing-for, then add the signing key with 'flecht keys add --type ed25519"},
		{[]string{"--type", "x25519", "--scope", "api", "--signing-for", "api"}, "cannot sign: drop --signing-for"},
		{[]string{"--type", "x25519", "--scope", "db", "--primary-for", "api"}, "add --scope api"},
		{[]string{"--scope", "bad\nscope"}, "a scope must be printable"},
	} {
		p := path("refused.json")
		r := run(t, nil, "", append([]string{"keys", "init", "--keyring", p, "--kid", "k"}, tc.args...)...)
		if r.code != exitcode.Usage || !strings.Contains(r.err, tc.want) {
			t.Errorf("init %v: exit %d %q, want 2 and %q", tc.args, r.code, r.err, tc.want)
		}
		if fileBytes(t, p) != "" {
			t.Errorf("init %v wrote the file", tc.args)
		}
	}
}

func TestKeysAddOfEachKindWithRoles(t *testing.T) {
	path := newKeyring(t, "a")
	env := keysEnv(path)
	add := func(args ...string) secret.KeyringReport {
		t.Helper()
		return decodeReport(t, mustRun(t, env, "", append([]string{"keys", "add", "-o", "json"}, args...)...))
	}
	rep := add("--kid", "r", "--type", "x25519", "--scope", "api", "--primary-for", "api")
	if got := changes(rep); got != "key_added:r(x25519) primary_for:api=r<-" || rep.Action != "added" {
		t.Errorf("add x25519: %s %+v", got, rep)
	}
	rep = add("--kid", "s", "--type", "Ed25519", "--scope", "api", "--scope", "cfg", "--signing-for", "api", "--signing-for", "cfg")
	if got := changes(rep); got != "key_added:s(ed25519) signing_for:api=s<- signing_for:cfg=s<-" {
		t.Errorf("add ed25519: %s", got)
	}
	if s := row(t, rep, "s"); !slices.Equal(s.SigningFor, []string{"api", "cfg"}) || !slices.Equal(s.Roles, []string{"signing-for:api", "signing-for:cfg"}) {
		t.Errorf("signer row %+v", s)
	}
	rep = add("--kid", "b", "--primary")
	if got := changes(rep); got != "key_added:b(oct) primary:=b<-a" {
		t.Errorf("add --primary: %s", got)
	}
	// The file is what the report says, and upstream's rules hold: the
	// keyring seals scope api to r, signs api with s.
	kr, _, err := secret.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if kid, _ := kr.SealingKid("api"); kid != "r" {
		t.Errorf("api seals with %q", kid)
	}
	if kid, _ := kr.SigningKid("cfg"); kid != "s" {
		t.Errorf("cfg signs with %q", kid)
	}
	// The human form names each change.
	h := mustRun(t, env, "", "keys", "add", "--kid", "r2", "--type", "x25519", "--scope", "api")
	for _, want := range []string{`added key "r2"`, `+ key "r2": x25519 recipient with its private half`, "bound to api", "flecht keys check --kid r2"} {
		if !strings.Contains(h.out, want) {
			t.Errorf("human add lacks %q:\n%s", want, h.out)
		}
	}

	before := fileBytes(t, path)
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--kid", "s"}, exitcode.Refused, `keyring_conflict: key "s": kid already in the keyring`},
		{[]string{"--kid", "e", "--type", "ed25519", "--scope", "api", "--primary"}, exitcode.Usage, "cannot be --primary"},
		{[]string{"--kid", "e", "--type", "ed25519", "--scope", "api", "--primary-for", "api"}, exitcode.Usage, "cannot seal"},
		{[]string{"--kid", "e", "--type", "ed25519"}, exitcode.Usage, "give --scope S"},
		{[]string{"--kid", "e", "--type", "ed25519", "--scope", "db", "--signing-for", "api"}, exitcode.Usage, "add --scope api"},
		{[]string{"--kid", "e", "--type", "x25519", "--scope", "api", "--signing-for", "api"}, exitcode.Usage, "only an ed25519 key signs"},
		{[]string{"--kid", "e", "--scope", "db", "--primary-for", "api"}, exitcode.Usage, "could not seal scope"},
		{[]string{"--kid", "e", "--type", "dsa"}, exitcode.Usage, "use oct, x25519 or ed25519"},
		{[]string{"--kid", "e", "--primary-for", " api"}, exitcode.Usage, "whitespace"},
	} {
		r := run(t, env, "", append([]string{"keys", "add"}, tc.args...)...)
		if r.code != tc.code || !strings.Contains(r.err, tc.want) {
			t.Errorf("add %v: exit %d %q, want %d and %q", tc.args, r.code, r.err, tc.code, tc.want)
		}
	}
	if fileBytes(t, path) != before {
		t.Error("a refused add changed the file")
	}
}

func TestKeysPromoteAndSigningRoles(t *testing.T) {
	v := loadCLIVectors(t)
	path := writeKeyringFile(t, t.TempDir(), "k.json", string(v.Keyrings["x25519_ed25519"])) // a, r (api), s (api, cfg)
	env := keysEnv(path)
	mustRun(t, env, "", "keys", "add", "--kid", "r2", "--type", "x25519", "--scope", "api")
	mustRun(t, env, "", "keys", "add", "--kid", "s2", "--type", "ed25519", "--scope", "api")

	// Per-scope promotion moves only that scope's sealing key.
	rep := decodeReport(t, mustRun(t, env, "", "keys", "promote", "--kid", "r2", "--scope", "api", "-o", "json"))
	if got := changes(rep); got != "primary_for:api=r2<-r" || rep.Action != "promoted" || rep.Scope != "api" || rep.Primary != "a" {
		t.Errorf("promote --scope: %s %+v", got, rep)
	}
	h := mustRun(t, env, "", "keys", "promote", "--kid", "r2", "--scope", "api")
	if !strings.Contains(h.out, "nothing changed") {
		t.Errorf("promote again:\n%s", h.out)
	}
	// --clear: the scope seals under the primary again.
	rep = decodeReport(t, mustRun(t, env, "", "keys", "promote", "--scope", "api", "--clear", "-o", "json"))
	if got := changes(rep); got != "primary_for:api=<-r2" || rep.Action != "cleared" {
		t.Errorf("promote --clear: %s", got)
	}
	if rep := decodeReport(t, mustRun(t, env, "", "keys", "promote", "--scope", "api", "--clear", "-o", "json")); rep.Action != "unchanged" {
		t.Errorf("clear twice: %+v", rep)
	}
	// signing, and its clear.
	rep = decodeReport(t, mustRun(t, env, "", "keys", "signing", "--kid", "s2", "--scope", "api", "-o", "json"))
	if got := changes(rep); got != "signing_for:api=s2<-s" || rep.Action != "assigned" {
		t.Errorf("signing: %s", got)
	}
	rep = decodeReport(t, mustRun(t, env, "", "keys", "signing", "--scope", "cfg", "--clear", "-o", "json"))
	if got := changes(rep); got != "signing_for:cfg=<-s" {
		t.Errorf("signing --clear: %s", got)
	}
	kr, _, err := secret.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if tok, err := kr.Sign([]byte(`1`), "api"); err != nil || mustInspect(t, tok).Kid != "s2" {
		t.Errorf("api signs with the new key: %v", err)
	}
	if _, err := kr.Sign([]byte(`1`), "cfg"); secret.KindOf(err) != secret.KindNoSigningKey {
		t.Errorf("cfg after clear: %v", err)
	}

	before := fileBytes(t, path)
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"promote", "--kid", "s"}, exitcode.Usage, "ed25519 signing key and cannot seal"},
		{[]string{"promote", "--kid", "r2", "--scope", "db"}, exitcode.Usage, "binding never changes"},
		{[]string{"promote", "--kid", "zz"}, exitcode.Failure, `unknown_kid: key "zz"`},
		{[]string{"promote", "--clear"}, exitcode.Usage, "--clear needs --scope S"},
		{[]string{"promote", "--kid", "a", "--scope", "api", "--clear"}, exitcode.Usage, "--clear takes no --kid"},
		{[]string{"signing", "--kid", "s2"}, exitcode.Usage, "--scope S is required"},
		{[]string{"signing", "--kid", "r", "--scope", "api"}, exitcode.Usage, "only an ed25519 key signs"},
		{[]string{"signing", "--kid", "s2", "--scope", "cfg"}, exitcode.Usage, "cannot sign scope"},
		{[]string{"signing", "--kid", "zz", "--scope", "api"}, exitcode.Failure, "unknown_kid"},
	} {
		r := run(t, env, "", append([]string{"keys"}, tc.args...)...)
		if r.code != tc.code || !strings.Contains(r.err, tc.want) {
			t.Errorf("%v: exit %d %q, want %d and %q", tc.args, r.code, r.err, tc.code, tc.want)
		}
	}
	if fileBytes(t, path) != before {
		t.Error("a refused role change changed the file")
	}
	// A bound x25519 key may be the primary (upstream allows it): it is
	// promoted, with a warning that unscoped values cannot be sealed.
	r := mustRun(t, env, "", "keys", "promote", "--kid", "r2")
	if !strings.Contains(r.out, "cannot seal unscoped values") || !strings.Contains(r.out, `primary: "a" → "r2"`) {
		t.Errorf("promote a bound key: %s", r.out)
	}
	// A public-only signer cannot sign.
	sealOnly := writeKeyringFile(t, t.TempDir(), "so.json", string(v.Keyrings["seal_only"]))
	if r := run(t, keysEnv(sealOnly), "", "keys", "signing", "--kid", "s", "--scope", "api"); r.code != exitcode.Usage || !strings.Contains(r.err, "only the public half") {
		t.Errorf("signing with a public-only key: exit %d %q", r.code, r.err)
	}
}

func mustInspect(t *testing.T, tok string) secret.Header {
	t.Helper()
	h, err := secret.InspectHeader(tok)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// keys remove refuses a kid a role names, with the exact commands that
// move each role; running them makes the removal go through.
func TestKeysRemoveNamesTheCommandsThatMoveEachRole(t *testing.T) {
	v := loadCLIVectors(t)
	dir := t.TempDir()
	path := writeKeyringFile(t, dir, "k.json", string(v.Keyrings["x25519_ed25519"])) // primary a; api → r; signing api, cfg → s
	env := keysEnv(path)
	mustRun(t, env, "", "keys", "add", "--kid", "b")
	mustRun(t, env, "", "keys", "add", "--kid", "r2", "--type", "x25519", "--scope", "api")

	before := fileBytes(t, path)
	for kid, wants := range map[string][]string{
		"a": {"the primary:", "flecht keys promote --keyring " + path + " --kid b"},
		"r": {`the sealing key of scope "api" (flenc_primaries)`, "flecht keys promote --keyring " + path + " --scope api --kid r2",
			`or seal scope "api" under the primary "a" again`, "--scope api --clear"},
		"s": {`the signing key of scope "api"`, `the signing key of scope "cfg"`,
			"flecht keys add --keyring " + path + " --kid NEW --type ed25519 --scope api",
			"flecht keys signing --keyring " + path + " --scope cfg --clear"},
	} {
		r := run(t, env, "", "keys", "remove", "--kid", kid)
		if r.code != exitcode.Refused || !strings.HasPrefix(r.err, `error: keyring_conflict: key "`+kid+`": refusing to remove it`) {
			t.Errorf("remove %s: exit %d %q", kid, r.code, r.err)
		}
		for _, w := range wants {
			if !strings.Contains(r.err, w) {
				t.Errorf("remove %s: the refusal lacks %q:\n%s", kid, w, r.err)
			}
		}
	}
	if fileBytes(t, path) != before {
		t.Fatal("a refused remove changed the file")
	}
	// Run the commands the refusal names, as an operator would copy them.
	r := run(t, env, "", "keys", "remove", "--kid", "r")
	for line := range strings.SplitSeq(r.err, "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "flecht keys promote") && strings.HasSuffix(line, "--kid r2") {
			mustRun(t, nil, "", strings.Fields(strings.TrimPrefix(line, "flecht "))...)
		}
	}
	mustRun(t, env, "", "keys", "remove", "--kid", "r")
	r = run(t, env, "", "keys", "remove", "--kid", "s")
	for line := range strings.SplitSeq(r.err, "\n") {
		if line = strings.TrimSpace(line); strings.HasPrefix(line, "flecht keys signing") && strings.HasSuffix(line, "--clear") {
			mustRun(t, nil, "", strings.Fields(strings.TrimPrefix(line, "flecht "))...)
		}
	}
	rep := decodeReport(t, mustRun(t, env, "", "keys", "remove", "--kid", "s", "-o", "json"))
	if got := changes(rep); got != "key_removed:s" {
		t.Errorf("remove s: %s", got)
	}
	// What is left loads in upstream's rules (the library validates as
	// upstream does).
	if _, _, err := secret.Load(path); err != nil {
		t.Fatal(err)
	}
}

// keys list shows every key's kind, halves, scopes and roles, and flags a
// broken pair.
func TestKeysListShowsKindsHalvesScopesRoles(t *testing.T) {
	v := loadCLIVectors(t)
	dir := t.TempDir()
	path := writeKeyringFile(t, dir, "so.json", string(v.Keyrings["seal_only"]))
	r := mustRun(t, keysEnv(path), "", "keys", "list")
	for _, want := range []string{
		"a    oct      private      -        primary",
		"r    x25519   public only  api      primary-for:api",
		"s    ed25519  public only  api,cfg  -",
	} {
		if !strings.Contains(r.out, want) {
			t.Errorf("list lacks %q:\n%s", want, r.out)
		}
	}
	rep := decodeReport(t, mustRun(t, keysEnv(path), "", "keys", "list", "-o", "json"))
	if s := row(t, rep, "s"); s.Private || s.Type != secret.TypeEd25519 || !slices.Equal(s.Scopes, []string{"api", "cfg"}) || len(s.Roles) != 0 {
		t.Errorf("s: %+v", s)
	}
	if rep.PrimaryFor["api"] != "r" || len(rep.SigningFor) != 0 || rep.Protected {
		t.Errorf("roles %+v %+v", rep.PrimaryFor, rep.SigningFor)
	}

	// A private half that does not belong to its public half: listed,
	// flagged, and never used.
	var doc map[string]any
	json.Unmarshal(v.Keyrings["x25519_ed25519"], &doc)
	for _, k := range doc["keys"].([]any) {
		if k := k.(map[string]any); k["kid"] == "r" {
			k["x"] = "8iQ3hPhOAIoOonRCQZcrtzIVCw8H08yZI9rxld8FV6U" // another key's public half
		}
	}
	b, _ := json.Marshal(doc)
	broken := writeKeyringFile(t, dir, "broken.json", string(b))
	r = mustRun(t, keysEnv(broken), "", "keys", "list")
	if !strings.Contains(r.out, "private (MISMATCH)") || !strings.Contains(r.out, `warning: key "r": its private half does not match`) {
		t.Errorf("mismatch not shown:\n%s", r.out)
	}
	rep = decodeReport(t, mustRun(t, keysEnv(broken), "", "keys", "list", "-o", "json"))
	if !row(t, rep, "r").Mismatch || row(t, rep, "a").Mismatch {
		t.Errorf("mismatch flags %+v", rep.Keys)
	}
}

// Every verb that changes the keyring holds its lock from reading to
// writing: a change written by another holder while the verb waits is in
// the verb's result. A verb that read before taking the lock would write
// back the keyring without it.
func TestKeysEveryEditTakesTheLock(t *testing.T) {
	v := loadCLIVectors(t)
	dir := t.TempDir()
	jwkFile := filepath.Join(dir, "r9.jwk")
	src := writeKeyringFile(t, dir, "src.json", string(v.Keyrings["x25519_ed25519"]))
	kr, _, _ := secret.Load(src)
	jwk, _ := kr.PublicJWK("r")
	os.WriteFile(jwkFile, []byte(strings.Replace(string(jwk), `"r"`, `"r9"`, 1)), 0o600)
	pw := writeKeyringFile(t, dir, "pw", "a password of some length\n")

	for _, verb := range [][]string{
		{"add", "--kid", "new"},
		{"promote", "--kid", "b"},
		{"promote", "--kid", "b", "--scope", "db"},
		{"signing", "--scope", "cfg", "--clear"},
		{"remove", "--kid", "b"},
		{"import", jwkFile},
		{"protect", "--password-file", pw},
	} {
		t.Run(verb[0], func(t *testing.T) {
			path := writeKeyringFile(t, t.TempDir(), "k.json", string(v.Keyrings["x25519_ed25519"]))
			seed, _, _ := secret.Load(path)
			seed, _ = seed.Add("b")
			seed.Save(path)
			unlock, err := secret.Lock(path)
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan result, 1)
			go func() { done <- run(t, keysEnv(path), "", append([]string{"keys"}, verb...)...) }()
			// While the verb waits, another holder adds a key.
			time.Sleep(100 * time.Millisecond)
			cur, _, err := secret.Load(path)
			if err != nil {
				t.Fatal(err)
			}
			cur, _ = cur.Add("other-writer")
			if err := cur.Save(path); err != nil {
				t.Fatal(err)
			}
			select {
			case r := <-done:
				t.Fatalf("the verb finished while the lock was held: exit %d %q", r.code, r.err)
			default:
			}
			unlock()
			var r result
			select {
			case r = <-done:
			case <-time.After(60 * time.Second):
				t.Fatal("the verb did not finish after the lock was released")
			}
			if r.code != 0 {
				t.Fatalf("exit %d %q", r.code, r.err)
			}
			after, _, err := secret.Load(path, secret.WithPassword(secret.PasswordFile(pw)))
			if err != nil {
				t.Fatal(err)
			}
			if !after.Has("other-writer") {
				t.Errorf("%v dropped the change made while it waited for the lock", verb)
			}
		})
	}
}

// A new password is asked twice on a terminal, refused when short or when
// the two differ; a protected keyring's password is asked before the lock
// is taken (a lock held while someone types would go stale).
func TestKeysPasswordPrompts(t *testing.T) {
	prompt := func(answers ...string) (ui.PromptFunc, *[]string) {
		var asked []string
		return func(label string) ([]byte, error) {
			asked = append(asked, label)
			if len(answers) == 0 {
				return nil, errors.New("no more answers")
			}
			a := answers[0]
			answers = answers[1:]
			return []byte(a), nil
		}, &asked
	}
	p, asked := prompt("fourteen bytes!", "fourteen bytes!")
	if pw, err := newKeyringPassword("", p); err != nil || string(pw) != "fourteen bytes!" || len(*asked) != 2 {
		t.Errorf("matching: %q %v %q", pw, err, *asked)
	}
	p, _ = prompt("fourteen bytes!", "fourteen bytes?")
	if _, err := newKeyringPassword("", p); exitcode.Code(err) != exitcode.Usage || !strings.Contains(err.Error(), "differ") || strings.Contains(err.Error(), "fourteen") {
		t.Errorf("differing: %v", err)
	}
	p, asked = prompt("short")
	if _, err := newKeyringPassword("", p); exitcode.Code(err) != exitcode.Usage || !strings.Contains(err.Error(), "at least 14 bytes") || len(*asked) != 1 {
		t.Errorf("short: %v, asked %q", err, *asked)
	}
	if _, err := newKeyringPassword("", nil); exitcode.Code(err) != exitcode.Usage || !strings.Contains(err.Error(), EnvKeyringPasswordFile) {
		t.Errorf("no source: %v", err)
	}
	short := writeKeyringFile(t, t.TempDir(), "pw", "tiny\n")
	if _, err := newKeyringPassword(short, nil); exitcode.Code(err) != exitcode.Usage || strings.Contains(err.Error(), "tiny") {
		t.Errorf("short file: %v", err)
	}

	// protect asks twice, then add on the protected file asks once, with
	// no lock held at the time.
	path := newKeyring(t, "k1")
	lock := filepath.Join(filepath.Dir(path), ".keyring.json.lock")
	io, _, out, _ := ui.Test()
	var labels []string
	opts := &KeysOptions{IO: io, Printer: func() *ui.Printer { return ui.NewPrinter(io, ui.FormatJSON) }, Keyring: path,
		Prompt: func(label string) ([]byte, error) {
			labels = append(labels, label)
			if _, err := os.Stat(lock); err == nil {
				t.Errorf("asked %q while the lock was held", label)
			}
			return []byte("correct horse battery staple"), nil
		}}
	if err := runKeysProtect(opts); err != nil {
		t.Fatal(err)
	}
	opts.Kid = "k2"
	opts.Type = "oct"
	if err := runKeysAdd(opts); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(labels, []string{"New keyring password: ", "Repeat the password: ", "Keyring password: "}) {
		t.Errorf("asked %q", labels)
	}
	if strings.Contains(out.String(), "horse") {
		t.Error("a password was printed")
	}
	kr, _, err := secret.Load(path, secret.WithPassword(func() ([]byte, error) { return []byte("correct horse battery staple"), nil }))
	if err != nil || !kr.Protected() || !kr.Has("k2") {
		t.Errorf("after protect and add: %v %v", kr, err)
	}
}

// The concurrency proof of the lock for every kind of verb at once: adds,
// role moves and removals interleaved from several processes lose nothing.
func TestKeysConcurrentMixedEditsLoseNothing(t *testing.T) {
	path := newKeyring(t, "k0")
	const writers, rounds = 3, 6
	var wg sync.WaitGroup
	errs := make(chan string, writers*rounds*4)
	for w := range writers {
		env := map[string]string{EnvKeyring: path, "HOME": t.TempDir()}
		wg.Go(func() {
			for i := range rounds {
				sig := fmt.Sprintf("s%d-%d", w, i)
				for _, args := range [][]string{
					{"add", "--kid", fmt.Sprintf("w%d-%d", w, i)},
					{"add", "--kid", sig, "--type", "ed25519", "--scope", fmt.Sprintf("scope%d", w)},
					{"signing", "--kid", sig, "--scope", fmt.Sprintf("scope%d", w)},
					{"add", "--kid", fmt.Sprintf("tmp%d-%d", w, i)},
					{"remove", "--kid", fmt.Sprintf("tmp%d-%d", w, i)},
				} {
					if r := run(t, env, "", append([]string{"keys"}, args...)...); r.code != 0 {
						errs <- fmt.Sprintf("%v: %s", args, r.err)
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	kr, _, err := secret.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(kr.Kids()); got != 1+2*writers*rounds {
		t.Errorf("%d keys, want %d", got, 1+2*writers*rounds)
	}
	for w := range writers {
		if kid, _ := kr.SigningKid(fmt.Sprintf("scope%d", w)); kid != fmt.Sprintf("s%d-%d", w, rounds-1) {
			t.Errorf("scope%d signs with %q", w, kid)
		}
	}
}

// lockWatcher is standard output that notes whether the keyring's lock was
// held when the verb first wrote to it.
type lockWatcher struct {
	dir       string
	wrote     bool
	heldWhile bool
	buf       strings.Builder
}

func (w *lockWatcher) Write(p []byte) (int, error) {
	if !w.wrote {
		w.wrote = true
		locks, _ := filepath.Glob(filepath.Join(w.dir, ".*.lock"))
		w.heldWhile = len(locks) > 0
	}
	return w.buf.Write(p)
}

// A verb prints only once it released the keyring's lock: a reader that
// closes the pipe early ('keys add … | head -1') kills the process with
// SIGPIPE mid-print, and a lock left then makes the next verb wait 10
// seconds for it to turn stale.
func TestKeysVerbsPrintAfterUnlocking(t *testing.T) {
	v := loadCLIVectors(t)
	for _, verb := range [][]string{
		{"add", "--kid", "n1"},
		{"promote", "--kid", "a"}, // already the primary: nothing changes
		{"signing", "--scope", "cfg", "--clear"},
	} {
		dir := t.TempDir()
		path := writeKeyringFile(t, dir, "k.json", string(v.Keyrings["x25519_ed25519"]))
		w := &lockWatcher{dir: dir}
		f := &Factory{IO: &ui.IOStreams{In: strings.NewReader(""), Out: w, ErrOut: &strings.Builder{}},
			Getenv: func(k string) string { return map[string]string{EnvKeyring: path, "HOME": dir}[k] }}
		if code := Main(t.Context(), f, append([]string{"keys"}, verb...)); code != 0 {
			t.Fatalf("%v: exit %d: %s", verb, code, w.buf.String())
		}
		if !w.wrote || w.heldWhile {
			t.Errorf("%v: printed %v, while the lock was held %v", verb, w.wrote, w.heldWhile)
		}
	}
}
