// Package ui renders command output: human tables (lipgloss), stable JSON and
// YAML for scripts, and progress on a terminal. Every command prints through
// one Printer so that -o and --no-color behave the same everywhere.
package ui

import (
	"bytes"
	"io"
	"os"

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
	s := &IOStreams{
		In:     os.Stdin,
		Out:    os.Stdout,
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
