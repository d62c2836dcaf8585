package stage

import (
	"os"
	"path/filepath"

	"github.com/flecht-dev/flecht/internal/stagefile"
)

// DefaultStateDir is ${XDG_STATE_HOME:-~/.local/state}/flecht/<application_id>,
// or "" for an id that is not one plain path element (stagefile refuses
// those): "" names no directory, and the runner and lease.Start refuse it,
// where a joined ".." would have named the state root's parent.
func DefaultStateDir(applicationID string) string {
	base := os.Getenv("XDG_STATE_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			home = os.TempDir()
		}
		base = filepath.Join(home, ".local", "state")
	}
	dir, err := stagefile.JoinName(filepath.Join(base, "flecht"), applicationID)
	if err != nil {
		return ""
	}
	return dir
}
