package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/transformer/builtin"
	"github.com/flecht-dev/flecht/internal/ui"
)

// The hidden --session-timeout reaches the runner's options, and stays out
// of --help.
func TestRunSessionTimeoutFlag(t *testing.T) {
	io, _, out, _ := ui.Test()
	f := &Factory{IO: io, Getenv: func(string) string { return "" }}
	var got *RunOptions
	cmd := NewCmdRun(f, func(o *RunOptions) error { got = o; return nil })
	cmd.SetArgs([]string{"-f", "stage.yaml", "--client-id", "c", "--session-timeout", "6s"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if got == nil || got.SessionTimeout != 6*time.Second || got.ClientID != "c" {
		t.Fatalf("options %+v", got)
	}
	cmd.SetOut(out)
	cmd.SetArgs([]string{"--help"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "session-timeout") {
		t.Error("--session-timeout shows in --help; it is a hidden test knob")
	}
}

// A running stage logs its lifecycle at info level without -v.
func TestRunLoggerLogsLifecycleAtInfo(t *testing.T) {
	io, _, _, errOut := ui.Test()
	f := &Factory{IO: io, Getenv: func(string) string { return "" }}
	log := runLogger(f)
	log.Info("task started", "partition", 3)
	log.Debug("noise")
	if s := errOut.String(); !strings.Contains(s, "task started") || strings.Contains(s, "noise") {
		t.Fatalf("stderr %q: want the info line and not the debug one", s)
	}
}

// A stage file that is wrong fails with exit 2 before any connection: the
// broker here does not exist, and a good file fails with exit 1 on it.
func TestRunBadStageFileExits2WithoutABroker(t *testing.T) {
	const head = "application_id: a\nkind: transformer\ninput_topics: [t]\n"
	cases := map[string]string{
		head + "transform: {builtin: count, output_topic: o}\ntypo: 1\n":                          "typo",
		head + "transform: {builtin: sum, output_topic: o}\n":                                     `unknown builtin transformer "sum"`,
		head + "transform: {builtin: count, output_topic: o, outptu: x}\n":                        "outptu",
		head + "state_key: \"{value.d}\"\ntransform: {builtin: count, output_topic: o}\n":         "coarsens",
		head + "state_key: \"{value.d}-x\"\ntransform: {builtin: passthrough, output_topic: o}\n": "silent split",
	}
	for yaml, want := range cases {
		r := runStageFile(t, yaml)
		if r.code != exitcode.Usage || !strings.Contains(r.err, want) {
			t.Errorf("%q: exit %d, stderr %q; want exit 2 naming %q", yaml, r.code, r.err, want)
		}
	}
	r := runStageFile(t, head+"transform: {builtin: count, output_topic: o}\n")
	if r.code != exitcode.Failure || !strings.Contains(r.err, "127.0.0.1:1") {
		t.Errorf("a good stage file on a missing broker: exit %d, stderr %q; want exit 1 naming the broker", r.code, r.err)
	}
}

// A state_key the static check cannot prove refining starts with a warning
// that says what holds at run time and how to prove the rest.
func TestRunWarnsOnUnprovenStateKey(t *testing.T) {
	const head = "application_id: a\nkind: transformer\ninput_topics: [t]\ntransform: {builtin: count, output_topic: o}\n"
	for tmpl, want := range map[string]string{
		"{key}{value.d}":  "nothing at run time can detect",
		"{key}/{value.d}": `is an invalid message (invalid_messages: crash)`,
	} {
		r := runStageFile(t, head+"state_key: \""+tmpl+"\"\n")
		if r.code != exitcode.Failure {
			t.Errorf("%s: exit %d (stderr %q), want 1 from the missing broker", tmpl, r.code, r.err)
		}
		for _, w := range []string{want, "flecht lint state-key", "--key-pattern"} {
			if !strings.Contains(r.err, w) {
				t.Errorf("%s: stderr %q does not say %q", tmpl, r.err, w)
			}
		}
	}
	if r := runStageFile(t, head); strings.Contains(r.err, "state_key") {
		t.Errorf("the default state key warns: %q", r.err)
	}
}

func runStageFile(t *testing.T, yaml string) result {
	t.Helper()
	path := filepath.Join(t.TempDir(), "stage.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return run(t, nil, "", "-b", "127.0.0.1:1", "run", "-f", path, "--client-id", "c", "--state-dir", t.TempDir())
}

// --help states the refinement rule and the separator caveat.
func TestRunHelpStatesTheStateKeyRule(t *testing.T) {
	r := run(t, nil, "", "run", "--help")
	for _, want := range []string{
		"state_key(a) == state_key(b)  ⇒  partition(a) == partition(b)",
		`key "a/b" + d "c" and key "a" + d "b/c" both give "a/b/c"`,
		"is an invalid message",
		"flecht lint state-key --key-pattern",
	} {
		if !strings.Contains(r.out, want) {
			t.Errorf("run --help does not say %q", want)
		}
	}
}

// --help lists every builtin's options and the exit codes as they are.
func TestRunHelpListsBuiltinOptionsAndExitCodes(t *testing.T) {
	r := run(t, nil, "", "run", "--help")
	for _, want := range []string{builtin.Usage(), "exits 2", "any error retrying cannot fix exit 1"} {
		if !strings.Contains(r.out, want) {
			t.Errorf("run --help does not say %q", want)
		}
	}
	if strings.Contains(r.out, "; any error exits 1") {
		t.Error("run --help still says any error exits 1")
	}
}
