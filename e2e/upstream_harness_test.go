//go:build e2e

package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// The upstream interop tier: the real flechtwerk 0.17.0 and flechtctl
// 0.17.0 (from the package index, pinned in e2e/upstream/requirements.txt)
// run beside flecht against the same broker, keyrings and topics. They
// need Python 3.12+, so they run in a Debian 13 root that `make upstream`
// builds (e2e/upstream/build.sh), through e2e/upstream/run: a private
// mount namespace per process, so nothing stays mounted after a test, even
// after a SIGKILL.
//
// FLECHT_UPSTREAM_ROOT names the root (make passes it; default
// e2e/.run/upstream/root). A missing or stale root FAILS every TestUpstream
// test; only FLECHT_E2E_SKIP_UPSTREAM=1 (a developer's explicit opt-out,
// never set in CI) skips them.

const upstreamPython = "/opt/fw/bin/python"

var (
	upstreamOnce    sync.Once
	upstreamRootDir string
	upstreamMissing string // why the root cannot be used, or ""
)

// upstreamRoot returns the root the upstream programs run in, failing the
// test (never skipping it) when there is none.
func upstreamRoot(t testing.TB) string {
	t.Helper()
	if os.Getenv("FLECHT_E2E_SKIP_UPSTREAM") == "1" {
		t.Skip("FLECHT_E2E_SKIP_UPSTREAM=1: the upstream interop tier is opted out")
	}
	upstreamOnce.Do(func() {
		upstreamRootDir = envOr("FLECHT_UPSTREAM_ROOT", filepath.Join(repoRoot, "e2e", ".run", "upstream", "root"))
		if os.Geteuid() != 0 {
			upstreamMissing = "the upstream programs run in a chroot, which needs root"
			return
		}
		check := exec.Command(filepath.Join(repoRoot, "e2e", "upstream", "build.sh"), "check", upstreamRootDir)
		if out, err := check.CombinedOutput(); err != nil {
			upstreamMissing = strings.TrimSpace(string(out))
		}
	})
	if upstreamMissing != "" {
		t.Fatalf("upstream interop tier: %s — run make upstream (needs root), or set FLECHT_E2E_SKIP_UPSTREAM=1 to opt out", upstreamMissing)
	}
	return upstreamRootDir
}

func upstreamDir(parts ...string) string {
	return filepath.Join(append([]string{repoRoot, "e2e", "upstream"}, parts...)...)
}

// upstreamCommand builds the command that runs argv inside the root, with
// dirs bound at their own paths (read-write) and e2e/upstream/py read-only,
// in a clean environment. The process it starts is argv's own: run, the
// namespace and chroot all exec.
func upstreamCommand(t testing.TB, dirs []string, argv ...string) *exec.Cmd {
	t.Helper()
	root := upstreamRoot(t)
	args := []string{root}
	for _, d := range dirs {
		args = append(args, "-b", d)
	}
	args = append(args, "-r", upstreamDir("py"), "--", "/usr/bin/env", "-i",
		"PATH=/opt/fw/bin:/usr/bin:/bin", "HOME=/tmp", "LANG=C.UTF-8",
		"PYTHONDONTWRITEBYTECODE=1", "PYTHONUNBUFFERED=1")
	return exec.Command(upstreamDir("run"), append(args, argv...)...)
}

// startUpstream starts a Python program of e2e/upstream/py (a stage) in
// the root; stdout and stderr go to one buffer. The proc's signals reach
// the Python process itself.
func startUpstream(t testing.TB, name string, dirs []string, script string, args ...string) *proc {
	t.Helper()
	return startInRoot(t, name, dirs, append([]string{upstreamPython, upstreamDir("py", script)}, args...)...)
}

// startInRoot starts argv in the root (see upstreamCommand).
func startInRoot(t testing.TB, name string, dirs []string, argv ...string) *proc {
	t.Helper()
	cmd := upstreamCommand(t, dirs, argv...)
	p := &proc{t: t, name: name, cmd: cmd, out: &syncBuffer{}, done: make(chan struct{})}
	p.errs = p.out
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	go func() {
		p.code = exitCode(cmd.Wait())
		close(p.done)
	}()
	t.Cleanup(func() {
		if !p.exited() {
			_ = cmd.Process.Signal(syscall.SIGCONT)
			_ = cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("output of %s (pid %d):\n%s", p.name, cmd.Process.Pid, tail(p.out.String(), 80))
		}
	})
	return p
}

// runUpstream runs a program in the root to its end and returns its
// stdout, stderr and exit code.
func runUpstream(t testing.TB, dirs []string, stdin string, argv ...string) (string, string, int) {
	t.Helper()
	cmd := upstreamCommand(t, dirs, argv...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	code := exitCode(cmd.Run())
	if code < 0 {
		t.Fatalf("running %v in the upstream root failed to start", argv)
	}
	return out.String(), errOut.String(), code
}

// flechtctl runs upstream's command in the root with dir bound in; it
// fails the test unless the exit code is want.
func flechtctl(t testing.TB, dir string, want int, args ...string) string {
	t.Helper()
	out, errOut, code := runUpstream(t, []string{dir}, "", append([]string{"/opt/fw/bin/flechtctl"}, args...)...)
	if code != want {
		t.Fatalf("flechtctl %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, want, out, errOut)
	}
	return out + errOut
}

// flechtOK runs the flecht binary and fails the test unless it exits want.
func flechtOK(t *testing.T, want int, args ...string) string {
	t.Helper()
	out, errOut, code := runFlecht(t, "", args...)
	if code != want {
		t.Fatalf("flecht %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, want, out, errOut)
	}
	return out
}

// upstreamTempDir is a test directory the upstream programs can reach:
// run binds it at the same path inside the root.
func upstreamTempDir(t testing.TB) string {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return dir
}
