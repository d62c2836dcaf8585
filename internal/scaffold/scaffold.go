// Package scaffold writes new module projects (`flecht transform new`):
// a module that builds and passes its own tests as written, with the SDK
// beside it so that nothing needs fetching.
package scaffold

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"text/template"

	"github.com/flecht-dev/flecht/sdk"
)

//go:embed go
var templates embed.FS

// Languages lists the languages a project can be made in.
var Languages = []string{"go"}

// SDKDir is where a project keeps its copy of the SDK.
const SDKDir = "flecht-sdk"

// Project is what the templates are filled with.
type Project struct {
	// Name is the module's name: the directory's base name, lower case,
	// as a Go module path and a .wasm file name.
	Name string
}

// The project's Makefile runs `flecht` from PATH (FLECHT ?= flecht), and
// no path is written into it: make expands $(...) in a variable's value
// and a space or '#' ends it, so a path written there runs whatever its
// directory names say. Another binary is chosen on the command line
// (make test FLECHT=...), and MakeSafe says when a path can be given so.

// MakeSafe reports whether path can stand as a make variable's value on
// a shell command line without quoting or expansion: letters, digits and
// / . _ + - only.
func MakeSafe(path string) bool {
	if path == "" {
		return false
	}
	for _, c := range path {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', strings.ContainsRune("/._+-", c):
		default:
			return false
		}
	}
	return true
}

var goName = regexp.MustCompile(`^[a-z][a-z0-9_-]*$`)

// NameFor derives a project name from its directory.
func NameFor(dir string) (string, error) {
	base := strings.ToLower(filepath.Base(filepath.Clean(dir)))
	base = strings.ReplaceAll(base, " ", "-")
	if !goName.MatchString(base) {
		return "", fmt.Errorf("the directory's name %q cannot name a module: use letters, digits, '-' and '_', starting with a letter", filepath.Base(dir))
	}
	return base, nil
}

// Write creates the project in dir, which must not exist or be empty,
// and returns the files it wrote, relative to dir.
func Write(dir, lang string, p Project) ([]string, error) {
	if lang != "go" {
		return nil, fmt.Errorf("--lang %q: flecht makes projects in %s (the ABI itself is language-neutral: docs/modules.md)", lang, strings.Join(Languages, ", "))
	}
	if fi, err := os.Stat(dir); err == nil && !fi.IsDir() {
		return nil, fmt.Errorf("%s exists and is not a directory: give a new directory", dir)
	}
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return nil, fmt.Errorf("%s is not empty: give a new directory", dir)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	var files []string
	write := func(rel string, data []byte) error {
		full := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		files = append(files, rel)
		return os.WriteFile(full, data, 0o644)
	}
	err := fs.WalkDir(templates, "go", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		raw, err := templates.ReadFile(name)
		if err != nil {
			return err
		}
		rel := strings.TrimSuffix(strings.TrimPrefix(name, "go/"), ".tmpl")
		t, err := template.New(rel).Delims("[[", "]]").Parse(string(raw))
		if err != nil {
			return err
		}
		var out strings.Builder
		if err := t.Execute(&out, p); err != nil {
			return err
		}
		return write(rel, []byte(out.String()))
	})
	if err != nil {
		return nil, err
	}
	err = fs.WalkDir(sdk.Source, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(name, "_test.go") {
			return err
		}
		data, err := sdk.Source.ReadFile(name)
		if err != nil {
			return err
		}
		return write(path.Join(SDKDir, name), data)
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	return files, nil
}

// Split parts the files Write wrote into the project's own and the count
// of the SDK's (copied under SDKDir).
func Split(files []string) (own []string, sdkFiles int) {
	for _, f := range files {
		if strings.HasPrefix(f, SDKDir+"/") {
			sdkFiles++
			continue
		}
		own = append(own, f)
	}
	return own, sdkFiles
}
