package main

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// fallbackLines is how much of a failed test's output the summary shows
// when none of its lines names an error call (a panic, a timeout).
const fallbackLines = 40

var (
	// located is the prefix testing puts before each message:
	// indentation, the file's base name and the line.
	located = regexp.MustCompile(`^(\s*)([\w.\-]+\.go):(\d+): `)
	// errorCall and logCall classify the source line a message names. A
	// line that is neither is a call to a helper that called t.Helper:
	// most of those fail the test, so they count as errors.
	errorCall = regexp.MustCompile(`\.(Error|Errorf|Fatal|Fatalf|Fail|FailNow)\(`)
	logCall   = regexp.MustCompile(`(?i)\blog\w*\(`)
)

// errorLines picks from a failed test's output the messages written from
// a line that is not a Log call, with their continuation lines (indented
// deeper than the message's first line).
func errorLines(output []string, source lookup) []string {
	if picked := errorLinesOnly(output, source); len(picked) > 0 {
		return picked
	}
	tail := output[max(0, len(output)-fallbackLines):]
	return append([]string{"    (no line names an error call; the test's last lines:)\n"}, tail...)
}

func errorLinesOnly(output []string, source lookup) []string {
	var picked []string
	inEntry, keep := false, false
	indent := 0
	for _, line := range output {
		if m := located.FindStringSubmatch(line); m != nil {
			n, _ := strconv.Atoi(m[3])
			text, found := source(m[2], n)
			inEntry, keep, indent = true, !found || errorCall.MatchString(text) || !logCall.MatchString(text), len(m[1])
			if keep {
				picked = append(picked, line)
			}
			continue
		}
		if inEntry && leading(line) > indent && strings.TrimSpace(line) != "" {
			if keep {
				picked = append(picked, line)
			}
			continue
		}
		inEntry = false
	}
	return picked
}

// beforeDump is an unfinished test's output up to its goroutine dump (its
// last lines and the panic's "running tests" list): the dump itself is in
// the stream above.
func beforeDump(output []string) []string {
	end := len(output)
	for i, line := range output {
		if strings.HasPrefix(line, "goroutine ") {
			end = i
			break
		}
	}
	return output[max(0, end-fallbackLines):end]
}

func leading(line string) int {
	return len(line) - len(strings.TrimLeft(line, " \t"))
}

// lookup returns line n of a file, named by its base name as test output
// names it, or false when there is no such line.
type lookup func(file string, n int) (string, bool)

// sourceLines returns the lookup for one package's directory: root, the
// directory of the module's go.mod, joined with the package path below the
// module path. Each file is read once.
func sourceLines(root, pkg string) lookup {
	dir := root
	if module := modulePath(root); module != "" && strings.HasPrefix(pkg, module+"/") {
		dir = filepath.Join(root, filepath.FromSlash(strings.TrimPrefix(pkg, module+"/")))
	}
	var mu sync.Mutex
	files := map[string][]string{}
	return func(file string, n int) (string, bool) {
		mu.Lock()
		defer mu.Unlock()
		lines, seen := files[file]
		if !seen {
			lines = readLines(filepath.Join(dir, file))
			files[file] = lines
		}
		if n < 1 || n > len(lines) {
			return "", false
		}
		return lines[n-1], true
	}
}

func readLines(path string) []string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return lines
}

func modulePath(root string) string {
	for _, line := range readLines(filepath.Join(root, "go.mod")) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}
