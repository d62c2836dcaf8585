package secret

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// staleLock is the age at which a keyring lock has no live holder: a
// change holds it for milliseconds.
const staleLock = 10 * time.Second

// lockPoll is how often a waiter looks at a held lock again.
const lockPoll = 20 * time.Millisecond

// Lock takes the advisory lock of the keyring file at path, for one
// read-modify-write: without it two writers that load the same file both
// save, and the second drops the first one's change. The lock is a file
// ".<name>.lock" beside the keyring (a symlink at path is followed),
// created with O_EXCL; unlock removes it. Lock waits while the lock is
// held; one older than staleLock was left by a killed holder and is broken,
// with a warning. A keyring that does not exist is an error matching
// fs.ErrNotExist. The lock binds only writers that take it; readers need
// none, since Save replaces the file atomically.
func Lock(path string, opts ...FileOption) (unlock func(), err error) {
	c := fileOpts(opts)
	target, err := filepath.EvalSymlinks(path)
	if err != nil {
		return nil, err
	}
	lock := lockPath(target)
	for {
		mine, err := tryLock(lock)
		if err == nil {
			return func() { unlockOwn(lock, mine) }, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("locking the keyring: %w", err)
		}
		held, err := os.Lstat(lock)
		if err != nil {
			continue // released meanwhile: try again
		}
		holder, err := os.ReadFile(lock)
		if err != nil {
			continue
		}
		if age := time.Since(held.ModTime()); age >= staleLock && breakLock(lock, string(holder)) {
			c.log.Warn("broke a stale keyring lock: its holder is gone (killed mid-change?)", "lock", lock, "age", age.Round(time.Second))
			continue
		}
		time.Sleep(lockPoll)
	}
}

func lockPath(target string) string {
	return filepath.Join(filepath.Dir(target), tempPrefix(target, lockTag))
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
	if b, err := os.ReadFile(lock); err == nil && string(b) == mine {
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
	if b, err := os.ReadFile(aside); err == nil && string(b) == holder {
		return true
	}
	// A fresh lock was taken since the check: give it back (Link fails if
	// yet another was taken meanwhile, which then holds the lock).
	os.Link(aside, lock)
	return false
}
