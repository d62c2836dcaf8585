package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/flecht-dev/flecht/internal/cli"
	"github.com/flecht-dev/flecht/internal/module/moduletest"
	"github.com/flecht-dev/flecht/internal/secret"
)

// The test binary is flecht itself when asked: the subprocess tests run it
// with real descriptors (/dev/full, a closed standard output).
func TestMain(m *testing.M) {
	if os.Getenv("FLECHT_TEST_AS_MAIN") == "1" {
		main()
	}
	moduletest.Main(m)
}

// offline lists every command that prints a result without a cluster,
// with arguments that make it succeed; the fixture's files are named by
// the placeholders KEYRING, TOKEN, SIGNED, MODULE, STAGE and DIR.
var offline = map[string][][]string{
	"flecht":                   {{}, {"--help"}},
	"flecht help":              {{"help"}, {"help", "keys"}},
	"flecht version":           {{"version"}, {"version", "-o", "json"}},
	"flecht partition":         {{"partition", "-N", "3", "a", "b"}, {"partition", "-N", "3", "-o", "yaml", "a"}},
	"flecht completion":        {{"completion", "bash"}, {"completion", "zsh"}},
	"flecht profile":           {{"profile"}},
	"flecht profile list":      {{"profile", "list"}, {"profile", "list", "-o", "json"}},
	"flecht profile show":      {{"profile", "show", "prod"}},
	"flecht keys":              {{"keys"}},
	"flecht keys list":         {{"keys", "list"}, {"keys", "list", "-o", "json"}},
	"flecht keys export":       {{"keys", "export", "sig"}},
	"flecht keys init":         {{"keys", "init", "--keyring", "DIR/new.json", "--kid", "n"}},
	"flecht keys add":          {{"keys", "add", "--kid", "DIRKID"}},
	"flecht secrets":           {{"secrets"}},
	"flecht secrets encrypt":   {{"secrets", "encrypt", "1"}, {"secrets", "encrypt", "-o", "json", "1"}},
	"flecht secrets decrypt":   {{"secrets", "decrypt", "TOKEN"}, {"secrets", "decrypt", "-o", "yaml", "TOKEN"}},
	"flecht secrets sign":      {{"secrets", "sign", "--scope", "s", "1"}},
	"flecht secrets verify":    {{"secrets", "verify", "--scope", "s", "SIGNED"}},
	"flecht secrets inspect":   {{"secrets", "inspect", "TOKEN"}, {"secrets", "inspect", "-o", "json", "SIGNED"}},
	"flecht secrets reseal":    {{"secrets", "reseal", "TOKEN"}},
	"flecht transform":         {{"transform"}},
	"flecht transform inspect": {{"transform", "inspect", "MODULE"}},
	"flecht budget":            {{"budget", "--session-expiry", "24h", "--queue-limit", "10000", "--rate", "10/s"}},
	"flecht lint state-key":    {{"lint", "state-key", "--state-key", "{key}"}},
	"flecht group":             {{"group"}},
	"flecht topic":             {{"topic"}},
	"flecht acl":               {{"acl"}},
	"flecht acl plan":          {{"acl", "plan", "-f", "STAGE", "--principal", "User:count", "--role", "run"}, {"acl", "plan", "-f", "STAGE", "--principal", "User:count", "--role", "feed", "-o", "json"}},
}

// elsewhere are the commands the table leaves out, and why: each needs a
// cluster, a metrics endpoint, a terminal, or runs until stopped; their
// output goes through the same checked writer.
var elsewhere = map[string]string{
	"flecht run": "runs until stopped", "flecht dev": "runs until stopped",
	"flecht cluster": "a cluster", "flecht status": "a cluster", "flecht doctor": "a cluster",
	"flecht replay": "a cluster", "flecht lint": "a group", "flecht lint topics": "a cluster",
	"flecht budget probe": "an MQTT broker", "flecht secrets scan": "a cluster",
	"flecht secrets reencrypt": "a cluster", "flecht keys check": "metrics endpoints",
	"flecht keys rotate-plan": "metrics endpoints and a cluster",
	"flecht keys import":      "a JWK on standard input; covered in internal/cli",
	"flecht keys promote":     "changes roles; covered in internal/cli", "flecht keys signing": "changes roles; covered in internal/cli",
	"flecht keys remove": "changes the file; covered in internal/cli", "flecht keys protect": "a password",
	"flecht keys unprotect": "a password", "flecht transform new": "builds a project",
	"flecht transform test": "a module and its samples",
	"flecht group leave":    "a cluster", "flecht topic create": "a cluster",
	"flecht topic produce": "a cluster", "flecht topic consume": "a cluster",
	"flecht topic config": "a cluster", "flecht acl check": "a cluster",
	"flecht preview": "a cluster", "flecht verify": "a cluster", "flecht trace": "a cluster",
}

// Item 2: every command that prints a result, run as a process with its
// standard output on /dev/full or closed, exits 1 and says why on standard
// error: never 0 with the result lost.
func TestResultWriteFailuresExit1(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full")
	}
	fx := newFixture(t)
	// The command tree, read from each command's help as a user sees it
	// (cobra stays inside internal/cli).
	seen := map[string]bool{}
	var walk func(path []string)
	walk = func(path []string) {
		name := strings.Join(append([]string{"flecht"}, path...), " ")
		seen[name] = true
		if len(path) > 4 {
			t.Fatalf("%s: the walk does not end", name)
		}
		if _, ok := offline[name]; !ok && elsewhere[name] == "" {
			t.Errorf("%q is in neither table: add it to offline (how it prints without a cluster) or to elsewhere (why not)", name)
		}
		out, _, _ := fx.run(t, append(append([]string{}, path...), "--help"), nil)
		for _, sub := range subcommands(out) {
			if sub == "help" { // help lists the others again
				seen[name+" help"] = true
				continue
			}
			walk(append(append([]string{}, path...), sub))
		}
	}
	walk(nil)
	for name := range offline {
		if !seen[name] {
			t.Errorf("%q is no command", name)
		}
	}
	for name := range elsewhere {
		if !seen[name] {
			t.Errorf("%q is no command", name)
		}
	}
	if t.Failed() {
		return
	}

	paths := make([]string, 0, len(offline))
	for p := range offline {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	n := 0
	for _, p := range paths {
		for _, args := range offline[p] {
			args = fx.expand(args, n)
			n++
			// The arguments must make the command succeed, or the test
			// proves nothing.
			if out, errOut, code := fx.run(t, args, nil); code != 0 || len(out) == 0 {
				t.Errorf("%v: exit %d with a writable output (%d bytes): %s", args, code, len(out), errOut)
				continue
			}
			args = fx.expand(offline[p][0], n) // a fresh name for the verbs that create
			n++
			full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			_, errOut, code := fx.run(t, args, full)
			full.Close()
			if code != 1 || !strings.Contains(errOut, "no space left on device") {
				t.Errorf("%v >/dev/full: exit %d %q", args, code, errOut)
			}
			args = fx.expand(offline[p][0], n)
			n++
			_, errOut, code = fx.run(t, args, closedStdout)
			if code != 1 || !strings.Contains(errOut, "bad file descriptor") {
				t.Errorf("%v >&-: exit %d %q", args, code, errOut)
			}
		}
	}
}

// subcommands are the names a help lists under "Available Commands:" or
// the root's group titles, to a blank line.
func subcommands(help string) []string {
	var out []string
	in := false
	for _, line := range strings.Split(help, "\n") {
		switch {
		case line == "":
			in = false
		case !strings.HasPrefix(line, " ") && strings.HasSuffix(line, ":"):
			in = slices.Contains([]string{"Available Commands:", "Additional Commands:", "Run pipelines:", "Operate pipelines:", "Tools:"}, line)
		case in:
			if f := strings.Fields(line); len(f) > 0 {
				out = append(out, f[0])
			}
		}
	}
	return out
}

// closedStdout asks run to start the process with descriptor 1 closed.
var closedStdout = &os.File{}

type fixture struct {
	dir, keyring, token, signed, module, config, stage string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	dir := t.TempDir()
	kr, err := secret.NewKeyring("a")
	if err == nil {
		kr, err = kr.Generate("sig", secret.TypeEd25519, []string{"s"})
	}
	if err == nil {
		kr, err = kr.SetSigningFor("s", "sig")
	}
	if err != nil {
		t.Fatal(err)
	}
	fx := &fixture{dir: dir, keyring: filepath.Join(dir, "keyring.json"), config: filepath.Join(dir, "config.yaml")}
	doc, _ := kr.JWKS()
	if err := os.WriteFile(fx.keyring, doc, 0o600); err != nil {
		t.Fatal(err)
	}
	if fx.token, err = kr.Encrypt([]byte("1"), ""); err != nil {
		t.Fatal(err)
	}
	if fx.signed, err = kr.Sign([]byte("1"), "s"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(fx.config, []byte("profiles:\n  prod:\n    brokers: [k1:9092]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fx.module = moduletest.Example(t, "count")
	fx.stage = filepath.Join(dir, "count.yaml")
	stage := "application_id: sensors-count\nkind: transformer\ninput_topics: [sensors.raw]\ntransform: {builtin: count, output_topic: sensors.refined}\n"
	if err := os.WriteFile(fx.stage, []byte(stage), 0o600); err != nil {
		t.Fatal(err)
	}
	return fx
}

func (fx *fixture) expand(args []string, n int) []string {
	out := make([]string, len(args))
	for i, a := range args {
		a = strings.NewReplacer("DIRKID", "k"+strings.Repeat("x", n%7)+string(rune('a'+n%26))+string(rune('a'+n/26%26)),
			"DIR", fx.dir, "STAGE", fx.stage, "TOKEN", fx.token, "SIGNED", fx.signed, "MODULE", fx.module).Replace(a)
		if strings.HasSuffix(a, "new.json") {
			a = strings.TrimSuffix(a, "new.json") + "new" + string(rune('a'+n%26)) + string(rune('a'+n/26%26)) + ".json"
		}
		out[i] = a
	}
	return out
}

// run starts the test binary as flecht with args; stdout nil captures
// standard output, closedStdout closes it.
func (fx *fixture) run(t *testing.T, args []string, stdout *os.File) (out, errOut string, code int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	if stdout == closedStdout {
		// Descriptor 1 closed, as a shell's >&- leaves it, so the Go
		// runtime's stand-in is what flecht finds.
		cmd = exec.Command("/bin/sh", append([]string{"-c", `exec "$0" "$@" >&-`, os.Args[0]}, args...)...)
	}
	cmd.Env = append(os.Environ(), "FLECHT_TEST_AS_MAIN=1", cli.EnvKeyring+"="+fx.keyring,
		"FLECHT_CONFIG="+fx.config, "FLECHT_CACHE_DIR="+filepath.Join(fx.dir, "cache"), "HOME="+fx.dir, "NO_COLOR=1")
	var o, e strings.Builder
	cmd.Stderr = &e
	switch stdout {
	case nil:
		cmd.Stdout = &o
	case closedStdout:
	default:
		cmd.Stdout = stdout
	}
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			t.Fatalf("%v: killed by %v", args, ws.Signal())
		}
		return o.String(), e.String(), ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return o.String(), e.String(), 0
}
