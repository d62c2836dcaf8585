package layering

import (
	"bufio"
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/flecht-dev/flecht/"

// The command layer: cobra commands that parse flags, call a domain
// package and print what it returns.
const commandLayer = "internal/cli"

// Tools built on the command tree may import the command layer.
var commandTools = map[string]string{
	"internal/docgen":                 "renders the command tree into docs/reference, the man pages and the README's table",
	"internal/docgen/cmd/flecht-docs": "make docs",
}

// Presentation packages may import internal/ui: they write for people.
var presentation = map[string]string{
	"internal/ui":   "terminal output itself",
	"internal/show": "the human form of each command's result",
	"internal/demo": "the dev demo's live terminal view",
}

// The command layer holds at most this share of the module's non-test
// lines: what grows is domain logic, and it grows in domain packages,
// where it is tested without parsing argv.
const maxCommandShare = 0.12

// What the command layer may name of franz-go's kgo: the types that pass a
// connection through to a domain package. Requests, records and client
// construction belong to the domain packages (kafkax, topicio, replay,
// status, ...).
var commandKgo = map[string]bool{"Client": true, "Opt": true}

type goFile struct {
	rel     string // slash path from the module root
	pkg     string // its directory
	test    bool
	lines   int
	file    *ast.File
	imports map[string]string // import path → name used in the file
}

// moduleFiles parses every Go file of flecht's own module: not the SDK,
// the example modules or the tools, which are modules of their own.
func moduleFiles(t *testing.T) []goFile {
	t.Helper()
	root := filepath.Join("..", "..")
	var out []goFile
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "bin") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil && path != root {
				return filepath.SkipDir // a module of its own
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, src, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		g := goFile{rel: rel, pkg: filepath.ToSlash(filepath.Dir(rel)), test: strings.HasSuffix(path, "_test.go"),
			lines: countLines(src), file: f, imports: map[string]string{}}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			name := p[strings.LastIndex(p, "/")+1:]
			if imp.Name != nil {
				name = imp.Name.Name
			}
			g.imports[p] = name
		}
		out = append(out, g)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) < 100 {
		t.Fatalf("found %d Go files: not the module root", len(out))
	}
	return out
}

func countLines(src []byte) int {
	n := 0
	sc := bufio.NewScanner(bytes.NewReader(src))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		n++
	}
	return n
}

func inCommandLayer(pkg string) bool {
	return pkg == commandLayer || strings.HasPrefix(pkg, commandLayer+"/")
}

// Domain packages import neither the command layer nor ui.
func TestDomainPackagesKnowNoCommandsOrTerminals(t *testing.T) {
	for _, f := range moduleFiles(t) {
		if !strings.HasPrefix(f.pkg, "internal/") || inCommandLayer(f.pkg) || presentation[f.pkg] != "" || commandTools[f.pkg] != "" {
			continue
		}
		for p := range f.imports {
			switch {
			case p == module+commandLayer || strings.HasPrefix(p, module+commandLayer+"/"):
				t.Errorf("%s imports the command layer (%s): a domain package must not know its commands", f.rel, p)
			case p == module+"internal/ui" && !f.test:
				t.Errorf("%s imports internal/ui: return data and let internal/show write it for people", f.rel)
			}
		}
	}
}

// The command layer talks to Kafka only through domain packages: no admin
// or protocol requests of its own, and of kgo only the types that pass a
// connection on.
func TestCommandsDoNotTalkToKafka(t *testing.T) {
	checked := 0
	for _, f := range moduleFiles(t) {
		if !inCommandLayer(f.pkg) || f.test {
			continue
		}
		checked++
		for p, name := range f.imports {
			if strings.HasPrefix(p, "github.com/twmb/franz-go/") && p != "github.com/twmb/franz-go/pkg/kgo" {
				t.Errorf("%s imports %s: Kafka requests belong in a domain package (kafkax, topicio, replay, status, ...)", f.rel, p)
			}
			if p != "github.com/twmb/franz-go/pkg/kgo" {
				continue
			}
			ast.Inspect(f.file, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if id, ok := sel.X.(*ast.Ident); ok && id.Name == name && !commandKgo[sel.Sel.Name] {
					t.Errorf("%s uses kgo.%s: build clients, records and requests in a domain package", f.rel, sel.Sel.Name)
				}
				return true
			})
		}
	}
	if checked == 0 {
		t.Fatal("no file of the command layer was checked")
	}
}

// The command layer stays thin.
func TestCommandLayerIsThin(t *testing.T) {
	var all, commands int
	for _, f := range moduleFiles(t) {
		if f.test {
			continue
		}
		all += f.lines
		if inCommandLayer(f.pkg) {
			commands += f.lines
		}
	}
	share := float64(commands) / float64(all)
	t.Logf("%s: %d of %d non-test lines (%.1f%%)", commandLayer, commands, all, 100*share)
	if share > maxCommandShare {
		t.Errorf("%s holds %.1f%% of the module's non-test lines (%d of %d), above %.0f%%: move the logic that grew into a domain package",
			commandLayer, 100*share, commands, all, 100*maxCommandShare)
	}
}

// Every package of cmd/ and internal/ is on the architecture page's map,
// so the map a newcomer reads is the tree they find.
func TestArchitecturePageMapsEveryPackage(t *testing.T) {
	page, err := os.ReadFile(filepath.Join("..", "..", "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, f := range moduleFiles(t) {
		if f.test || seen[f.pkg] || !(strings.HasPrefix(f.pkg, "internal/") || strings.HasPrefix(f.pkg, "cmd/")) {
			continue
		}
		seen[f.pkg] = true
		if !bytes.Contains(page, []byte("`"+f.pkg+"`")) {
			t.Errorf("docs/architecture.md does not name package %s: add it to the package map", f.pkg)
		}
	}
}
