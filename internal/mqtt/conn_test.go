package mqtt

import (
	"testing"
	"time"
)

func TestBackoffGrowsUntilAConnectionLasts(t *testing.T) {
	var bo backoff
	var got []time.Duration
	for range 4 {
		got = append(got, bo.wait())
		bo.lasted(time.Second) // kicked off soon after connecting
	}
	want := []time.Duration{25 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("waits %v, want %v", got, want)
		}
	}
	for range 20 {
		bo.wait()
	}
	if d := bo.wait(); d != maxBackoff {
		t.Errorf("capped at %s, want %s", d, maxBackoff)
	}
	bo.lasted(stableAfter)
	if d := bo.wait(); d != firstBackoff {
		t.Errorf("after a stable connection the wait is %s, want %s", d, firstBackoff)
	}
}
