package exitcode

import (
	"errors"
	"fmt"
	"syscall"
	"testing"
)

func TestCode(t *testing.T) {
	base := errors.New("boom")
	cases := []struct {
		name string
		err  error
		want int
	}{
		{"nil", nil, OK},
		{"plain", base, Failure},
		{"usage", UsageError(base), Usage},
		{"refused", RefusedError(base), Refused},
		{"findings", FindingsError(base), Findings},
		{"wrapped with fmt", fmt.Errorf("ctx: %w", RefusedError(base)), Refused},
		{"outermost wins", UsageError(FindingsError(base)), Usage},
		{"silent", &Silent{Code: 4}, Findings},
		{"silent wrapped", fmt.Errorf("x: %w", &Silent{Code: 3}), Refused},
		{"ctrl-c", fmt.Errorf("x: %w", SignalError(syscall.SIGINT, base)), 130},
		{"sigterm under a usage mark", UsageError(SignalError(syscall.SIGTERM, base)), 143},
	}
	for _, c := range cases {
		if got := Code(c.err); got != c.want {
			t.Errorf("%s: Code = %d, want %d", c.name, got, c.want)
		}
	}
	if Wrap(KindUsage, nil) != nil {
		t.Error("Wrap(nil) must stay nil")
	}
	if !errors.Is(UsageError(base), base) {
		t.Error("a kind must keep the wrapped error reachable")
	}
	if UsageError(base).Error() != "boom" {
		t.Error("a kind must not change the message")
	}
}
