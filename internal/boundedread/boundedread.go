// Package boundedread reads the files flecht is pointed at: stage, config,
// keyring, password, TLS and broker config files, offsets files, lock
// files. Each kind has a limit that fits it many times over, so a path that
// names something else (a log, /dev/zero) is refused after reading at most
// that much, never read into memory whole. A named pipe or a device is
// opened without blocking and read so that SIGINT or SIGTERM ends the wait
// (the process's own handler only cancels a context a read does not see),
// or refused unread where only a regular file makes sense.
//
// A file that does not exist, one over its limit and one of the wrong type
// are usage errors (exit 2): the command named a path that is not a file of
// that kind. Every error names the file.
package boundedread

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/flecht-dev/flecht/internal/exitcode"
)

// Kind is what a file is for: its name in errors and how much is read.
type Kind struct {
	// Name is what the file is, as errors say it: "stage file".
	Name string
	// Limit is the most bytes a file of this kind may hold.
	Limit int64
	// Regular refuses anything but a regular file (after symlinks) unread:
	// for files flecht writes itself, such as a lock.
	Regular bool
}

// Errors that an *Error wraps, for errors.Is.
var (
	ErrTooLarge    = errors.New("larger than the limit")
	ErrNotRegular  = errors.New("not a regular file")
	ErrInterrupted = errors.New("interrupted by a signal")
)

// Error is a read of a file of some Kind that failed.
type Error struct {
	Kind Kind
	Path string
	// Err is ErrTooLarge, ErrNotRegular, ErrInterrupted or the error of
	// the system call (a *fs.PathError, which errors.Is matches with
	// fs.ErrNotExist and the like).
	Err error
	// Type names what a file that is not regular is ("a directory").
	Type string
	// Signal is the signal that interrupted a read.
	Signal os.Signal
}

func (e *Error) Error() string {
	switch {
	case errors.Is(e.Err, ErrTooLarge):
		return fmt.Sprintf("%s %s is larger than %s, more than any %s holds", e.Kind.Name, e.Path, Size(e.Kind.Limit), e.Kind.Name)
	case errors.Is(e.Err, ErrNotRegular):
		return fmt.Sprintf("%s %s is %s, not a regular file", e.Kind.Name, e.Path, e.Type)
	case errors.Is(e.Err, ErrInterrupted):
		return fmt.Sprintf("%s %s: reading stopped by a signal (%v)", e.Kind.Name, e.Path, e.Signal)
	}
	return fmt.Sprintf("%s %s: %v", e.Kind.Name, e.Path, pathless(e.Err))
}

func (e *Error) Unwrap() error { return e.Err }

// ReadFile reads the whole file at path, up to k.Limit bytes.
func (k Kind) ReadFile(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|openFlags, 0)
	if err != nil {
		return nil, k.fail(path, &Error{Err: err})
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, k.fail(path, &Error{Err: err})
	}
	if t := TypeName(fi.Mode()); t != "" && (k.Regular || fi.IsDir()) {
		return nil, k.fail(path, &Error{Err: ErrNotRegular, Type: t})
	}
	var data []byte
	if fi.Mode().IsRegular() {
		data, err = io.ReadAll(io.LimitReader(f, k.Limit+1))
	} else {
		var sig os.Signal
		data, sig, err = readStream(f, k.Limit+1)
		if sig != nil {
			return nil, k.fail(path, &Error{Err: ErrInterrupted, Signal: sig})
		}
	}
	if err != nil {
		return nil, k.fail(path, &Error{Err: err})
	}
	if int64(len(data)) > k.Limit {
		return nil, k.fail(path, &Error{Err: ErrTooLarge})
	}
	return data, nil
}

// fail completes e and marks the errors that mean the path names no file
// of this kind as usage errors.
func (k Kind) fail(path string, e *Error) error {
	e.Kind, e.Path = k, path
	if errors.Is(e.Err, fs.ErrNotExist) || errors.Is(e.Err, ErrTooLarge) || errors.Is(e.Err, ErrNotRegular) {
		return exitcode.UsageError(e)
	}
	if e.Signal != nil {
		return exitcode.SignalError(e.Signal, e)
	}
	return e
}

// readStream reads up to n bytes of a pipe or device until its end, or
// until SIGINT or SIGTERM arrives: then it returns the signal. The file
// was opened non-blocking, so the runtime's poller waits for its data and
// a deadline in the past ends that wait.
func readStream(f *os.File, n int64) ([]byte, os.Signal, error) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	var (
		wg  sync.WaitGroup
		got os.Signal
	)
	done := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case got = <-sigs:
			if f.SetReadDeadline(time.Unix(1, 0)) != nil {
				f.Close() // not pollable: a non-blocking read returns soon anyway
			}
		case <-done:
		}
	}()
	data, err := io.ReadAll(io.LimitReader(f, n))
	close(done)
	wg.Wait()
	if got != nil && err != nil {
		return nil, got, nil
	}
	if errors.Is(err, syscall.EAGAIN) {
		// A device that cannot be polled and has nothing to read now.
		err = errors.New("nothing to read without waiting (a device?)")
	}
	return data, nil, err
}

// TypeName names the type of a file that is not a regular file ("a
// directory", "a named pipe"), or is "" for a regular file.
func TypeName(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return ""
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	}
	return "not a regular file"
}

// ModeWarning warns that group or others may access the regular file at
// path, which holds a secret (name says what it is), or is "". A pipe or a
// missing file has no mode to fix, so no warning.
func ModeWarning(name, path string) string {
	fi, err := os.Stat(path)
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o077 == 0 {
		return ""
	}
	return fmt.Sprintf("%s %s has mode %04o: group or others can access it; run chmod 600 %s", name, path, fi.Mode().Perm(), path)
}

// maxQuoted is how much of a value an error quotes: enough to recognise
// it, never a whole file.
const maxQuoted = 64

// Quote quotes a value read from a file or the command line for an error
// message, clipped to its first 64 bytes and its length: a 3 MB value is
// not echoed whole.
func Quote(v string) string {
	if len(v) <= maxQuoted {
		return strconv.Quote(v)
	}
	cut := maxQuoted
	for cut > 0 && !utf8.RuneStart(v[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d bytes)", strconv.Quote(v[:cut]), len(v))
}

// Size renders a limit: "4 MiB", "64 KiB", "100 bytes".
func Size(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + " MiB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.FormatInt(n>>10, 10) + " KiB"
	}
	return strconv.FormatInt(n, 10) + " bytes"
}

// pathless drops the path an os error repeats, keeping the reason.
func pathless(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
