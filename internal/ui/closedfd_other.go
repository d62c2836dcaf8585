//go:build !linux

package ui

import "errors"

var errBadFD = errors.New("bad file descriptor")

// stdoutClosed cannot tell the runtime's stand-in for a closed descriptor 1
// from a redirection here.
func stdoutClosed() bool { return false }
