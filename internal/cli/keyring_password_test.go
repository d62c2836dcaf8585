package cli

import (
	"os"
	"strings"
	"testing"
)

// A password file that group or others may read opens the keyring, with a
// warning on standard error naming it and chmod 600; a private one warns
// nothing.
func TestKeyringPasswordFileModeWarns(t *testing.T) {
	v := loadCLIVectors(t)
	dir := t.TempDir()
	path := writeKeyringFile(t, dir, "protected.json", v.Protected+"\n")
	pw := writeKeyringFile(t, dir, "pw", v.Password+"\n")
	for _, args := range [][]string{
		{"keys", "list", "--keyring", path, "--password-file", pw},
		{"secrets", "encrypt", "--keyring", path, "--password-file", pw, "--scope", "api", `"v"`},
	} {
		os.Chmod(pw, 0o640)
		r := mustRun(t, nil, "", args...)
		if !strings.Contains(r.err, "warning: password file "+pw+" has mode 0640") || !strings.Contains(r.err, "chmod 600 "+pw) {
			t.Errorf("%v: stderr %q", args[:2], r.err)
		}
		os.Chmod(pw, 0o600)
		if r := mustRun(t, nil, "", args...); strings.Contains(r.err, "warning") {
			t.Errorf("%v: a private file: %q", args[:2], r.err)
		}
	}
}
