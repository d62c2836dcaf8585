// Package exitcode maps the kinds of failure a command can end in to the
// process exit codes that scripts and CI rely on. It is the one place that
// mapping lives: packages wrap their errors with a kind, and the command
// layer's Main (internal/cli) turns the error a command returns into the
// process's code.
package exitcode

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
)

// Exit codes, stable across releases.
const (
	OK       = 0 // the command did what was asked
	Failure  = 1 // something went wrong (broker unreachable, I/O, bug)
	Usage    = 2 // the command line is wrong: unknown flag, bad value, missing argument
	Refused  = 3 // refused for safety: a live consumer, the primary key, a concurrent writer
	Findings = 4 // a check ran and found problems (lint, scan, decrypt failure)
)

// Kind classifies an error by the exit code it should produce.
type Kind int

const (
	KindFailure Kind = iota
	KindUsage
	KindRefused
	KindFindings
)

// Code is the exit code of the kind.
func (k Kind) Code() int {
	switch k {
	case KindUsage:
		return Usage
	case KindRefused:
		return Refused
	case KindFindings:
		return Findings
	default:
		return Failure
	}
}

type kindError struct {
	kind Kind
	err  error
}

func (e *kindError) Error() string { return e.err.Error() }
func (e *kindError) Unwrap() error { return e.err }

// Wrap marks err with a kind; a nil err stays nil.
func Wrap(kind Kind, err error) error {
	if err == nil {
		return nil
	}
	return &kindError{kind: kind, err: err}
}

// UsageError marks err as a usage error (exit 2).
func UsageError(err error) error { return Wrap(KindUsage, err) }

// Usagef is a usage error with a formatted message, as fmt.Errorf makes it.
func Usagef(format string, args ...any) error { return UsageError(fmt.Errorf(format, args...)) }

// RefusedError marks err as refused for safety (exit 3).
func RefusedError(err error) error { return Wrap(KindRefused, err) }

// FindingsError marks err as a check that found problems (exit 4).
func FindingsError(err error) error { return Wrap(KindFindings, err) }

type signalError struct {
	code int
	err  error
}

func (e *signalError) Error() string { return e.err.Error() }
func (e *signalError) Unwrap() error { return e.err }

// SignalError marks err as a command stopped by sig while it waited (at a
// prompt, on a pipe, for a lock): exit 128+n, what a shell reports for a
// process the signal ended (130 for Ctrl-C, 143 for SIGTERM).
func SignalError(sig os.Signal, err error) error {
	if err == nil {
		return nil
	}
	code := Failure
	if n, ok := sig.(syscall.Signal); ok {
		code = 128 + int(n)
	}
	return &signalError{code: code, err: err}
}

// Silent is an error whose message was already shown to the user (for
// example a report rendered as JSON); main exits with its code and prints
// nothing more.
type Silent struct{ Code int }

func (s *Silent) Error() string { return "exit status " + strconv.Itoa(s.Code) }

// Code returns the exit code for err: 0 for nil, the marked kind when there
// is one (the outermost mark wins), 1 otherwise.
func Code(err error) int {
	if err == nil {
		return OK
	}
	var s *Silent
	if errors.As(err, &s) {
		return s.Code
	}
	var sig *signalError
	if errors.As(err, &sig) {
		return sig.code
	}
	var k *kindError
	if errors.As(err, &k) {
		return k.kind.Code()
	}
	return Failure
}

// IsSilent reports whether err asks main to print nothing.
func IsSilent(err error) bool {
	var s *Silent
	return errors.As(err, &s)
}
