// Command failreport reads `go test -json` on stdin, passes the tests'
// output through as `go test` would print it, and ends with what failed:
// for each failed test, only the lines its t.Error and t.Fatal calls wrote.
//
// The e2e tiers log a great deal (fault timelines, figures), and a CI log
// is often read from its tail; without this, the line that says why a test
// failed can sit hundreds of lines above the end, among its notes.
//
//	go test -json ./... | go run ./e2e/failreport [-root DIR] [-quiet]
//
// A line of test output is judged by the source line it names
// ("file_test.go:123: ..."): a line that calls a Log method is a note,
// anything else is a failure's message. -quiet prints a test's output only
// when it fails, as `go test` without -v does. The exit status is 1 when a
// test or package failed or the stream ended without a package result.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

func main() {
	root := flag.String("root", ".", "the module's root (where go.mod is), to find the tests' source files and tell their error lines from their log lines")
	quiet := flag.Bool("quiet", false, "print a test's output only when it fails")
	flag.Parse()
	r := newReport(os.Stdout, func(pkg string) lookup { return sourceLines(*root, pkg) }, *quiet)
	if err := r.read(os.Stdin); err != nil {
		fmt.Fprintln(os.Stderr, "failreport:", err)
		os.Exit(1)
	}
	if !r.finish() {
		os.Exit(1)
	}
}

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
}

type testKey struct{ pkg, test string }

type failed struct {
	key     testKey
	elapsed float64
	output  []string
	// unfinished: the test never ended (its package timed out, panicked
	// or was killed); its output ends with the panic and goroutine dump.
	unfinished bool
}

type report struct {
	out     io.Writer
	source  func(pkg string) lookup
	quiet   bool
	outputs map[testKey][]string
	started []testKey // in order of their first output
	failed  []failed
	// packages counts package results seen; failedPkgs those that failed.
	packages, failedPkgs int
}

func newReport(out io.Writer, source func(pkg string) lookup, quiet bool) *report {
	return &report{out: out, source: source, quiet: quiet, outputs: map[testKey][]string{}}
}

// read consumes the stream. A line that is not JSON (go test prints some
// build failures that way) is passed through as it is.
func (r *report) read(in io.Reader) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	for sc.Scan() {
		var ev event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil || ev.Action == "" {
			fmt.Fprintln(r.out, sc.Text())
			continue
		}
		r.handle(ev)
	}
	return sc.Err()
}

func (r *report) handle(ev event) {
	key := testKey{ev.Package, ev.Test}
	switch ev.Action {
	case "output", "build-output":
		// A passing package's bare "PASS" line is -v's; go test without
		// -v prints only its "ok" line.
		if !r.quiet || (ev.Test == "" && ev.Output != "PASS\n") {
			fmt.Fprint(r.out, ev.Output)
		}
		if ev.Test != "" {
			if _, seen := r.outputs[key]; !seen {
				r.started = append(r.started, key)
			}
			r.outputs[key] = append(r.outputs[key], ev.Output)
		}
	case "fail":
		if ev.Test == "" {
			r.packages++
			r.failedPkgs++
			r.unfinished(ev.Package)
			return
		}
		r.fail(failed{key: key, elapsed: ev.Elapsed, output: r.outputs[key]})
	case "pass", "skip":
		if ev.Test == "" {
			r.packages++
			return
		}
		delete(r.outputs, key)
	}
}

func (r *report) fail(f failed) {
	if r.quiet {
		for _, line := range f.output {
			fmt.Fprint(r.out, line)
		}
	}
	r.failed = append(r.failed, f)
	delete(r.outputs, f.key)
}

// unfinished fails the tests of pkg that started and never ended: a
// timeout's panic names no test as failed, and its dump is their output.
func (r *report) unfinished(pkg string) {
	for _, key := range r.started {
		if out, open := r.outputs[key]; open && (pkg == "" || key.pkg == pkg) {
			r.fail(failed{key: key, output: out, unfinished: true})
		}
	}
}

func (r *report) hasFailedSubtest(k testKey) bool {
	for _, f := range r.failed {
		if f.key.pkg == k.pkg && strings.HasPrefix(f.key.test, k.test+"/") {
			return true
		}
	}
	return false
}

// finish prints the summary and reports whether everything passed.
func (r *report) finish() bool {
	if r.packages == 0 {
		r.unfinished("")
	}
	ok := r.packages > 0 && r.failedPkgs == 0 && len(r.failed) == 0
	if len(r.failed) > 0 {
		fmt.Fprintf(r.out, "\n=== what failed (%d tests; their error lines, without their notes)\n", len(r.failed))
		for _, f := range r.failed {
			if f.unfinished {
				fmt.Fprintf(r.out, "--- DID NOT FINISH: %s [%s]\n", f.key.test, f.key.pkg)
				for _, line := range beforeDump(f.output) {
					fmt.Fprint(r.out, line)
				}
				continue
			}
			fmt.Fprintf(r.out, "--- FAIL: %s (%.2fs) [%s]\n", f.key.test, f.elapsed, f.key.pkg)
			if r.hasFailedSubtest(f.key) && len(errorLinesOnly(f.output, r.source(f.key.pkg))) == 0 {
				continue // it failed because a subtest did, listed on its own
			}
			for _, line := range errorLines(f.output, r.source(f.key.pkg)) {
				fmt.Fprint(r.out, line)
			}
		}
	}
	if r.packages == 0 {
		fmt.Fprintln(r.out, "\n=== no package result: go test did not finish (a build failure, or it was killed)")
	}
	return ok
}
