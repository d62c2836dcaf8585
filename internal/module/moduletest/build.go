// Package moduletest builds WebAssembly modules for tests: the example
// modules under examples/modules and test modules under a package's
// testdata, with the Go toolchain the tests run with.
package moduletest

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"
)

// Root is the repository's root directory.
func Root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}

var (
	mu    sync.Mutex
	built = map[string]string{}
	dir   string
)

// tempDir is the test binary's directory of built modules, made on first
// use; Cleanup removes it. The caller holds mu.
func tempDir(t testing.TB) string {
	if dir == "" {
		d, err := os.MkdirTemp("", "flecht-modules-")
		if err != nil {
			t.Fatal(err)
		}
		dir = d
	}
	return dir
}

// CacheDir is a compilation cache (module.Options.CacheDir,
// FLECHT_CACHE_DIR) shared by a test binary's tests: a module compiles
// once, not in every test that loads it, which under the race detector
// takes seconds. Cleanup removes it.
func CacheDir(t testing.TB) string {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	cache := filepath.Join(tempDir(t), "cache")
	if err := os.MkdirAll(cache, 0o755); err != nil {
		t.Fatal(err)
	}
	return cache
}

// Example builds examples/modules/<name> and returns the .wasm file.
func Example(t testing.TB, name string) string {
	t.Helper()
	return Build(t, filepath.Join(Root(), "examples", "modules"), "./"+name)
}

// Build builds package pkg of the Go module in moduleDir for wasip1 as a
// reactor (-buildmode=c-shared) and returns the .wasm file; a test binary
// builds each package once.
func Build(t testing.TB, moduleDir, pkg string) string {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	key := filepath.Join(moduleDir, pkg)
	if out, ok := built[key]; ok {
		return out
	}
	// A directory per build, so that modules of one name from two Go
	// modules do not meet.
	outDir := filepath.Join(tempDir(t), strconv.Itoa(len(built)))
	if err := os.Mkdir(outDir, 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(outDir, filepath.Base(pkg)+".wasm")
	cmd := exec.Command("go", "build", "-trimpath", "-buildmode=c-shared", "-o", out, pkg)
	cmd.Dir = moduleDir
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building %s in %s: %v\n%s", pkg, moduleDir, err, b)
	}
	built[key] = out
	return out
}

// Cleanup removes what Build built; call it from TestMain after the tests.
func Cleanup() {
	mu.Lock()
	defer mu.Unlock()
	if dir != "" {
		os.RemoveAll(dir)
		dir, built = "", map[string]string{}
	}
}

// Main runs a test binary's tests and then Cleanup: a package whose
// tests build modules calls it from its TestMain.
func Main(m *testing.M) {
	code := m.Run()
	Cleanup()
	os.Exit(code)
}
