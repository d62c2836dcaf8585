package cli

import (
	"bytes"
	"strings"
	"syscall"
	"testing"

	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/ui"
)

type panicReader struct{}

func (panicReader) Read([]byte) (int, error) { panic("reader exploded") }

type fullWriter struct{}

func (fullWriter) Write([]byte) (int, error) { return 0, syscall.ENOSPC }

// A panic inside a command exits 1 with "internal error" and its stack on
// standard error, never 2 (the usage code, which a Go panic exits with).
func TestPanicExits1(t *testing.T) {
	io, _, out, errOut := ui.Test()
	io.In = panicReader{}
	path := newKeyring(t, "a")
	f := &Factory{IO: io, Getenv: func(k string) string { return keysEnv(path)[k] }}
	code := Main(t.Context(), f, []string{"secrets", "encrypt", "-"})
	if code != exitcode.Failure || out.Len() != 0 || !strings.HasPrefix(errOut.String(), "error: internal error: reader exploded\n") ||
		!strings.Contains(errOut.String(), "goroutine ") {
		t.Errorf("exit %d %q %q", code, out.String(), errOut.String())
	}
}

// Item 2: a result that cannot be written exits 1 with the write error on
// standard error, whether or not the command checked its own write.
func TestFailedResultWriteExits1(t *testing.T) {
	path := newKeyring(t, "a")
	tok := encryptWith(t, path, "", "1")
	for _, args := range [][]string{
		{"version"}, {"version", "-o", "json"}, {"keys", "list"}, {"secrets", "encrypt", "1"},
		{"secrets", "decrypt", tok}, {"secrets", "inspect", tok}, {"partition", "-N", "3", "k"}, {"help"},
	} {
		io, _, _, errOut := ui.Test()
		io.Out = fullWriter{}
		f := &Factory{IO: io, Getenv: func(k string) string { return keysEnv(path)[k] }}
		code := Main(t.Context(), f, args)
		if code != exitcode.Failure || strings.Count(errOut.String(), "no space left on device") != 1 {
			t.Errorf("%v: exit %d %q", args, code, errOut.String())
		}
	}
	// A finding whose error object cannot be written is a failure too.
	io, _, _, errOut := ui.Test()
	io.Out = fullWriter{}
	f := &Factory{IO: io, Getenv: func(k string) string { return keysEnv(path)[k] }}
	if code := Main(t.Context(), f, []string{"secrets", "decrypt", "-o", "json", "x"}); code != exitcode.Failure ||
		!strings.Contains(errOut.String(), "no space left on device") {
		t.Errorf("a finding: exit %d %q", code, errOut.String())
	}
}

// Error lines quote names from outside the process: shown escaped.
func TestErrorLineEscapesControls(t *testing.T) {
	r := run(t, nil, "", "secrets", "decrypt", "--keyring", "/nonexistent/\x1b]0;x\a\x9b2J", "x")
	if r.code != exitcode.Findings || strings.ContainsAny(r.err, "\x1b\a") || bytes.ContainsRune([]byte(r.err), 0x9b) ||
		!strings.Contains(r.err, `\x1b]0;x\a\x9b2J`) {
		t.Errorf("exit %d %q", r.code, r.err)
	}
}
