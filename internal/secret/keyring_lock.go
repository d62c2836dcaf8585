package secret

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"time"

	"github.com/flecht-dev/flecht/internal/boundedread"
	"github.com/flecht-dev/flecht/internal/exitcode"
)

// staleLock is the age at which a keyring lock whose holder cannot be
// seen alive was left by a killed holder: a change holds it for
// milliseconds.
const staleLock = 10 * time.Second

// lockPoll is how often a waiter looks at a held lock again.
const lockPoll = 20 * time.Millisecond

// lockWait bounds the wait for a lock: a holder that keeps it this long
// is stuck, and the operator hears who it is rather than waiting on.
var lockWait = 30 * time.Second

// lockNotice is how long a wait goes unreported: a lock is normally
// released well within it.
const lockNotice = time.Second

// lockFile is what a lock is to a read: one line naming its holder. Only a
// regular file is a lock this package made.
var lockFile = boundedread.Kind{Name: "keyring lock", Limit: 4 << 10, Regular: true}

// Lock takes the advisory lock of the keyring file at path, for one
// read-modify-write: without it two writers that load the same file both
// save, and the second drops the first one's change. The lock is a file
// ".<name>.lock" beside the keyring (a symlink at path is followed),
// created with O_EXCL and naming its holder (pid, host, time); unlock
// removes it. A keyring that does not exist is an error matching
// fs.ErrNotExist. The lock binds only writers that take it; readers need
// none, since Save replaces the file atomically.
//
// While the lock is held Lock waits, saying after a second who holds it
// and for how long. A lock whose holder is gone (a pid on this host that
// no longer runs, or older than staleLock when the holder cannot be
// checked) is broken, with a warning. Lock gives up with an error naming
// the holder after lockWait, and at once on SIGINT or SIGTERM (the
// process's own handler only cancels a context Lock does not see) or when
// something else than a lock file is in the lock's place. The errors a
// command cannot get past, a held or foreign lock, are exit 3.
func Lock(path string, opts ...FileOption) (unlock func(), err error) {
	c := fileOpts(opts)
	target, err := filepath.EvalSymlinks(path)
	if err != nil {
		return nil, err
	}
	lock := lockPath(target)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	start, noticed := time.Now(), false
	for {
		mine, err := tryLock(lock)
		if err == nil {
			return func() { unlockOwn(lock, mine) }, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("locking the keyring: %w", err)
		}
		h, err := readHolder(lock)
		if errors.Is(err, fs.ErrNotExist) {
			continue // released meanwhile: try again
		}
		if err != nil {
			return nil, err
		}
		if h.stale() && breakLock(lock, h.raw) {
			c.log.Warn("broke a stale keyring lock: its holder is gone (killed mid-change?)", "lock", lock, "holder", h.who(), "age", h.ageText())
			continue
		}
		waited := time.Since(start)
		if waited >= lockWait {
			return nil, exitcode.RefusedError(fmt.Errorf("the keyring lock %s is held by %s; gave up after %s. If that command is gone, remove the lock (rm %s) and try again",
				lock, h.describe(), lockWait, lock))
		}
		if waited >= lockNotice && !noticed {
			noticed = true
			c.log.Warn("waiting for the keyring lock", "lock", lock, "holder", h.who(), "age", h.ageText(), "gives_up_after", lockWait)
		}
		select {
		case s := <-sigs:
			return nil, exitcode.SignalError(s, fmt.Errorf("stopped by a signal (%v) while waiting for the keyring lock %s, held by %s", s, lock, h.describe()))
		case <-time.After(lockPoll):
		}
	}
}

func lockPath(target string) string {
	return filepath.Join(filepath.Dir(target), tempPrefix(target, lockTag))
}

// holder is what a lock file says about who holds it.
type holder struct {
	raw      string    // the file's content, which tells a lock from a later one
	pid      int       // 0 when the content is not a holder line
	host     string    // as os.Hostname said
	modified time.Time // the lock file's mtime
}

var holderLine = regexp.MustCompile(`^pid ([0-9]{1,10}) on (\S*) since \S+, token \S+\n$`)

// readHolder reads the lock at path, refusing anything but a regular file
// (a directory or a symlink there is no lock of ours, and would never be
// released) with an error naming it and what to remove.
func readHolder(lock string) (holder, error) {
	fi, err := os.Lstat(lock)
	if err != nil {
		return holder{}, err
	}
	if t := boundedread.TypeName(fi.Mode()); t != "" {
		rm := "rm"
		if fi.IsDir() {
			rm = "rmdir"
		}
		return holder{}, exitcode.RefusedError(fmt.Errorf("the keyring lock %s is %s, not a lock file flecht made, so the keyring cannot be locked; remove it (%s %s) and try again", lock, t, rm, lock))
	}
	b, err := lockFile.ReadFile(lock)
	if err != nil {
		return holder{}, err
	}
	h := holder{raw: string(b), modified: fi.ModTime()}
	if m := holderLine.FindStringSubmatch(h.raw); m != nil {
		h.pid, _ = strconv.Atoi(m[1])
		h.host = m[2]
	}
	return h, nil
}

func (h holder) age() time.Duration { return time.Since(h.modified) }

// stale reports whether the holder is gone: never while its process runs
// on this host; otherwise once the lock is older than staleLock (a holder
// on another host, or with a pid of another pid namespace, cannot be
// checked, but no change takes that long). A lock from the future (a
// skewed clock, a touched file) has no age: it is stale only when its
// holder on this host is seen gone.
func (h holder) stale() bool {
	host, _ := os.Hostname()
	local := h.pid > 0 && h.host == host
	if local && processAlive(h.pid) {
		return false
	}
	if age := h.age(); age >= 0 {
		return age >= staleLock
	}
	return local
}

// processAlive reports whether a process with this pid runs (or may: one
// of another user, a system where signal 0 is not supported).
func processAlive(pid int) bool {
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	return !errors.Is(p.Signal(syscall.Signal(0)), os.ErrProcessDone)
}

func (h holder) who() string {
	if h.pid == 0 {
		return "unknown (the lock names no holder)"
	}
	return fmt.Sprintf("pid %d on %s", h.pid, h.host)
}

func (h holder) ageText() string {
	if a := h.age(); a >= 0 {
		return a.Round(time.Second).String()
	}
	return "its time is in the future (a clock set wrong, or a touched file)"
}

func (h holder) describe() string {
	if a := h.age(); a < 0 {
		return fmt.Sprintf("%s, with a time %s in the future (a clock set wrong, or a touched file)", h.who(), (-a).Round(time.Second))
	}
	return fmt.Sprintf("%s for %s", h.who(), h.age().Round(time.Second))
}

// tryLock creates the lock file, which fails with fs.ErrExist while it is
// held, and returns what it wrote: the holder for an operator who finds it,
// and a random token, so that a lock is told from a later one by content
// (a new file may get the inode number of a removed one).
func tryLock(lock string) (string, error) {
	f, err := os.OpenFile(lock, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", err
	}
	host, _ := os.Hostname()
	holder := fmt.Sprintf("pid %d on %s since %s, token %s\n", os.Getpid(), host, time.Now().UTC().Format(time.RFC3339), rand.Text())
	_, err = f.WriteString(holder)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(lock)
		return "", err
	}
	return holder, nil
}

// unlockOwn removes the lock if it is still the one this holder created
// (a waiter may have broken it as stale and another taken it since).
func unlockOwn(lock, mine string) {
	if b, err := lockFile.ReadFile(lock); err == nil && string(b) == mine {
		os.Remove(lock)
	}
}

// breakLock removes the stale lock whose content is holder, and only that
// one: it is first renamed aside, so that two waiters cannot both break it
// and a fresh lock taken in between is put back, not removed.
func breakLock(lock, holder string) bool {
	aside := lock + staleTag + rand.Text()
	if os.Rename(lock, aside) != nil {
		return false // gone already: another waiter broke it, or it was released
	}
	defer os.Remove(aside)
	if b, err := lockFile.ReadFile(aside); err == nil && string(b) == holder {
		return true
	}
	// A fresh lock was taken since the check: give it back (Link fails if
	// yet another was taken meanwhile, which then holds the lock).
	os.Link(aside, lock)
	return false
}
