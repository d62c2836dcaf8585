package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A real `go test -json` run of a small module whose tests (in a package
// below the module's root) log, fail
// through a helper, fail with a multi-line message and fail in a subtest:
// the summary holds exactly the error lines, and the notes only once
// (streamed, above it).
func TestSummaryOfARealRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go test on a generated module")
	}
	dir := t.TempDir()
	write(t, dir, "go.mod", "module example.com/m\n\ngo 1.22\n")
	write(t, dir, "sub/m_test.go", `package m

import "testing"

func check(t *testing.T, ok bool) {
	t.Helper()
	if !ok {
		t.Errorf("helper: condition broken")
	}
}

func TestPasses(t *testing.T) { t.Log("a note of a passing test") }

func TestFails(t *testing.T) {
	t.Logf("note one")
	t.Errorf("first failure\nits second line")
	t.Log("note two")
	check(t, false)
	t.Fatal("the end")
}

func TestSub(t *testing.T) {
	t.Run("inner", func(t *testing.T) {
		t.Log("inner note")
		t.Error("inner failure")
	})
}
`)
	got := reportOfRealRun(t, dir, false, "./...")
	i := strings.Index(got, "=== what failed (3 tests")
	if i < 0 {
		t.Fatalf("no summary of 3 failed tests in:\n%s", got)
	}
	streamed, summary := got[:i], got[i:]
	for _, note := range []string{"a note of a passing test", "note one", "note two", "inner note"} {
		if !strings.Contains(streamed, note) {
			t.Errorf("the streamed output lacks %q", note)
		}
		if strings.Contains(summary, note) {
			t.Errorf("the summary holds the note %q:\n%s", note, summary)
		}
	}
	for _, want := range []string{"--- FAIL: TestFails", "first failure", "its second line", "helper: condition broken", "the end", "--- FAIL: TestSub/inner", "inner failure", "--- FAIL: TestSub "} {
		if !strings.Contains(summary, want) {
			t.Errorf("the summary lacks %q:\n%s", want, summary)
		}
	}
	if strings.Contains(summary, "no line names an error call") {
		t.Errorf("a fallback in the summary, where every failure has its error line:\n%s", summary)
	}
}

// A package that times out names no test as failed: the test it was
// running is reported as unfinished, with its last lines and the panic's
// list of running tests, and (under -quiet) its dump is printed.
func TestTimeoutNamesTheUnfinishedTest(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go test on a generated module")
	}
	dir := t.TempDir()
	write(t, dir, "go.mod", "module example.com/m\n\ngo 1.22\n")
	write(t, dir, "m_test.go", `package m

import (
	"testing"
	"time"
)

func TestQuick(t *testing.T) { t.Log("quick") }

func TestHangs(t *testing.T) {
	t.Log("before the hang")
	time.Sleep(time.Minute)
}
`)
	got := reportOfRealRun(t, dir, true, "-timeout", "2s", ".")
	i := strings.Index(got, "--- DID NOT FINISH: TestHangs")
	if i < 0 {
		t.Fatalf("the summary does not name the unfinished test:\n%s", got)
	}
	streamed, summary := got[:i], got[i:]
	if !strings.Contains(streamed, "goroutine ") || !strings.Contains(streamed, "panic: test timed out") {
		t.Errorf("-quiet did not print the unfinished test's dump:\n%s", streamed)
	}
	for _, want := range []string{"before the hang", "running tests:"} {
		if !strings.Contains(summary, want) {
			t.Errorf("the summary lacks %q:\n%s", want, summary)
		}
	}
	if strings.Contains(summary, "goroutine ") || strings.Contains(got, "quick") {
		t.Errorf("want neither the dump in the summary nor the passing test's note anywhere:\n%s", got)
	}
}

func TestQuietPrintsOnlyFailedTests(t *testing.T) {
	stream := strings.Join([]string{
		`{"Action":"run","Package":"p","Test":"TestA"}`,
		`{"Action":"output","Package":"p","Test":"TestA","Output":"    a_test.go:3: passing note\n"}`,
		`{"Action":"pass","Package":"p","Test":"TestA"}`,
		`{"Action":"run","Package":"p","Test":"TestB"}`,
		`{"Action":"output","Package":"p","Test":"TestB","Output":"    a_test.go:7: failing note\n"}`,
		`{"Action":"output","Package":"p","Test":"TestB","Output":"    a_test.go:8: broken\n"}`,
		`{"Action":"fail","Package":"p","Test":"TestB","Elapsed":1.5}`,
		`{"Action":"output","Package":"q","Output":"PASS\n"}`,
		`{"Action":"output","Package":"q","Output":"ok  \tq\t1.0s\n"}`,
		`{"Action":"pass","Package":"q","Elapsed":1}`,
		`{"Action":"output","Package":"p","Output":"FAIL\tp\t2.0s\n"}`,
		`{"Action":"fail","Package":"p","Elapsed":2}`,
	}, "\n")
	src := func(string) lookup {
		return func(file string, n int) (string, bool) {
			return map[int]string{3: `t.Log("passing note")`, 7: `t.Logf("failing note")`, 8: `t.Error("broken")`}[n], true
		}
	}
	var out bytes.Buffer
	r := newReport(&out, src, true)
	if err := r.read(strings.NewReader(stream)); err != nil {
		t.Fatal(err)
	}
	if r.finish() {
		t.Error("finish reported success")
	}
	got := out.String()
	if strings.Contains(got, "passing note") || strings.Contains(got, "PASS\n") || !strings.Contains(got, "ok  \tq") {
		t.Errorf("-quiet: want a passing test's output and its package's PASS left out, its ok line kept:\n%s", got)
	}
	if strings.Count(got, "failing note") != 1 || strings.Count(got, "broken") != 2 || !strings.Contains(got, "FAIL\tp") {
		t.Errorf("want the failed test's output once, its error again in the summary, and the package line:\n%s", got)
	}
}

func TestPanicFallsBackToTheTail(t *testing.T) {
	stream := strings.Join([]string{
		`{"Action":"output","Package":"p","Test":"TestP","Output":"panic: boom\n"}`,
		`{"Action":"output","Package":"p","Test":"TestP","Output":"goroutine 7 [running]:\n"}`,
		`{"Action":"fail","Package":"p","Test":"TestP"}`,
		`{"Action":"fail","Package":"p"}`,
	}, "\n")
	var out bytes.Buffer
	r := newReport(&out, func(string) lookup { return func(string, int) (string, bool) { return "", false } }, false)
	if err := r.read(strings.NewReader(stream)); err != nil {
		t.Fatal(err)
	}
	r.finish()
	summary := out.String()[strings.Index(out.String(), "=== what failed"):]
	if !strings.Contains(summary, "panic: boom") || !strings.Contains(summary, "no line names an error call") {
		t.Errorf("want the panic's tail in the summary:\n%s", summary)
	}
}

func TestPassingRunAndUnfinishedRun(t *testing.T) {
	var out bytes.Buffer
	r := newReport(&out, func(pkg string) lookup { return sourceLines(t.TempDir(), pkg) }, false)
	if err := r.read(strings.NewReader(`{"Action":"pass","Package":"p","Elapsed":1}`)); err != nil {
		t.Fatal(err)
	}
	if !r.finish() || strings.Contains(out.String(), "===") {
		t.Errorf("a passing run: want success and no summary, got:\n%s", out.String())
	}

	out.Reset()
	r = newReport(&out, func(pkg string) lookup { return sourceLines(t.TempDir(), pkg) }, false)
	if err := r.read(strings.NewReader("# example.com/m\n./x.go:1:1: syntax error\n")); err != nil {
		t.Fatal(err)
	}
	if r.finish() {
		t.Error("a stream without a package result reported success")
	}
	if !strings.Contains(out.String(), "syntax error") || !strings.Contains(out.String(), "no package result") {
		t.Errorf("want the raw lines passed through and the missing result named:\n%s", out.String())
	}
}

func write(t *testing.T, dir, name, text string) {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// reportOfRealRun runs go test -json in dir (its tests fail or time out),
// passes the stream through a report and requires finish to say failure.
func reportOfRealRun(t *testing.T, dir string, quiet bool, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"test", "-json", "-count=1"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=", "GOWORK=off")
	stream, _ := cmd.Output() // it fails: its tests do
	var out bytes.Buffer
	r := newReport(&out, func(pkg string) lookup { return sourceLines(dir, pkg) }, quiet)
	if err := r.read(bytes.NewReader(stream)); err != nil {
		t.Fatal(err)
	}
	if r.finish() {
		t.Errorf("finish reported success for go test %v, which fails", args)
	}
	return out.String()
}
