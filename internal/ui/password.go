package ui

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/term"

	"github.com/flecht-dev/flecht/internal/exitcode"
)

// PromptFunc reads one password from the terminal after showing label.
type PromptFunc func(label string) ([]byte, error)

// PasswordPrompt reads passwords from standard input without echo, or is
// nil when standard input is not a terminal: commands never block on a
// pipe waiting for a password.
func PasswordPrompt(streams *IOStreams) PromptFunc {
	in, ok := streams.In.(*os.File)
	if !streams.IsStdinTTY() || !ok {
		return nil
	}
	return func(label string) ([]byte, error) {
		fmt.Fprint(streams.ErrOut, label)
		pw, err := readPassword(int(in.Fd()), streams.ErrOut)
		fmt.Fprintln(streams.ErrOut)
		if err != nil {
			return nil, fmt.Errorf("reading the keyring password: %w", err)
		}
		return pw, nil
	}
}

// exitProcess ends the process after a signal at the prompt.
var exitProcess = os.Exit

// readPassword reads a line from the terminal fd without echo. SIGINT or
// SIGTERM while it waits restores the terminal and ends the process at
// once, exit 128+signal (130, 143), as gpg does: the process's own handler
// only cancels a context that a terminal read does not see, and the
// second signal would kill it with echo still off.
func readPassword(fd int, errOut io.Writer) ([]byte, error) {
	state, err := term.GetState(fd)
	if err != nil {
		return nil, err
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	type read struct {
		pw  []byte
		err error
	}
	done := make(chan read, 1)
	go func() {
		pw, err := term.ReadPassword(fd)
		done <- read{pw, err}
	}()
	select {
	case r := <-done:
		return r.pw, r.err
	case s := <-sigs:
		_ = term.Restore(fd, state)
		fmt.Fprintf(errOut, "\nstopped by a signal (%v)\n", s)
		code := exitcode.Failure
		if n, ok := s.(syscall.Signal); ok {
			code = 128 + int(n)
		}
		exitProcess(code)
		return nil, fmt.Errorf("stopped by a signal (%v)", s) // exitProcess returned: a test
	}
}
