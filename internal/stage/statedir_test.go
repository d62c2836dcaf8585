package stage_test

import (
	"path/filepath"
	"testing"

	"github.com/flecht-dev/flecht/internal/stage"
)

// The default state directory is made from the application id only when
// the id is one plain path element: for . or .. it is "" (no directory),
// never the state root or its parent, whose numbered subdirectories a
// restore deletes.
func TestDefaultStateDirStaysUnderTheRoot(t *testing.T) {
	root := t.TempDir()
	t.Setenv("XDG_STATE_HOME", root)
	if got := stage.DefaultStateDir("app"); got != filepath.Join(root, "flecht", "app") {
		t.Errorf("app: %s", got)
	}
	for _, id := range []string{".", "..", "../x", "a/b", ""} {
		if got := stage.DefaultStateDir(id); got != "" {
			t.Errorf("%q: %s", id, got)
		}
	}
}
