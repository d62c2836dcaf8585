// Package ui renders command output: human tables (lipgloss), stable JSON and
// YAML for scripts, and progress on a terminal. Every command prints through
// one Printer so that -o and --no-color behave the same everywhere.
package ui

import (
	"bytes"
	"io"
	"os"
	"sync"

	"golang.org/x/term"
)

// IOStreams are the process's standard streams plus what is known about
// them (terminal or not, colour allowed or not).
type IOStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer

	inTTY, outTTY, errTTY bool
	colorEnabled          bool
}

// System returns the real standard streams. Colour is on only for a
// terminal and when NO_COLOR is unset.
func System() *IOStreams {
	var out io.Writer = os.Stdout
	if stdoutClosed() {
		out = closedFile{}
	}
	s := &IOStreams{
		In:     os.Stdin,
		Out:    &CheckedWriter{w: out},
		ErrOut: os.Stderr,
		inTTY:  isTerminal(os.Stdin),
		outTTY: isTerminal(os.Stdout),
		errTTY: isTerminal(os.Stderr),
	}
	_, noColor := os.LookupEnv("NO_COLOR")
	s.colorEnabled = s.outTTY && !noColor && os.Getenv("TERM") != "dumb"
	return s
}

// Test returns streams backed by buffers: no terminal, no colour.
func Test() (s *IOStreams, in, out, errOut *bytes.Buffer) {
	in, out, errOut = &bytes.Buffer{}, &bytes.Buffer{}, &bytes.Buffer{}
	return &IOStreams{In: in, Out: out, ErrOut: errOut}, in, out, errOut
}

func isTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }

// IsStdinTTY reports whether standard input is a terminal.
func (s *IOStreams) IsStdinTTY() bool { return s.inTTY }

// IsStdoutTTY reports whether standard output is a terminal.
func (s *IOStreams) IsStdoutTTY() bool { return s.outTTY }

// IsStderrTTY reports whether standard error is a terminal (progress goes there).
func (s *IOStreams) IsStderrTTY() bool { return s.errTTY }

// SetTTY overrides terminal detection (tests).
func (s *IOStreams) SetTTY(in, out, errOut bool) { s.inTTY, s.outTTY, s.errTTY = in, out, errOut }

// ColorEnabled reports whether styled output may use colour.
func (s *IOStreams) ColorEnabled() bool { return s.colorEnabled }

// SetColorEnabled turns colour on or off (--no-color).
func (s *IOStreams) SetColorEnabled(on bool) { s.colorEnabled = on }

// CheckedWriter passes writes on and remembers the first one that failed
// or was short: a full disk, a closed standard output. A command that
// ignores an error of its own output is still caught, once, where the exit
// code is decided (cli.Main): a result that did not arrive is never exit 0.
// After a failure every write fails with the same error, so nothing after a
// gap is printed as if whole.
type CheckedWriter struct {
	mu  sync.Mutex
	w   io.Writer
	err error
}

// NewCheckedWriter wraps w.
func NewCheckedWriter(w io.Writer) *CheckedWriter { return &CheckedWriter{w: w} }

func (c *CheckedWriter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.w.Write(p)
	if err == nil && n < len(p) {
		err = io.ErrShortWrite
	}
	if err != nil {
		c.err = err
	}
	return n, err
}

// Err is the first write error, or nil.
func (c *CheckedWriter) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// CheckOut makes Out a CheckedWriter (once) and returns it.
func (s *IOStreams) CheckOut() *CheckedWriter {
	if c, ok := s.Out.(*CheckedWriter); ok {
		return c
	}
	c := NewCheckedWriter(s.Out)
	s.Out = c
	return c
}

// closedFile stands for a standard output that was closed when the process
// started: every write fails with EBADF, as it would without the runtime's
// stand-in (see stdoutClosed).
type closedFile struct{}

func (closedFile) Write([]byte) (int, error) {
	return 0, &os.PathError{Op: "write", Path: "/dev/stdout", Err: errBadFD}
}
