//go:build unix

package hostile

import (
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"
)

// Interrupt runs f, which waits on something that never comes (a pipe
// without data, a held lock), and sends sig to this process until f
// returns, which it must within 10 s; it returns f's result. The process
// catches sig meanwhile, as flecht's main does, so a signal sent before f
// listens is only caught, never fatal to the test.
func Interrupt[T any](t testing.TB, sig syscall.Signal, f func() T) T {
	t.Helper()
	caught := make(chan os.Signal, 1)
	signal.Notify(caught, sig)
	defer signal.Stop(caught)
	done := make(chan T, 1)
	go func() { done <- f() }()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case <-tick.C:
			syscall.Kill(os.Getpid(), sig)
		case v := <-done:
			return v
		case <-deadline:
			t.Fatalf("%v did not end the wait", sig)
		}
	}
}
