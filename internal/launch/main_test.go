package launch

import (
	"testing"

	"github.com/flecht-dev/flecht/internal/module/moduletest"
)

// TestMain removes the modules the tests built when they are done.
func TestMain(m *testing.M) { moduletest.Main(m) }
