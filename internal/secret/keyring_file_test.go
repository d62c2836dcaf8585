package secret

import (
	"bytes"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flecht-dev/flecht/internal/boundedread/hostile"
)

func TestSaveLoadMode0600(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "keyring.json")
	kr := testKeyring(t, true)
	if err := kr.Save(path); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %04o, want 0600", fi.Mode().Perm())
	}
	got, warnings, err := Load(path)
	if err != nil || len(warnings) != 0 || !got.Equal(kr) {
		t.Fatalf("Load: %v %v", warnings, err)
	}
	// Saving over a world-readable file leaves a 0600 file.
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := kr.Save(path); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode after re-save %04o", fi.Mode().Perm())
	}
}

func TestLoadWarnsOnLooseMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keyring.json")
	if err := testKeyring(t, false).Save(path); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []os.FileMode{0o640, 0o604, 0o620} {
		os.Chmod(path, mode)
		kr, warnings, err := Load(path)
		if err != nil || kr == nil {
			t.Fatalf("a loose mode must warn, not fail: %v", err)
		}
		if len(warnings) != 1 || !strings.Contains(warnings[0], "chmod 600") {
			t.Errorf("mode %04o: warnings %q", mode, warnings)
		}
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	if _, _, err := Load(filepath.Join(dir, "missing.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"keys":[]}`), 0o600)
	_, _, err := Load(bad)
	if !errors.Is(err, ErrKeyringInvalid) || !strings.Contains(err.Error(), bad) {
		t.Errorf("invalid file: %v", err)
	}
}

// A crash between writing the new file and renaming it over the old one
// must leave the old keyring whole and no temporary file behind.
func TestSaveNeverLeavesAHalfWrittenFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "keyring.json")
	old := testKeyring(t, false)
	if err := old.Save(path); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(path)

	var sawTemp string
	beforeRename = func(tmp string) error {
		sawTemp = tmp
		// The temporary is complete and private before it can be renamed.
		fi, err := os.Stat(tmp)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("temporary file: %v, mode %v", err, fi.Mode())
		}
		if filepath.Dir(tmp) != dir {
			t.Errorf("temporary in %s, want the keyring's directory (rename must not cross filesystems)", filepath.Dir(tmp))
		}
		return errors.New("injected crash")
	}
	t.Cleanup(func() { beforeRename = nil })

	next, _ := old.AddKey("b", keyB)
	if err := next.Save(path); err == nil || !strings.Contains(err.Error(), "injected crash") {
		t.Fatalf("Save = %v, want the injected failure", err)
	}
	after, _ := os.ReadFile(path)
	if string(after) != string(before) {
		t.Error("the old keyring changed")
	}
	if _, err := os.Stat(sawTemp); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("temporary file left behind: %v", err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries, want only the keyring", len(entries))
	}
	if kr, _, err := Load(path); err != nil || !kr.Equal(old) {
		t.Errorf("old keyring unreadable: %v", err)
	}
}

func TestSaveFollowsSymlink(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "data", "keyring.json")
	os.MkdirAll(filepath.Dir(real), 0o700)
	if err := testKeyring(t, false).Save(real); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "keyring.json")
	if err := os.Symlink(real, link); err != nil {
		t.Skip("no symlinks here:", err)
	}
	next := testKeyring(t, true)
	if err := next.Save(link); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Lstat(link); fi.Mode()&os.ModeSymlink == 0 {
		t.Error("Save replaced the symlink with a file")
	}
	if kr, _, err := Load(real); err != nil || !kr.Equal(next) {
		t.Errorf("target not updated: %v", err)
	}
}

// A writer killed between creating its temporary file and renaming it
// leaves that file behind, with key bytes in it, a removed key's included.
// Save and Load remove such leftovers once they are older than any live
// write could be, and say so in a debug log; a fresh one (a write that may
// be in progress) and unrelated files are left alone.
func TestStaleTemporariesAreRemoved(t *testing.T) {
	var logged bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelDebug})))
	t.Cleanup(func() { slog.SetDefault(prev) })

	dir := t.TempDir()
	path := filepath.Join(dir, "keyring.json")
	kr := testKeyring(t, true)
	if err := kr.Save(path); err != nil {
		t.Fatal(err)
	}
	plant := func(name string, age time.Duration) string {
		p := filepath.Join(dir, name)
		doc, _ := kr.JWKS()
		if err := os.WriteFile(p, doc, 0o600); err != nil {
			t.Fatal(err)
		}
		then := time.Now().Add(-age)
		os.Chtimes(p, then, then)
		return p
	}
	for _, op := range []func() error{
		func() error { _, _, err := Load(path); return err },
		func() error { return kr.Save(path) },
	} {
		logged.Reset()
		stale := []string{plant(".keyring.json.tmp-123", 2*time.Minute), plant(".keyring.json.init-456", time.Hour),
			plant("..keyring.json.init-456.tmp-789", time.Hour)}
		fresh := plant(".keyring.json.tmp-999", 0)
		other := []string{plant(".other.json.tmp-1", time.Hour), plant("keyring.json.bak", time.Hour)}
		if err := op(); err != nil {
			t.Fatal(err)
		}
		for _, p := range stale {
			if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("stale %s survived", filepath.Base(p))
			}
			if !strings.Contains(logged.String(), filepath.Base(p)) {
				t.Errorf("removal of %s not logged: %s", filepath.Base(p), logged.String())
			}
		}
		for _, p := range append(other, fresh) {
			if _, err := os.Lstat(p); err != nil {
				t.Errorf("%s was removed: %v", filepath.Base(p), err)
			}
		}
		os.Remove(fresh)
	}
}

// The race a stat cannot see: the file appears after the check. Publishing
// by hard link refuses it instead of replacing it, and leaves nothing behind.
func TestCreateNeverReplaces(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "keyring.json")
	kr := testKeyring(t, false)
	if err := kr.Create(path); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("created: %v %v", fi, err)
	}
	if err := os.WriteFile(path, []byte("theirs"), 0o600); err != nil {
		t.Fatal(err)
	}
	beforeRename = func(string) error { t.Error("Create went through Save's rename"); return nil }
	t.Cleanup(func() { beforeRename = nil })
	if err := kr.Create(path); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("Create over an existing file: %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "theirs" {
		t.Error("the existing file was replaced")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("%d entries left, want only the existing file", len(entries))
	}
}

// The keyring lock: a second holder waits until the first releases it; a
// lock whose holder is gone (older than staleLock) is broken with a
// warning; unlock removes only its own lock file.
func TestLockWaitsAndBreaksStaleLocks(t *testing.T) {
	var logged bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logged, nil))
	dir := t.TempDir()
	path := filepath.Join(dir, "keyring.json")
	if err := testKeyring(t, false).Save(path); err != nil {
		t.Fatal(err)
	}
	if _, err := Lock(filepath.Join(dir, "missing.json")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("lock of a missing keyring: %v", err)
	}
	unlock, err := Lock(path, FileLog(log))
	if err != nil {
		t.Fatal(err)
	}
	lock := filepath.Join(dir, ".keyring.json.lock")
	if _, err := os.Stat(lock); err != nil {
		t.Fatalf("no lock file: %v", err)
	}
	got := make(chan time.Time, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		u, err := Lock(path, FileLog(log))
		if err != nil {
			t.Error(err)
			return
		}
		got <- time.Now()
		u()
	}()
	time.Sleep(100 * time.Millisecond)
	released := time.Now()
	unlock()
	<-done
	select {
	case at := <-got:
		if at.Before(released) {
			t.Error("the second holder did not wait")
		}
	default: // Lock failed, reported above
	}
	if logged.Len() != 0 {
		t.Errorf("a live lock was broken: %s", logged.String())
	}

	// A killed holder's lock, old enough: broken at once, with a warning.
	os.WriteFile(lock, []byte("pid 1"), 0o600)
	old := time.Now().Add(-time.Minute)
	os.Chtimes(lock, old, old)
	start := time.Now()
	unlock, err = Lock(path, FileLog(log))
	if err != nil || time.Since(start) > 2*time.Second || !strings.Contains(logged.String(), "stale keyring lock") {
		t.Fatalf("stale lock: %v after %v, log %q", err, time.Since(start), logged.String())
	}
	// Someone broke this lock and took another: unlock leaves theirs.
	os.Remove(lock)
	os.WriteFile(lock, []byte("theirs"), 0o600)
	unlock()
	if b, _ := os.ReadFile(lock); string(b) != "theirs" {
		t.Error("unlock removed another holder's lock")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Errorf("%d entries, want the keyring and the lock", len(entries))
	}
}

// A keyring path that names something huge (a log file, /dev/zero) is
// refused after a bounded read, never read into memory whole; so is such a
// password file.
func TestLoadReadsABoundedKeyring(t *testing.T) {
	dir := t.TempDir()
	huge := filepath.Join(dir, "huge")
	f, err := os.Create(huge)
	if err != nil {
		t.Fatal(err)
	}
	// Sparse: no disk used, but a reader without a bound reads it all.
	if err := f.Truncate(64 << 20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, _, err := Load(huge); !errors.Is(err, ErrKeyringInvalid) || !strings.Contains(err.Error(), huge+": larger than 16 MiB") {
		t.Errorf("Load of a 64 MiB file: %v", err)
	}
	if _, err := ReadKeyringFile(huge); !errors.Is(err, ErrKeyringInvalid) {
		t.Errorf("ReadKeyringFile of a 64 MiB file: %v", err)
	}
	if _, err := PasswordFile(huge)(); !errors.Is(err, ErrKeyringPassword) || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("a 64 MiB password file: %v", err)
	}
}

// Every hostile path (/dev/zero, a huge file, a directory, links to them,
// a missing path) is refused as a keyring and as a password file at once,
// naming it, never read into memory whole.
func TestHostileKeyringAndPasswordPaths(t *testing.T) {
	for _, p := range hostile.Paths(t) {
		_, _, err := Load(p.Path)
		if err == nil || !strings.Contains(err.Error(), p.Path) {
			t.Errorf("keyring %s: %v", p.Name, err)
		}
		if p.Missing && !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("keyring %s: %v does not match fs.ErrNotExist", p.Name, err)
		}
		if _, err := PasswordFile(p.Path)(); !errors.Is(err, ErrKeyringPassword) || !strings.Contains(err.Error(), p.Path) {
			t.Errorf("password file %s: %v", p.Name, err)
		}
	}
}
