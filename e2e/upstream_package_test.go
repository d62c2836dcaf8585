//go:build e2e

package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestUpstreamSecretPackage runs internal/secret's
// TestUpstreamOpensFlechtValues (keyrings, tokens and signed values flecht's
// secret package makes, judged by the real flechtctl 0.17.0) against the
// root, with FLECHT_UPSTREAM_PYTHON set to e2e/upstream/python. That test
// skips without the variable, so plain `make test` passes on a machine
// without the root; here, in the tier, a missing root fails (upstreamRoot,
// and the wrapper itself exits 1), and a skip or a run of no test fails too.
func TestUpstreamSecretPackage(t *testing.T) {
	root := upstreamRoot(t)
	const name = "TestUpstreamOpensFlechtValues"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "test", "-count=1", "-v", "-run", "^"+name+"$", "./internal/secret/")
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), "FLECHT_UPSTREAM_PYTHON="+upstreamDir("python"), "FLECHT_UPSTREAM_ROOT="+root)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go test -run %s ./internal/secret/: %v\n%s", name, err, out)
	}
	if !strings.Contains(string(out), "--- PASS: "+name+" ") || strings.Contains(string(out), "--- SKIP") {
		t.Fatalf("%s did not run and pass against the root:\n%s", name, out)
	}
	t.Logf("%s passed with FLECHT_UPSTREAM_PYTHON=%s", name, filepath.Join("e2e", "upstream", "python"))
}
