//go:build unix

package boundedread_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flecht-dev/flecht/internal/boundedread"
	"github.com/flecht-dev/flecht/internal/boundedread/hostile"
	"github.com/flecht-dev/flecht/internal/exitcode"
)

func mkfifo(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// A named pipe is read to its end, like `--password-file <(pass show x)`;
// one without a writer reads as empty rather than waiting for one.
func TestPipesAreRead(t *testing.T) {
	p := mkfifo(t)
	if b, err := stageKind.ReadFile(p); err != nil || len(b) != 0 {
		t.Errorf("no writer: %q %v", b, err)
	}
	w, err := os.OpenFile(p, os.O_RDWR, 0) // a writer that stays
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(50 * time.Millisecond)
		w.WriteString("application_id: a\n")
		w.Close()
	}()
	if b, err := stageKind.ReadFile(p); err != nil || string(b) != "application_id: a\n" {
		t.Errorf("with a writer: %q %v", b, err)
	}
	// Where only a regular file makes sense, a pipe is refused unread.
	k := stageKind
	k.Regular = true
	if _, err := k.ReadFile(p); !errors.Is(err, boundedread.ErrNotRegular) || !strings.Contains(err.Error(), "is a named pipe") {
		t.Errorf("regular only: %v", err)
	}
}

// A pipe whose writer never writes nor closes is read until SIGTERM or
// SIGINT, which ends the read at once with an error naming the file and the
// signal: the first signal, not a second that kills the process.
func TestSignalEndsAPipeRead(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		p := mkfifo(t)
		w, err := os.OpenFile(p, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		err = hostile.Interrupt(t, sig, func() error {
			_, err := stageKind.ReadFile(p)
			return err
		})
		var e *boundedread.Error
		if !errors.Is(err, boundedread.ErrInterrupted) || !errors.As(err, &e) || e.Signal != sig ||
			!strings.Contains(err.Error(), "stage file "+p+": reading stopped by a signal") {
			t.Errorf("%v: %v", sig, err)
		}
		if got, want := exitcode.Code(err), 128+int(sig); got != want {
			t.Errorf("%v: exit %d, want %d", sig, got, want)
		}
	}
}
