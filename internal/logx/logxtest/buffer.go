// Package logxtest captures what code under test writes (a stage's log, a
// live view) so that a test can read it meanwhile.
package logxtest

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
)

// Buffer collects output; it is safe to read while the code under test
// writes.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Logger returns a text logger (debug level and up) writing to b.
func (b *Buffer) Logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String is everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// Count is how many lines contain every one of parts.
func (b *Buffer) Count(parts ...string) int {
	n := 0
	for _, line := range strings.Split(b.String(), "\n") {
		if line != "" && containsAll(line, parts) {
			n++
		}
	}
	return n
}

func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
