// Package uitest holds what the tests of every printing path share: the
// corpus of hostile strings (internal/ui/testdata/hostile.txt) and the
// check that output carries no raw control.
package uitest

import (
	"bufio"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// Hostile returns the corpus, each line unquoted.
func Hostile(tb testing.TB) []string {
	tb.Helper()
	_, file, _, _ := runtime.Caller(0)
	f, err := os.Open(filepath.Join(filepath.Dir(file), "..", "testdata", "hostile.txt"))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		s, err := strconv.Unquote(line)
		if err != nil {
			tb.Fatalf("hostile.txt: %s: %v", line, err)
		}
		out = append(out, s)
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	return out
}

// RawControl returns the offset of the first byte of s a terminal could
// take as a control, or -1: a rune that is not printable (C0 with ESC,
// DEL, C1, format characters), or a byte that is not UTF-8. allow lists
// the controls the caller lets through (line feeds in a message). Colour
// sequences a test asked for are the caller's to strip first.
func RawControl(s, allow string) int {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 || !unicode.IsPrint(r) && !strings.ContainsRune(allow, r) {
			return i
		}
		i += n
	}
	return -1
}
