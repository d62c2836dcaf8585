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
	for _, l := range strings.Split(string(mk), "\n") {
		if strings.HasPrefix(l, "#") {
			continue
		}
		for _, word := range strings.Fields(l) {
			if strings.HasPrefix(strings.Trim(word, `"'`), "/") {
				t.Errorf("the Makefile names an absolute path: %q", l)
			}
		}
		// A path given on the command line may hold a space.
		if strings.Contains(strings.ReplaceAll(l, `"$(FLECHT)"`, ""), "$(FLECHT)") {
			t.Errorf("the Makefile runs $(FLECHT) unquoted: %q", l)
		}
	}
}

// The README says how to create the stage's topics before it runs: with
// flecht's own command, and with Kafka's, naming each topic.
func TestReadmeSaysToCreateTheTopics(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "p")
	if _, err := Write(dir, "go", Project{Name: "p"}); err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(dir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	stage, err := os.ReadFile(filepath.Join(dir, "stage.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"flecht topic create -f stage.yaml"}
	for _, topic := range []string{"payments", "totals"} {
		if !strings.Contains(string(stage), topic) {
			t.Fatalf("stage.yaml names no topic %s: the test needs its topics\n%s", topic, stage)
		}
		want = append(want, "--create --topic "+topic)
	}
	for _, w := range want {
		if !strings.Contains(string(readme), w) {
			t.Errorf("the README lacks %q:\n%s", w, readme)
		}
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
