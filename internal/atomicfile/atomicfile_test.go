package atomicfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

func TestWriteReplacesOrRefuses(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	if err := Write(path, []byte("one"), 0o600, Options{}); err != nil {
		t.Fatal(err)
	}
	if err := Write(path, []byte("two"), 0o600, Options{}); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("a second create: %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "one" {
		t.Fatalf("a refused create changed the file: %q", b)
	}
	if err := Write(path, []byte("three"), 0o640, Options{Replace: true}); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if b, _ := os.ReadFile(path); string(b) != "three" || err != nil || fi.Mode().Perm() != 0o640 {
		t.Fatalf("after replace: %q %v %v", b, fi.Mode(), err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("temporaries left: %v", entries)
	}
}

// A failure before the file is published leaves the old file whole and no
// temporary behind.
func TestFailureBeforePublishLeavesTheOldFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	if err := Write(path, []byte("old"), 0o600, Options{}); err != nil {
		t.Fatal(err)
	}
	crash := errors.New("crash")
	err := Write(path, []byte("new"), 0o600, Options{Replace: true, BeforePublish: func(tmp string) error {
		if b, _ := os.ReadFile(tmp); string(b) != "new" {
			t.Errorf("the temporary holds %q", b)
		}
		return crash
	}})
	if !errors.Is(err, crash) {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "old" {
		t.Fatalf("the old file: %q", b)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("temporaries left: %v", entries)
	}
}
