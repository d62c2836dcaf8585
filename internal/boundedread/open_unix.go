//go:build unix

package boundedread

import "syscall"

// openFlags opens a named pipe without waiting for a writer, and makes a
// pipe or terminal pollable, so that a signal can end a read.
const openFlags = syscall.O_NONBLOCK
