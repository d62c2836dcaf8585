package ui

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The terminal styling libraries stay in internal/ui and cobra in
// internal/cli, so that a change of either touches one package. The one
// other reader of the command tree is internal/docgen, which writes the
// reference from it with cobra/doc (`make docs`).
func TestLibrariesStayInTheirPackage(t *testing.T) {
	confined := map[string][]string{
		"github.com/charmbracelet/": {"internal/ui"},
		"github.com/muesli/termenv": {"internal/ui"},
		"github.com/spf13/cobra":    {"internal/cli", "internal/docgen"},
	}
	root := filepath.Join("..", "..")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && strings.HasPrefix(d.Name(), ".") && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			for prefix, homes := range confined {
				if strings.HasPrefix(p, prefix) && !slices.ContainsFunc(homes, func(h string) bool { return strings.HasPrefix(rel, h+"/") }) {
					t.Errorf("%s imports %s, which belongs in %s", rel, p, strings.Join(homes, " or "))
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
