package cli

import (
	"os"
	"testing"

	"github.com/flecht-dev/flecht/internal/module/moduletest"
)

// TestMain removes the modules the tests built and their compilation
// cache.
func TestMain(m *testing.M) {
	code := m.Run()
	moduletest.Cleanup()
	os.Exit(code)
}
