// Package hostile makes, for tests, the paths that name something other
// than the file a command expects: a file far over every read limit, a
// device that never ends, a directory, links to both, a path that does not
// exist. Every bounded read must refuse each of them at once, naming it.
// It also reads the checked-in corpus of hostile contents, and interrupts
// a wait with a signal as an operator would.
package hostile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Path is one hostile path.
type Path struct {
	Name string // what it is, for test names
	Path string
	// Missing is true for a path that does not exist (a usage error
	// saying so, where the others say what the path is).
	Missing bool
}

// HugeBytes is the size of the huge file: over every kind's limit.
const HugeBytes = 64 << 20

// Paths creates the hostile paths in a temporary directory of t. The huge
// file is sparse: it takes no disk, but a read without a bound reads it
// all.
func Paths(t testing.TB) []Path {
	t.Helper()
	dir := t.TempDir()
	huge := filepath.Join(dir, "huge")
	f, err := os.Create(huge)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(HugeBytes); err != nil {
		t.Fatal(err)
	}
	f.Close()
	sub := filepath.Join(dir, "directory")
	if err := os.Mkdir(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	paths := []Path{
		{Name: "huge", Path: huge},
		{Name: "directory", Path: sub},
		{Name: "missing", Path: filepath.Join(dir, "missing"), Missing: true},
	}
	link := func(name, target string, missing bool) {
		p := filepath.Join(dir, name)
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, Path{Name: name, Path: p, Missing: missing})
	}
	link("link-to-huge", huge, false)
	link("dangling-link", filepath.Join(dir, "nowhere"), true)
	if _, err := os.Stat("/dev/zero"); err == nil {
		paths = append(paths, Path{Name: "dev-zero", Path: "/dev/zero"})
		link("link-to-dev-zero", "/dev/zero", false)
	}
	return paths
}

// Corpus reads the files of testdata/hostile that match glob ("*.yaml"):
// contents a parser must refuse, checked in. The first line of each names
// what the error must say (Want).
func Corpus(t testing.TB, glob string) map[string][]byte {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", "hostile", glob))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no corpus testdata/hostile/%s: %v", glob, err)
	}
	out := map[string][]byte{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out[p] = b
	}
	return out
}

// Want is what the error of a corpus file must say: its first line,
// "# want: TEXT". A file without one fails t.
func Want(t testing.TB, b []byte) string {
	t.Helper()
	first, _, _ := strings.Cut(string(b), "\n")
	want, ok := strings.CutPrefix(first, "# want: ")
	if !ok {
		t.Fatalf("a corpus file without a first line '# want: TEXT': %.80q", b)
	}
	return want
}
