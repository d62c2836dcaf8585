package cli

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/flecht-dev/flecht/internal/boundedread/hostile"
	"github.com/flecht-dev/flecht/internal/exitcode"
)

// One rule for a file too large for its kind, a keyring and a password
// file as a stage file: a usage error (exit 2) that names the file and
// the limit.
func TestTooLargeKeyringFilesAreUsageErrors(t *testing.T) {
	for _, p := range hostile.Paths(t) {
		if p.Missing || p.Name == "directory" {
			continue
		}
		r := run(t, nil, "", "keys", "list", "--keyring", p.Path)
		if r.code != exitcode.Usage || !strings.Contains(r.err, p.Path) || !strings.Contains(r.err, "larger than 16 MiB") {
			t.Errorf("keys list --keyring %s: exit %d %q", p.Name, r.code, r.err)
		}
		r = run(t, nil, "", "keys", "init", "--keyring", filepath.Join(t.TempDir(), "kr.json"), "--kid", "k1", "--protect", "--password-file", p.Path)
		if r.code != exitcode.Usage || !strings.Contains(r.err, "password file "+p.Path) || !strings.Contains(r.err, "larger than") {
			t.Errorf("keys init --password-file %s: exit %d %q", p.Name, r.code, r.err)
		}
		r = run(t, nil, "", "run", "-f", p.Path)
		if r.code != exitcode.Usage {
			t.Errorf("run -f %s: exit %d %q", p.Name, r.code, r.err)
		}
	}
}
