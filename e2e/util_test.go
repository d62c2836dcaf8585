//go:build e2e

package e2e

import (
	"encoding/json"
	"os/exec"
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
