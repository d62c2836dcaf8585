package cli

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/flecht-dev/flecht/internal/logx/logxtest"
)

// openPTY opens a pseudo-terminal: the controller end and the terminal a
// child reads as its standard input.
func openPTY(t *testing.T) (controller, tty *os.File) {
	t.Helper()
	controller, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { controller.Close() })
	var unlock int32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, controller.Fd(), syscall.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock))); e != 0 {
		t.Fatal(e)
	}
	var n uint32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, controller.Fd(), syscall.TIOCGPTN, uintptr(unsafe.Pointer(&n))); e != 0 {
		t.Fatal(e)
	}
	tty, err = os.OpenFile("/dev/pts/"+strconv.Itoa(int(n)), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tty.Close() })
	return controller, tty
}

// echoOn reports whether the terminal echoes what is typed.
func echoOn(t *testing.T, tty *os.File) bool {
	t.Helper()
	var tio syscall.Termios
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, tty.Fd(), syscall.TCGETS, uintptr(unsafe.Pointer(&tio))); e != 0 {
		t.Fatal(e)
	}
	return tio.Lflag&syscall.ECHO != 0
}

// A signal at the password prompt restores the terminal and ends the
// process at once, exit 130 for SIGINT and 143 for SIGTERM, as gpg does.
// The first Ctrl-C used to be swallowed by main's handler while the read
// went on, and the second killed the process with echo still off.
func TestSignalAtThePasswordPrompt(t *testing.T) {
	v := loadCLIVectors(t)
	path := writeKeyringFile(t, t.TempDir(), "protected.json", v.Protected+"\n")
	home := t.TempDir() // the child's: it exits through os.Exit, which removes nothing
	for sig, want := range map[syscall.Signal]int{syscall.SIGINT: 130, syscall.SIGTERM: 143} {
		_, tty := openPTY(t)
		if !echoOn(t, tty) {
			t.Fatal("a new terminal without echo")
		}
		var stderr logxtest.Buffer
		cmd := exec.Command(os.Args[0], "-test.run=^TestPromptChild$")
		cmd.Env = append(os.Environ(), "FLECHT_TEST_PROMPT_KEYRING="+path, "FLECHT_TEST_PROMPT_HOME="+home)
		cmd.Stdin, cmd.Stderr = tty, &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		// Signalled once the prompt is shown and echo is off.
		deadline := time.Now().Add(20 * time.Second)
		for !strings.Contains(stderr.String(), "Keyring password: ") || echoOn(t, tty) {
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				t.Fatalf("no prompt: %q", stderr.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
		sent := time.Now()
		cmd.Process.Signal(sig)
		select {
		case err := <-exited:
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != want {
				t.Errorf("%v: %v, want exit %d (stderr %q)", sig, err, want, stderr.String())
			}
			if took := time.Since(sent); took > 2*time.Second {
				t.Errorf("%v: exited after %v", sig, took)
			}
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-exited
			t.Errorf("%v: the prompt went on after the first signal", sig)
		}
		if !echoOn(t, tty) {
			t.Errorf("%v: the terminal was left with echo off", sig)
		}
	}
}

// TestPromptChild is the child of TestSignalAtThePasswordPrompt: flecht's
// main, asking for a protected keyring's password on its terminal.
func TestPromptChild(t *testing.T) {
	path := os.Getenv("FLECHT_TEST_PROMPT_KEYRING")
	if path == "" {
		t.Skip("the child process of TestSignalAtThePasswordPrompt")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	context.AfterFunc(ctx, stop)
	f := NewFactory()
	f.Getenv = func(k string) string {
		if k == "HOME" {
			return os.Getenv("FLECHT_TEST_PROMPT_HOME")
		}
		return ""
	}
	os.Exit(Main(ctx, f, []string{"keys", "list", "--keyring", path}))
}
