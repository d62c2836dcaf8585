package stage

import (
	"context"
	"fmt"
	"net"
	"syscall"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// A fence or an invalid record is fatal however it is wrapped; a broker
// or group hiccup is retriable; anything unknown is fatal.
func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want failureClass
	}{
		{fmt.Errorf("task 5: commit: %w", kerr.ProducerFenced), classFatal},
		{fmt.Errorf("task 1: %w", kerr.InvalidProducerEpoch), classFatal},
		{&InvalidMessageError{Topic: "t", Reason: "not JSON"}, classFatal},
		{fmt.Errorf("transform t/0@1: %w", fmt.Errorf("boom")), classFatal},
		{fmt.Errorf("task 1: TxnOffsetCommit t/1: %w", kerr.UnknownMemberID), classRetriable},
		{fmt.Errorf("task 0: flush: %w", kerr.NotLeaderForPartition), classRetriable},
		{fmt.Errorf("task 0: commit: %w", kerr.CoordinatorNotAvailable), classRetriable},
		{fmt.Errorf("task 0: produce: unable to dial: %w", &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}), classRetriable},
		{fmt.Errorf("task 0: %w", context.DeadlineExceeded), classRetriable},
	} {
		if got := classify(tc.err); got != tc.want {
			t.Errorf("classify(%v) = %s, want %s", tc.err, got, tc.want)
		}
	}
}
