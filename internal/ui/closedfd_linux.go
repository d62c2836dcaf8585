package ui

import (
	"os"
	"strconv"
	"strings"
	"syscall"
)

var errBadFD error = syscall.EBADF

// stdoutClosed reports whether the process started with descriptor 1
// closed (flecht >&-). The Go runtime then opens /dev/null read-write on it
// before main runs, so output would vanish with exit 0; no shell
// redirection does that (>/dev/null opens it write-only). A daemon that
// put one read-write /dev/null on all three descriptors (daemon(3)) looks
// the same on descriptor 1, so a read-write /dev/null on standard input
// too is taken for that: with both 0 and 1 closed, output is lost as
// before.
func stdoutClosed() bool { return devNullRW(1) && !devNullRW(0) }

// devNullRW reports whether descriptor fd is /dev/null opened read-write.
func devNullRW(fd int) bool {
	var st, null syscall.Stat_t
	if syscall.Fstat(fd, &st) != nil || syscall.Stat("/dev/null", &null) != nil ||
		st.Mode&syscall.S_IFMT != syscall.S_IFCHR || st.Rdev != null.Rdev {
		return false
	}
	b, err := os.ReadFile("/proc/self/fdinfo/" + strconv.Itoa(fd))
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "flags:"); ok {
			flags, err := strconv.ParseUint(strings.TrimSpace(v), 8, 64)
			return err == nil && flags&syscall.O_ACCMODE == syscall.O_RDWR
		}
	}
	return false
}
