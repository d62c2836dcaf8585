package boundedread_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flecht-dev/flecht/internal/boundedread"
	"github.com/flecht-dev/flecht/internal/boundedread/hostile"
	"github.com/flecht-dev/flecht/internal/exitcode"
)

var stageKind = boundedread.Kind{Name: "stage file", Limit: 4 << 20}

// Every hostile path is refused at once, with an error that names the file
// (and, for a file too large, the limit), as a usage error.
func TestHostilePathsAreRefused(t *testing.T) {
	for _, regular := range []bool{false, true} {
		k := stageKind
		k.Regular = regular
		for _, p := range hostile.Paths(t) {
			start := time.Now()
			b, err := k.ReadFile(p.Path)
			if took := time.Since(start); took > 2*time.Second {
				t.Errorf("%s: took %v", p.Name, took)
			}
			if err == nil {
				t.Errorf("%s (regular %v): read %d bytes", p.Name, regular, len(b))
				continue
			}
			if !strings.Contains(err.Error(), "stage file "+p.Path) {
				t.Errorf("%s: %q does not name the file", p.Name, err)
			}
			if exitcode.Code(err) != exitcode.Usage {
				t.Errorf("%s: exit %d, want 2: %v", p.Name, exitcode.Code(err), err)
			}
			var e *boundedread.Error
			if !errors.As(err, &e) || e.Path != p.Path {
				t.Errorf("%s: %#v", p.Name, err)
			}
			switch {
			case p.Missing:
				if !errors.Is(err, fs.ErrNotExist) || !strings.HasSuffix(err.Error(), ": no such file or directory") {
					t.Errorf("%s: %v", p.Name, err)
				}
			case p.Name == "directory":
				if !errors.Is(err, boundedread.ErrNotRegular) || !strings.Contains(err.Error(), "is a directory") {
					t.Errorf("%s: %v", p.Name, err)
				}
			case regular && strings.Contains(p.Name, "dev-zero"):
				if !errors.Is(err, boundedread.ErrNotRegular) || !strings.Contains(err.Error(), "character device") {
					t.Errorf("%s: %v", p.Name, err)
				}
			default:
				if !errors.Is(err, boundedread.ErrTooLarge) || !strings.Contains(err.Error(), "larger than 4 MiB") {
					t.Errorf("%s: %v", p.Name, err)
				}
			}
		}
	}
}

// A file of exactly the limit is read; one byte more is refused. An empty
// file is empty, not an error.
func TestLimitIsExact(t *testing.T) {
	dir := t.TempDir()
	k := boundedread.Kind{Name: "lock", Limit: 10}
	for size, ok := range map[int]bool{0: true, 10: true, 11: false} {
		p := filepath.Join(dir, "f")
		if err := os.WriteFile(p, make([]byte, size), 0o600); err != nil {
			t.Fatal(err)
		}
		b, err := k.ReadFile(p)
		if (err == nil) != ok || (ok && len(b) != size) {
			t.Errorf("%d bytes: %d %v", size, len(b), err)
		}
		if !ok && !strings.Contains(err.Error(), "larger than 10 bytes") {
			t.Errorf("%d bytes: %v", size, err)
		}
	}
}

// A read error other than these (no permission) names the file but is no
// usage error: the path is right, the system said no.
func TestOtherErrorsNameTheFile(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads every file")
	}
	p := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(p, []byte("x"), 0o000); err != nil {
		t.Fatal(err)
	}
	_, err := stageKind.ReadFile(p)
	if err == nil || exitcode.Code(err) != exitcode.Failure || err.Error() != "stage file "+p+": permission denied" {
		t.Errorf("%v (exit %d)", err, exitcode.Code(err))
	}
}

func TestQuoteClips(t *testing.T) {
	if got := boundedread.Quote("app"); got != `"app"` {
		t.Errorf("short: %s", got)
	}
	long := strings.Repeat("é", 2_000_000) // 4 MB, two bytes a rune
	got := boundedread.Quote(long)
	if len(got) > 100 || !strings.HasSuffix(got, "… (4000000 bytes)") || strings.Contains(got, `\x`) {
		t.Errorf("long: %s", got)
	}
}

func TestModeWarning(t *testing.T) {
	p := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if w := boundedread.ModeWarning("password file", p); w != "" {
		t.Errorf("0600: %s", w)
	}
	os.Chmod(p, 0o644)
	if w := boundedread.ModeWarning("password file", p); w != "password file "+p+" has mode 0644: group or others can access it; run chmod 600 "+p {
		t.Errorf("0644: %s", w)
	}
	if w := boundedread.ModeWarning("password file", filepath.Join(p, "missing")); w != "" {
		t.Errorf("missing: %s", w)
	}
}

func TestSize(t *testing.T) {
	for n, want := range map[int64]string{4 << 20: "4 MiB", 64 << 10: "64 KiB", 100: "100 bytes", 1<<20 + 1: "1048577 bytes"} {
		if got := boundedread.Size(n); got != want {
			t.Errorf("%d: %s", n, got)
		}
	}
}
