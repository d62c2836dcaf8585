//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
)

func decodeJSON[T any](t *testing.T, s string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("decoding JSON: %v\n%s", err, s)
	}
	return v
}

func lookPath(name string) (string, error) { return exec.LookPath(name) }

func command(name string, args ...string) *exec.Cmd { return exec.Command(name, args...) }

// requireKcat fails the test when kcat is missing: a check that silently
// skips its real-client half proves nothing. .ci/run installs it.
func requireKcat(t *testing.T) {
	t.Helper()
	if _, err := lookPath("kcat"); err != nil {
		t.Fatalf("kcat not found (.ci/run installs it: apt-get install kcat): %v", err)
	}
}

// tail keeps the last lines of a process's output for a failure message.
func tail(s string, lines int) string {
	ls := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(ls) > lines {
		ls = append([]string{fmt.Sprintf("… %d lines before", len(ls)-lines)}, ls[len(ls)-lines:]...)
	}
	return strings.Join(ls, "\n")
}
