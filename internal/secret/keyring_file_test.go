package secret

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
