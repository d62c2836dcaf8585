package docgen

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// repo is the repository's root, seen from this package's directory.
const repo = "../.."

func setEnvironment(t *testing.T) {
	t.Helper()
	for k, v := range Environment(os.Environ()) {
		t.Setenv(k, v)
	}
}

// The committed reference, man pages and README table are what the
// command tree gives now. A command's help changed without `make docs`
// fails here, naming each file that differs.
func TestCommittedReferenceIsCurrent(t *testing.T) {
	setEnvironment(t)
	tmp := t.TempDir()
	for _, gen := range []struct {
		dir   string
		ext   string
		write func(string) error
	}{
		{ReferenceDir, ".md", func(d string) error { return WriteReference(Root(), d) }},
		{ManDir, ".1", func(d string) error { return WriteMan(Root(), d) }},
	} {
		want := filepath.Join(tmp, filepath.FromSlash(gen.dir))
		if err := gen.write(want); err != nil {
			t.Fatalf("generating %s: %v", gen.dir, err)
		}
		compareDirs(t, gen.dir, want, filepath.Join(repo, filepath.FromSlash(gen.dir)), gen.ext)
	}

	readme, err := os.ReadFile(filepath.Join(repo, Readme))
	if err != nil {
		t.Fatal(err)
	}
	updated, err := ReplaceTable(readme, CommandTable(Root(), ReferenceDir))
	if err != nil {
		t.Fatalf("%v: run make docs after restoring the markers", err)
	}
	if !bytes.Equal(updated, readme) {
		t.Errorf("%s: the command table differs from the commands' Short: run make docs", Readme)
	}
}

// compareDirs reports each generated file (name ending in ext) that is
// missing from got, differs there, or is there without being generated.
func compareDirs(t *testing.T, rel, want, got, ext string) {
	t.Helper()
	names := func(dir string) []string {
		m, err := filepath.Glob(filepath.Join(dir, "flecht*"+ext))
		if err != nil {
			t.Fatal(err)
		}
		for i := range m {
			m[i] = filepath.Base(m[i])
		}
		slices.Sort(m)
		return m
	}
	wantNames, gotNames := names(want), names(got)
	if len(wantNames) == 0 {
		t.Fatalf("%s: nothing generated", rel)
	}
	for _, n := range wantNames {
		w, err := os.ReadFile(filepath.Join(want, n))
		if err != nil {
			t.Fatal(err)
		}
		g, err := os.ReadFile(filepath.Join(got, n))
		switch {
		case os.IsNotExist(err):
			t.Errorf("%s/%s is missing: run make docs", rel, n)
		case err != nil:
			t.Fatal(err)
		case !bytes.Equal(w, g):
			t.Errorf("%s/%s differs from the command tree (first difference at line %d): run make docs", rel, n, firstDiffLine(w, g))
		}
	}
	for _, n := range gotNames {
		if !slices.Contains(wantNames, n) {
			t.Errorf("%s/%s is no command's page any more: run make docs", rel, n)
		}
	}
}

func firstDiffLine(a, b []byte) int {
	la, lb := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	for i := range min(len(la), len(lb)) {
		if la[i] != lb[i] {
			return i + 1
		}
	}
	return min(len(la), len(lb)) + 1
}

// Two generations give the same bytes, whatever the machine's environment
// outside the fixed one: nothing of the user's home or the date.
func TestGenerationIsDeterministic(t *testing.T) {
	// The home directory, not the host name: a host may be called by a
	// word the help text uses ("runner").
	home, _ := os.UserHomeDir()
	gen := func(env map[string]string) (ref, man string) {
		for k, v := range env {
			t.Setenv(k, v)
		}
		dir := t.TempDir()
		if err := WriteReference(Root(), filepath.Join(dir, "ref")); err != nil {
			t.Fatal(err)
		}
		if err := WriteMan(Root(), filepath.Join(dir, "man")); err != nil {
			t.Fatal(err)
		}
		return filepath.Join(dir, "ref"), filepath.Join(dir, "man")
	}
	ref1, man1 := gen(Environment(os.Environ()))
	ref2, man2 := gen(Environment([]string{"FLECHT_BROKERS=elsewhere:9092"}))
	compareDirs(t, "second reference", ref1, ref2, ".md")
	compareDirs(t, "second man pages", man1, man2, ".1")

	for _, dir := range []string{ref1, man1} {
		files, _ := filepath.Glob(filepath.Join(dir, "*"))
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, leak := range []string{"Auto generated", home} {
				if leak != "" && leak != "/" && bytes.Contains(b, []byte(leak)) {
					t.Errorf("%s holds %q", filepath.Base(f), leak)
				}
			}
		}
	}
}

func TestCommandTable(t *testing.T) {
	table := CommandTable(Root(), ReferenceDir)
	root := Root()
	for _, c := range root.Commands() {
		if !c.IsAvailableCommand() {
			continue
		}
		row := "[`" + c.CommandPath() + "`](docs/reference/" + strings.ReplaceAll(c.CommandPath(), " ", "_") + ".md) | " + c.Short + " |"
		if !strings.Contains(table, row) {
			t.Errorf("no row %q in\n%s", row, table)
		}
	}
	if n := strings.Count(table, "\n"); n < 10 {
		t.Errorf("table of %d lines:\n%s", n, table)
	}
}

func TestReplaceTable(t *testing.T) {
	readme := "# x\n\n" + BeginMarker + "\nold\n" + EndMarker + "\nafter\n"
	got, err := ReplaceTable([]byte(readme), "| new |\n")
	if err != nil {
		t.Fatal(err)
	}
	if want := "# x\n\n" + BeginMarker + "\n| new |\n" + EndMarker + "\nafter\n"; string(got) != want {
		t.Errorf("got %q, want %q", got, want)
	}
	for _, bad := range []string{
		"no markers\n",
		BeginMarker + "\nno end\n",
		EndMarker + "\n" + BeginMarker + "\n",
		BeginMarker + "\n" + EndMarker + "\n" + BeginMarker + "\n" + EndMarker + "\n",
	} {
		if _, err := ReplaceTable([]byte(bad), "t\n"); err == nil {
			t.Errorf("ReplaceTable(%q) accepted", bad)
		}
	}
}
