//go:build unix

package cli

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/flecht-dev/flecht/internal/boundedread/hostile"
)

// A --config that is a named pipe whose writer never writes is read until
// the first SIGTERM, which ends the command at once with an error naming
// the file: it needed a second signal, which killed the process.
func TestConfigPipeEndsOnTheFirstSignal(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "config.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	w, err := os.OpenFile(fifo, os.O_RDWR, 0) // a writer that stays silent
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	r := hostile.Interrupt(t, syscall.SIGTERM, func() result { return run(t, nil, "", "--config", fifo, "profile", "list") })
	if r.code == 0 || !strings.Contains(r.err, "config file "+fifo+": reading stopped by a signal") {
		t.Errorf("exit %d %q", r.code, r.err)
	}
}
