//go:build unix

package secret

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flecht-dev/flecht/internal/boundedread/hostile"
	"github.com/flecht-dev/flecht/internal/exitcode"
)

// lockFixture is a keyring and the path of its lock.
func lockFixture(t *testing.T) (path, lock string) {
	t.Helper()
	dir := t.TempDir()
	path = filepath.Join(dir, "k.json")
	if err := testKeyring(t, false).Save(path); err != nil {
		t.Fatal(err)
	}
	return path, filepath.Join(dir, ".k.json.lock")
}

// lockWithin runs Lock and fails the test when it has not returned within
// d (the goroutine of a Lock that spins is left behind).
func lockWithin(t *testing.T, d time.Duration, path string, opts ...FileOption) error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		unlock, err := Lock(path, opts...)
		if err == nil {
			unlock()
		}
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		t.Fatalf("Lock did not return within %v", d)
		return nil
	}
}

// Something else than a lock file in the lock's place (a directory, a
// dangling symlink, a symlink to /dev/zero) would never be released, and
// Lock spun on it for ever at full CPU; it is refused at once, unread,
// naming the lock and what to remove (exit 3).
func TestLockRefusesWhatIsNotALockFile(t *testing.T) {
	for name, place := range map[string]func(lock string) error{
		"directory":     func(lock string) error { return os.Mkdir(lock, 0o700) },
		"dangling link": func(lock string) error { return os.Symlink(lock+".nowhere", lock) },
		"link to zero":  func(lock string) error { return os.Symlink("/dev/zero", lock) },
		"link to a lock": func(lock string) error {
			os.WriteFile(lock+".real", []byte("pid 1 on elsewhere since 2026-01-01T00:00:00Z, token x\n"), 0o600)
			return os.Symlink(lock+".real", lock)
		},
	} {
		path, lock := lockFixture(t)
		if err := place(lock); err != nil {
			t.Fatal(err)
		}
		err := lockWithin(t, 2*time.Second, path)
		rm := "(rm " + lock + ")"
		if name == "directory" {
			rm = "(rmdir " + lock + ")"
		}
		if err == nil || !strings.Contains(err.Error(), "the keyring lock "+lock+" is a ") || !strings.Contains(err.Error(), rm) ||
			exitcode.Code(err) != exitcode.Refused {
			t.Errorf("%s: %v", name, err)
		}
		if _, serr := os.Lstat(lock); serr != nil {
			t.Errorf("%s: what was in the lock's place is gone: %v", name, serr)
		}
	}
}

// A lock held by a live process is waited for: after a second the wait
// says who holds it (pid and host from the lock) and for how long, and it
// gives up after lockWait with an error naming the holder and the lock to
// remove (exit 3). A lock from the future, which waited silently for
// ever, is reported the same way.
func TestLockWaitReportsTheHolderAndEnds(t *testing.T) {
	defer func(w time.Duration) { lockWait = w }(lockWait)
	lockWait = 1500 * time.Millisecond
	host, _ := os.Hostname()
	for _, future := range []bool{false, true} {
		path, lock := lockFixture(t)
		holder := fmt.Sprintf("pid %d on %s since 2026-01-01T00:00:00Z, token x\n", os.Getpid(), host)
		os.WriteFile(lock, []byte(holder), 0o600)
		if future {
			at := time.Now().Add(time.Hour)
			os.Chtimes(lock, at, at)
		}
		var logged bytes.Buffer
		start := time.Now()
		err := lockWithin(t, 5*time.Second, path, FileLog(slog.New(slog.NewTextHandler(&logged, nil))))
		if took := time.Since(start); took < lockWait {
			t.Errorf("future %v: gave up after %v", future, took)
		}
		who := fmt.Sprintf("pid %d on %s", os.Getpid(), host)
		if err == nil || !strings.Contains(err.Error(), "the keyring lock "+lock+" is held by "+who) ||
			!strings.Contains(err.Error(), "rm "+lock) || exitcode.Code(err) != exitcode.Refused {
			t.Errorf("future %v: %v", future, err)
		}
		if future && !strings.Contains(err.Error(), "in the future") {
			t.Errorf("future: %v", err)
		}
		if !strings.Contains(logged.String(), "waiting for the keyring lock") || !strings.Contains(logged.String(), who) {
			t.Errorf("future %v: the wait was not reported: %q", future, logged.String())
		}
		if b, _ := os.ReadFile(lock); string(b) != holder {
			t.Errorf("future %v: a live holder's lock was broken", future)
		}
	}
}

// A lock whose holder on this host is gone is broken even when its time
// lies in the future; a live holder's is never broken by age.
func TestLockBreaksALockOfAGoneHolder(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	gone := cmd.Process.Pid
	host, _ := os.Hostname()
	path, lock := lockFixture(t)
	os.WriteFile(lock, []byte(fmt.Sprintf("pid %d on %s since 2026-01-01T00:00:00Z, token x\n", gone, host)), 0o600)
	at := time.Now().Add(time.Hour)
	os.Chtimes(lock, at, at)
	var logged bytes.Buffer
	if err := lockWithin(t, 2*time.Second, path, FileLog(slog.New(slog.NewTextHandler(&logged, nil)))); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logged.String(), "stale keyring lock") {
		t.Errorf("log %q", logged.String())
	}

	// Alive, and older than staleLock: still held.
	defer func(w time.Duration) { lockWait = w }(lockWait)
	lockWait = 300 * time.Millisecond
	os.WriteFile(lock, []byte(fmt.Sprintf("pid %d on %s since 2026-01-01T00:00:00Z, token x\n", os.Getpid(), host)), 0o600)
	old := time.Now().Add(-time.Hour)
	os.Chtimes(lock, old, old)
	if err := lockWithin(t, 2*time.Second, path); err == nil || !strings.Contains(err.Error(), "is held by") {
		t.Errorf("a live holder's old lock: %v", err)
	}
}

// SIGTERM or SIGINT ends the wait at once: the process's own handler only
// cancels a context, so a waiter that did not listen ignored the first
// signal.
func TestLockWaitEndsOnASignal(t *testing.T) {
	host, _ := os.Hostname()
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		path, lock := lockFixture(t)
		os.WriteFile(lock, []byte(fmt.Sprintf("pid %d on %s since 2026-01-01T00:00:00Z, token x\n", os.Getpid(), host)), 0o600)
		err := hostile.Interrupt(t, sig, func() error {
			_, err := Lock(path)
			return err
		})
		if err == nil || !strings.Contains(err.Error(), "stopped by a signal") || !strings.Contains(err.Error(), lock) {
			t.Errorf("%v: %v", sig, err)
		}
		if got, want := exitcode.Code(err), 128+int(sig); got != want {
			t.Errorf("%v: exit %d, want %d", sig, got, want)
		}
	}
}
