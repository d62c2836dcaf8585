package cli

import (
	"bufio"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/secret"
)

// keysEnv runs commands against one keyring through FLECHT_KEYRING.
func keysEnv(path string) map[string]string { return map[string]string{EnvKeyring: path} }

// mustRun runs flecht and fails the test unless it exits 0.
func mustRun(t *testing.T, env map[string]string, stdin string, args ...string) result {
	t.Helper()
	r := run(t, env, stdin, args...)
	if r.code != 0 {
		t.Fatalf("%v: exit %d\nstdout: %s\nstderr: %s", args, r.code, r.out, r.err)
	}
	return r
}

func decodeReport(t *testing.T, r result) secret.KeyringReport {
	t.Helper()
	var rep secret.KeyringReport
	if err := json.Unmarshal([]byte(r.out), &rep); err != nil {
		t.Fatalf("output is not a keyring report: %v\n%s", err, r.out)
	}
	return rep
}

// keyMaterial returns every key's bytes from a keyring file in the forms
// they could leak in: the file's base64url, standard base64, hex.
func keyMaterial(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Keys []struct{ K string } `json:"keys"`
	}
	if err := json.Unmarshal(b, &doc); err != nil || len(doc.Keys) == 0 {
		t.Fatalf("keyring file: %v\n%s", err, b)
	}
	var out []string
	for _, k := range doc.Keys {
		raw, err := base64.RawURLEncoding.DecodeString(k.K)
		if err != nil || len(raw) != secret.KeySize {
			t.Fatalf("key %q: %v", k.K, err)
		}
		out = append(out, k.K, base64.StdEncoding.EncodeToString(raw), base64.RawStdEncoding.EncodeToString(raw), hex.EncodeToString(raw))
	}
	return out
}

func TestKeysInitCreatesPrivateKeyring(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keyring.json")
	r := mustRun(t, nil, "", "keys", "init", "--keyring", path, "--kid", "prod-2026-01", "-o", "json")
	rep := decodeReport(t, r)
	want := secret.KeyringReport{Keyring: path, Action: "created", Kid: "prod-2026-01", Primary: "prod-2026-01",
		Changes:    []secret.KeyringChange{{Change: "key_added", Kid: "prod-2026-01", Type: "oct"}, {Change: "primary", Kid: "prod-2026-01"}},
		PrimaryFor: map[string]string{}, SigningFor: map[string]string{},
		Keys: []secret.KeyRow{{Kid: "prod-2026-01", Type: "oct", Private: true, Scopes: []string{}, Roles: []string{"primary"},
			Primary: true, PrimaryFor: []string{}, SigningFor: []string{}}}}
	if fmt.Sprint(rep) != fmt.Sprint(want) {
		t.Errorf("report %+v, want %+v", rep, want)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("keyring file: %v, mode %v", err, fi.Mode())
	}
	kr, warnings, err := secret.Load(path)
	if err != nil || len(warnings) != 0 || kr.Primary() != "prod-2026-01" || len(kr.List()) != 1 {
		t.Fatalf("Load: %v %v %v", kr, warnings, err)
	}
	// Nothing but the keyring is left in the directory.
	if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 1 {
		t.Errorf("directory holds %d entries, want only the keyring", len(entries))
	}
	// Two inits never share a key.
	other := filepath.Join(t.TempDir(), "keyring.json")
	mustRun(t, nil, "", "keys", "init", "--keyring", other, "--kid", "prod-2026-01")
	a, b := keyMaterial(t, path), keyMaterial(t, other)
	if a[0] == b[0] {
		t.Error("two inits minted the same key")
	}
	// The human form says what happened.
	human := mustRun(t, nil, "", "keys", "init", "--keyring", filepath.Join(t.TempDir(), "k.json"), "--kid", "k1")
	if !strings.Contains(human.out, `created`) || !strings.Contains(human.out, "k1") {
		t.Errorf("human output: %q", human.out)
	}
}

func TestKeysInitRefusesToOverwrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "keyring.json")
	const content = "not a keyring, and not init's to replace\n"
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	r := run(t, nil, "", "keys", "init", "--keyring", path, "--kid", "k1")
	if r.code != exitcode.Refused || !strings.Contains(r.err, "refusing to overwrite") {
		t.Fatalf("exit %d, stderr %q; want 3 and a refusal", r.code, r.err)
	}
	if b, _ := os.ReadFile(path); string(b) != content {
		t.Error("init changed an existing file")
	}
	// A symlink, even a dangling one, is a file init does not replace.
	link := filepath.Join(dir, "link.json")
	if err := os.Symlink(filepath.Join(dir, "nowhere.json"), link); err == nil {
		r := run(t, keysEnv(link), "", "keys", "init", "--kid", "k1")
		if r.code != exitcode.Refused {
			t.Errorf("dangling symlink: exit %d, %q", r.code, r.err)
		}
		if _, err := os.Stat(filepath.Join(dir, "nowhere.json")); !errors.Is(err, fs.ErrNotExist) {
			t.Error("init wrote through a symlink")
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) > 2 {
		t.Errorf("refused init left files behind: %d entries", len(entries))
	}
}

func TestKeysRotationLifecycle(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keyring.json")
	env := keysEnv(path)
	mustRun(t, env, "", "keys", "init", "--kid", "k1")
	old := strings.TrimSpace(mustRun(t, env, "", "secrets", "encrypt", "--scope", "api_key", `"sk-old"`).out)

	// add: a new key that is not primary.
	rep := decodeReport(t, mustRun(t, env, "", "keys", "add", "--kid", "k2", "-o", "json"))
	if rep.Action != "added" || rep.Kid != "k2" || rep.Primary != "k1" || len(rep.Keys) != 2 || rep.Keys[1].Kid != "k2" || rep.Keys[1].Primary ||
		fmt.Sprint(rep.Changes) != fmt.Sprint([]secret.KeyringChange{{Change: "key_added", Kid: "k2", Type: "oct"}}) {
		t.Errorf("add: %+v", rep)
	}
	before, _ := os.ReadFile(path)
	r := run(t, env, "", "keys", "add", "--kid", "k2")
	if r.code != exitcode.Refused || !strings.Contains(r.err, "keyring_conflict") {
		t.Errorf("duplicate kid: exit %d %q", r.code, r.err)
	}
	if after, _ := os.ReadFile(path); string(after) != string(before) {
		t.Error("a refused add changed the file")
	}

	// promote: new tokens use k2, old tokens still open.
	rep = decodeReport(t, mustRun(t, env, "", "keys", "promote", "--kid", "k2", "-o", "json"))
	if rep.Action != "promoted" || rep.Primary != "k2" || !rep.Keys[1].Primary || rep.Keys[0].Primary {
		t.Errorf("promote: %+v", rep)
	}
	var enc secret.EncryptResult
	json.Unmarshal([]byte(mustRun(t, env, "", "secrets", "encrypt", "-o", "json", `"sk-new"`).out), &enc)
	if enc.Kid != "k2" {
		t.Errorf("after promote, encrypt used %q", enc.Kid)
	}
	if r := mustRun(t, env, "", "secrets", "decrypt", "--scope", "api_key", old); strings.TrimSpace(r.out) != `"sk-old"` {
		t.Errorf("old token after promote: %q", r.out)
	}
	before, _ = os.ReadFile(path)
	rep = decodeReport(t, mustRun(t, env, "", "keys", "promote", "--kid", "k2", "-o", "json"))
	if rep.Action != "unchanged" {
		t.Errorf("promoting the primary again: %+v", rep)
	}
	if after, _ := os.ReadFile(path); string(after) != string(before) {
		t.Error("a no-op promote rewrote the file")
	}
	r = run(t, env, "", "keys", "promote", "--kid", "k9")
	if r.code != exitcode.Failure || !strings.Contains(r.err, `unknown_kid: key "k9"`) || !strings.Contains(r.err, `"k1", "k2"`) {
		t.Errorf("promote unknown kid: exit %d %q", r.code, r.err)
	}

	// remove: never the primary.
	r = run(t, env, "", "keys", "remove", "--kid", "k2")
	if r.code != exitcode.Refused || !strings.Contains(r.err, "primary") {
		t.Errorf("remove primary: exit %d %q", r.code, r.err)
	}
	if kr, _, err := secret.Load(path); err != nil || !kr.Has("k2") {
		t.Errorf("the primary is gone after a refused remove: %v", err)
	}
	rep = decodeReport(t, mustRun(t, env, "", "keys", "remove", "--kid", "k1", "-o", "json"))
	if rep.Action != "removed" || rep.Kid != "k1" || len(rep.Keys) != 1 || rep.Keys[0].Kid != "k2" || !rep.Keys[0].Primary {
		t.Errorf("remove: %+v", rep)
	}
	r = run(t, env, "", "keys", "remove", "--kid", "k1")
	if r.code != exitcode.Failure || !strings.Contains(r.err, "unknown_kid") {
		t.Errorf("remove twice: exit %d %q", r.code, r.err)
	}
	// The retired key's tokens no longer open, and say why.
	r = run(t, env, "", "secrets", "decrypt", "--scope", "api_key", old)
	if r.code != exitcode.Findings || !strings.Contains(r.err, `unknown_kid: token kid "k1"`) {
		t.Errorf("token of a removed key: exit %d %q", r.code, r.err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode after rotation %v", fi.Mode())
	}
}

func TestKeysListShapes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keyring.json")
	env := keysEnv(path)
	mustRun(t, env, "", "keys", "init", "--kid", "a")
	mustRun(t, env, "", "keys", "add", "--kid", "b")

	r := mustRun(t, env, "", "keys", "list", "-o", "json")
	var generic map[string]any
	if err := json.Unmarshal([]byte(r.out), &generic); err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(generic)
	want := fmt.Sprintf(`{"keyring":%q,"keys":[`+
		`{"kid":"a","mismatch":false,"primary":true,"primary_for":[],"private":true,"roles":["primary"],"scopes":[],"signing_for":[],"type":"oct"},`+
		`{"kid":"b","mismatch":false,"primary":false,"primary_for":[],"private":true,"roles":[],"scopes":[],"signing_for":[],"type":"oct"}],`+
		`"primary":"a","primary_for":{},"protected":false,"signing_for":{}}`, path)
	if string(got) != want {
		t.Errorf("list -o json\n got %s\nwant %s", got, want)
	}
	r = mustRun(t, env, "", "keys", "list")
	if !strings.Contains(r.out, "KID") || !strings.Contains(r.out, "a    oct   private  -       primary") ||
		!strings.Contains(r.out, "b    oct   private  -       -") || !strings.Contains(r.out, "(plain JWK Set)") {
		t.Errorf("list table:\n%s", r.out)
	}
	r = mustRun(t, env, "", "keys", "list", "-o", "yaml")
	if !strings.Contains(r.out, "primary: a") || !strings.Contains(r.out, "- kid: b") {
		t.Errorf("list yaml:\n%s", r.out)
	}
}

// No keys command, in any format, shows a key's bytes; nor do the secrets
// commands, whether they succeed or fail.
func TestKeysNeverPrintKeyBytes(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "keyring.json")
	env := keysEnv(path)
	var outputs []result
	keep := func(r result) result { outputs = append(outputs, r); return r }
	keep(mustRun(t, env, "", "keys", "init", "--kid", "a"))
	keep(mustRun(t, env, "", "keys", "add", "--kid", "b", "-o", "yaml"))
	keep(mustRun(t, env, "", "keys", "add", "--kid", "c", "-o", "json"))
	keep(mustRun(t, env, "", "keys", "promote", "--kid", "b"))
	keep(run(t, env, "", "keys", "add", "--kid", "a"))
	keep(run(t, env, "", "keys", "remove", "--kid", "b"))
	for _, format := range []string{"table", "json", "yaml"} {
		keep(mustRun(t, env, "", "keys", "list", "-o", format))
	}
	tok := strings.TrimSpace(keep(mustRun(t, env, "", "secrets", "encrypt", `"x"`)).out)
	keep(mustRun(t, env, "", "secrets", "decrypt", "-o", "json", tok))
	keep(run(t, env, "", "secrets", "decrypt", "--scope", "s", tok[:len(tok)-3]+"AAA"))
	// Every key is in the file while the outputs were made; c is still there.
	material := keyMaterial(t, path)
	keep(mustRun(t, env, "", "keys", "remove", "--kid", "c"))
	for _, r := range outputs {
		for _, m := range material {
			if strings.Contains(r.out, m) || strings.Contains(r.err, m) {
				t.Fatalf("key material in output:\nstdout: %s\nstderr: %s", r.out, r.err)
			}
		}
	}
}

func TestKeysKeyringFromFlagOrEnv(t *testing.T) {
	dir := t.TempDir()
	fromEnv, fromFlag := filepath.Join(dir, "env.json"), filepath.Join(dir, "flag.json")
	mustRun(t, keysEnv(fromEnv), "", "keys", "init", "--kid", "e")
	mustRun(t, nil, "", "keys", "init", "--keyring", fromFlag, "--kid", "f")
	rep := decodeReport(t, mustRun(t, keysEnv(fromEnv), "", "keys", "list", "-o", "json"))
	if rep.Keyring != fromEnv || rep.Primary != "e" {
		t.Errorf("FLECHT_KEYRING ignored: %+v", rep)
	}
	rep = decodeReport(t, mustRun(t, keysEnv(fromEnv), "", "keys", "list", "--keyring", fromFlag, "-o", "json"))
	if rep.Keyring != fromFlag || rep.Primary != "f" {
		t.Errorf("--keyring does not beat the environment: %+v", rep)
	}
}

func TestKeysUsageErrors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keyring.json")
	for _, args := range [][]string{
		{"keys", "init", "--kid", "k1"},                        // no keyring
		{"keys", "list"},                                       // no keyring
		{"keys", "init", "--keyring", path},                    // no kid
		{"keys", "init", "--keyring", path, "--kid", ""},       // empty kid
		{"keys", "add", "--keyring", path},                     // no kid
		{"keys", "promote", "--keyring", path},                 // no kid
		{"keys", "remove", "--keyring", path},                  // no kid
		{"keys", "list", "--keyring", path, "extra"},           // positional
		{"keys", "init", "--keyring", path, "--kid", "a", "b"}, // positional
		{"keys", "rotate"},                                     // no such command
	} {
		r := run(t, nil, "", args...)
		if r.code != exitcode.Usage {
			t.Errorf("%v: exit %d, want 2 (stderr %q)", args, r.code, r.err)
		}
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Error("a usage error created the keyring")
	}
	r := run(t, nil, "", "keys", "list")
	if !strings.Contains(r.err, "--keyring FILE or set FLECHT_KEYRING") {
		t.Errorf("missing keyring message: %q", r.err)
	}
	// A kid the keyring cannot hold (not UTF-8) is a usage error too.
	mustRun(t, keysEnv(path), "", "keys", "init", "--kid", "k1")
	if r := run(t, keysEnv(path), "", "keys", "add", "--kid", "\xff"); r.code != exitcode.Usage {
		t.Errorf("non-UTF-8 kid: exit %d %q", r.code, r.err)
	}
	// So is one that would not show in one piece, or is far too long.
	for _, kid := range []string{"a\nb", " ", " k2", "k2\t", "a\x1b[2Jb", strings.Repeat("k", 129)} {
		if r := run(t, keysEnv(path), "", "keys", "add", "--kid", kid); r.code != exitcode.Usage || strings.Count(r.err, "\n") != 2 {
			t.Errorf("kid %q: exit %d %q", kid, r.code, r.err)
		}
		other := filepath.Join(t.TempDir(), "k.json")
		if r := run(t, keysEnv(other), "", "keys", "init", "--kid", kid); r.code != exitcode.Usage {
			t.Errorf("init kid %q: exit %d %q", kid, r.code, r.err)
		}
	}
}

// A keyring written elsewhere may hold any kid; listing it keeps one row per
// key, with the odd kid escaped.
func TestKeysListEscapesOddKids(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keyring.json")
	k := base64.RawURLEncoding.EncodeToString(make([]byte, 32))
	doc := `{"keys":[{"kty":"oct","kid":"a\nb\u001b[2J","k":"` + k + `"},{"kty":"oct","kid":"plain","k":"` + k + `"}],"primary":"plain"}`
	os.WriteFile(path, []byte(doc), 0o600)
	r := mustRun(t, keysEnv(path), "", "keys", "list")
	if lines := strings.Split(strings.TrimRight(r.out, "\n"), "\n"); len(lines) != 4 || strings.Contains(r.out, "\x1b") ||
		!strings.Contains(r.out, `"a\nb\x1b[2J"`) {
		t.Errorf("list:\n%s", r.out)
	}
}

func TestKeysMissingOrInvalidFile(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.json")
	for _, cmd := range [][]string{{"list"}, {"add", "--kid", "k"}, {"promote", "--kid", "k"}, {"remove", "--kid", "k"}} {
		r := run(t, keysEnv(missing), "", append([]string{"keys"}, cmd...)...)
		if r.code != exitcode.Usage || !strings.Contains(r.err, "does not exist") || !strings.Contains(r.err, "keys init") {
			t.Errorf("%v on a missing file: exit %d %q (a missing file is a usage error, as a missing stage file)", cmd, r.code, r.err)
		}
	}
	if _, err := os.Stat(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Error("a command created the missing keyring")
	}
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"keys":[{"kty":"oct","kid":"a","k":"c2hvcnQ"}],"primary":"a"}`), 0o600)
	r := run(t, keysEnv(bad), "", "keys", "list")
	if r.code != exitcode.Failure || !strings.HasPrefix(r.err, "error: keyring_invalid: ") || !strings.Contains(r.err, bad) {
		t.Errorf("invalid file: exit %d %q", r.code, r.err)
	}
}

func TestKeysWarnOnLooseMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keyring.json")
	env := keysEnv(path)
	mustRun(t, env, "", "keys", "init", "--kid", "k1")
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"keys", "list"}, {"secrets", "encrypt", "1"}} {
		r := mustRun(t, env, "", args...)
		if !strings.Contains(r.err, "warning: ") || !strings.Contains(r.err, "0644") || !strings.Contains(r.err, "chmod 600") {
			t.Errorf("%v: no warning on stderr: %q", args, r.err)
		}
	}
	// A command that rewrites the keyring leaves it private again.
	mustRun(t, env, "", "keys", "add", "--kid", "k2")
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode after add %v", fi.Mode())
	}
	if r := mustRun(t, env, "", "keys", "list"); r.err != "" {
		t.Errorf("warning on a private file: %q", r.err)
	}
}

// The proof that keys never leaves a half-written keyring: a child process
// rotates keys through the CLI in a loop and is killed with SIGKILL at a
// random moment, again and again. After every kill the file must load and
// validate. (internal/secret's TestSaveNeverLeavesAHalfWrittenFile injects
// the crash at the exact point between write and rename.)
func TestKeysSurviveKillMidWrite(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "keyring.json")
	home := t.TempDir()
	mustRun(t, keysEnv(path), "", "keys", "init", "--kid", "seed")
	// Kill until enough kills have landed inside a write (each leaves its
	// temporary file orphaned), so the proof is not one of luck.
	const wantMidWrite, maxRounds = 5, 200
	rounds, strays := 0, 0
	for round := 0; strays < wantMidWrite && round < maxRounds; round++ {
		rounds++
		cmd := exec.Command(os.Args[0], "-test.run=^TestKeysKillChild$", "-test.count=1")
		// The child's home is the parent's: a killed child never removes
		// a temporary directory of its own.
		cmd.Env = append(os.Environ(), "FLECHT_TEST_KILL_KEYRING="+path, "FLECHT_TEST_KILL_HOME="+home, fmt.Sprintf("FLECHT_TEST_KILL_ROUND=%d", round))
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Wait until the child has completed a rotation, then let it run
		// a random while into the next ones.
		ready := make(chan bool, 1)
		go func() {
			sc := bufio.NewScanner(stdout)
			ok := false
			for sc.Scan() {
				if sc.Text() == "rotating" && !ok {
					ok = true
					ready <- true
				}
			}
			if !ok {
				ready <- false
			}
		}()
		select {
		case ok := <-ready:
			if !ok {
				cmd.Wait()
				t.Fatal("the child ended before it rotated")
			}
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			t.Fatal("the child never started rotating")
		}
		time.Sleep(time.Duration(rand.IntN(20_000)) * time.Microsecond)
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		cmd.Wait()

		kr, _, err := secret.Load(path)
		if err != nil {
			b, _ := os.ReadFile(path)
			t.Fatalf("round %d: the keyring does not load after a kill: %v\n%d bytes", round, err, len(b))
		}
		if !kr.Has(kr.Primary()) || len(kr.List()) == 0 {
			t.Fatalf("round %d: keyring without its primary", round)
		}
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if e.Name() == "keyring.json" {
				continue
			}
			if strings.Contains(e.Name(), ".tmp-") {
				strays++ // a temporary the kill orphaned: it landed inside a write
			}
			os.Remove(filepath.Join(dir, e.Name())) // that, or the lock it held
		}
	}
	if strays == 0 {
		t.Fatalf("none of %d kills landed during a write; the test proved nothing", rounds)
	}
	t.Logf("%d kills, %d of them during a write (an orphaned temporary file); the keyring loaded after every one", rounds, strays)
}

// TestKeysKillChild is the child of TestKeysSurviveKillMidWrite: it runs
// only with FLECHT_TEST_KILL_KEYRING set, and rotates until it is killed.
func TestKeysKillChild(t *testing.T) {
	path := os.Getenv("FLECHT_TEST_KILL_KEYRING")
	if path == "" {
		t.Skip("the child process of TestKeysSurviveKillMidWrite")
	}
	env := map[string]string{EnvKeyring: path, "HOME": os.Getenv("FLECHT_TEST_KILL_HOME")}
	round := os.Getenv("FLECHT_TEST_KILL_ROUND")
	for i := 0; ; i++ {
		kid := fmt.Sprintf("r%s-%d", round, i)
		for _, args := range [][]string{{"add", "--kid", kid}, {"promote", "--kid", kid}} {
			if r := run(t, env, "", append([]string{"keys"}, args...)...); r.code != 0 {
				fmt.Println("failed:", r.err)
				os.Exit(1)
			}
		}
		// Retire every older key, so the file stays small.
		kr, _, err := secret.Load(path)
		if err != nil {
			fmt.Println("failed:", err)
			os.Exit(1)
		}
		for _, k := range kr.List() {
			if !k.Primary {
				run(t, env, "", "keys", "remove", "--kid", k.Kid)
			}
		}
		fmt.Println("rotating")
	}
}

// A keyring command removes what a killed write left beside the keyring
// (a whole keyring, key bytes included) and says so with -v.
func TestKeysRemoveStaleTemporaries(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "keyring.json")
	mustRun(t, keysEnv(path), "", "keys", "init", "--kid", "k1")
	stale := filepath.Join(dir, ".keyring.json.tmp-42")
	b, _ := os.ReadFile(path)
	os.WriteFile(stale, b, 0o600)
	old := time.Now().Add(-time.Hour)
	os.Chtimes(stale, old, old)
	r := mustRun(t, keysEnv(path), "", "keys", "list", "-v")
	if _, err := os.Stat(stale); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(r.err, "stale temporary keyring file") {
		t.Errorf("stale temporary: %v, stderr %q", err, r.err)
	}
}

// Two keys commands on one keyring at once: each loads, changes and saves,
// and without a lock the second save drops the first one's key. Every add
// must survive.
func TestKeysConcurrentAddsLoseNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keyring.json")
	mustRun(t, keysEnv(path), "", "keys", "init", "--kid", "k0")
	const writers, adds = 3, 15
	errs := make(chan string, writers*adds)
	var wg sync.WaitGroup
	for w := range writers {
		env := map[string]string{EnvKeyring: path, "HOME": t.TempDir()}
		wg.Go(func() {
			for i := range adds {
				if r := run(t, env, "", "keys", "add", "--kid", fmt.Sprintf("w%d-%d", w, i)); r.code != 0 {
					errs <- r.err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Errorf("add failed: %s", e)
	}
	kr, _, err := secret.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(kr.List()); got != 1+writers*adds {
		t.Errorf("%d keys, want %d: lost updates", got, 1+writers*adds)
	}
}
