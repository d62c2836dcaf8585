//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestUpstreamRunner: e2e/upstream/run gives the program the very PID the
// test holds (so a signal reaches the program, not a wrapper), the test's
// directory at the same path, the pinned Python, and mounts that exist
// only in the program's own namespace: none shows on the host while it
// runs, and a SIGKILL leaves none behind.
func TestUpstreamRunner(t *testing.T) {
	root := upstreamRoot(t)
	dir := upstreamTempDir(t)
	marker := filepath.Join(dir, "from-inside")
	p := startInRoot(t, "runner probe", []string{dir}, upstreamPython, "-c",
		`import os, sys, time; open(sys.argv[1], "w").write("%d %s" % (os.getpid(), sys.version.split()[0])); time.sleep(600)`, marker)

	var inside string
	waitUntil(t, time.Minute, "the program to write through the bound directory", func() bool {
		p.alive()
		b, err := os.ReadFile(marker)
		inside = string(b)
		return err == nil && strings.Contains(inside, " ")
	})
	pid, version, _ := strings.Cut(inside, " ")
	if pid != strconv.Itoa(p.cmd.Process.Pid) {
		t.Fatalf("the program runs as pid %s, the test holds pid %d: a wrapper is in between", pid, p.cmd.Process.Pid)
	}
	if parts := strings.Split(version, "."); len(parts) < 2 || parts[0] != "3" || atoi(parts[1]) < 12 {
		t.Fatalf("Python %s in the root; flechtwerk 0.17 needs 3.12+", version)
	}
	own, err := os.ReadFile("/proc/" + pid + "/mounts")
	if err != nil {
		t.Fatal(err)
	}
	// (Paths in it are as the program sees them, inside the root.)
	if !strings.Contains(string(own), " "+dir+" ") || !strings.Contains(string(own), " /proc proc ") {
		t.Fatalf("the program's namespace lacks the bind mounts of %s and /proc:\n%s", dir, own)
	}
	requireNoMountsUnder(t, root)

	p.kill()
	if code := p.code; code != 128+9 {
		t.Fatalf("the program ended with %d after SIGKILL, want %d", code, 128+9)
	}
	requireNoMountsUnder(t, root)
	t.Logf("pid %d is Python %s itself; its mounts stayed in its namespace", p.cmd.Process.Pid, version)
}

// requireNoMountsUnder fails when the host's mount table (this process's
// namespace) has anything mounted under dir.
func requireNoMountsUnder(t *testing.T, dir string) {
	t.Helper()
	mounts, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(mounts), "\n") {
		if f := strings.Fields(line); len(f) > 1 && (f[1] == dir || strings.HasPrefix(f[1], dir+"/")) {
			t.Fatalf("%s is mounted on the host: %s", f[1], line)
		}
	}
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		return -1
	}
	return n
}
