package cli

import (
	"strings"
	"testing"
	"time"

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
