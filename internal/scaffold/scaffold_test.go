package scaffold

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The Makefile names no path: whatever directory flecht runs from, make
// has nothing of it to expand ($(shell ...)) or to cut short (a space, '#').
func TestMakefileWritesNoPath(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "p")
	if _, err := Write(dir, "go", Project{Name: "p"}); err != nil {
		t.Fatal(err)
	}
	mk, err := os.ReadFile(filepath.Join(dir, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	var assign []string
	for _, l := range strings.Split(string(mk), "\n") {
		if strings.HasPrefix(l, "FLECHT ") {
			assign = append(assign, l)
		}
	}
	if len(assign) != 1 || assign[0] != "FLECHT ?= flecht" {
		t.Fatalf("the Makefile sets FLECHT as %q, want only FLECHT ?= flecht", assign)
	}
	if exe, err := os.Executable(); err == nil && strings.Contains(string(mk), exe) {
		t.Errorf("the Makefile holds the binary's path %s", exe)
	}
}

func TestWriteOntoAFileSaysSo(t *testing.T) {
	file := filepath.Join(t.TempDir(), "p4")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Write(file, "go", Project{Name: "p4"})
	if err == nil || !strings.Contains(err.Error(), "exists and is not a directory") {
		t.Fatalf("Write onto a file: %v", err)
	}
}

func TestMakeSafe(t *testing.T) {
	for path, want := range map[string]bool{
		"/usr/local/bin/flecht":            true,
		"/opt/flecht-1.2_3+x/flecht":       true,
		"":                                 false,
		"/tmp/$(shell touch PWNED)/flecht": false,
		"/tmp/a b/flecht":                  false,
		"/tmp/a#b/flecht":                  false,
		"/tmp/a'b/flecht":                  false,
		"/tmp/a\nb/flecht":                 false,
		"/tmp/a;b/flecht":                  false,
		"/tmp/$$/flecht":                   false,
	} {
		if got := MakeSafe(path); got != want {
			t.Errorf("MakeSafe(%q) = %v, want %v", path, got, want)
		}
	}
}
