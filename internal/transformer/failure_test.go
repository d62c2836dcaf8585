package transformer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// An invalid record, a transformer's or the store's error, another process
// with this --client-id and anything unknown are fatal however they are
// wrapped; what a node's death, pause or restart produces is retriable; a
// fence and a forgotten group generation ask the group who owns the task.
func TestClassify(t *testing.T) {
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	for _, tc := range []struct {
		err  error
		want failureClass
	}{
		{&InvalidMessageError{Topic: "t", Reason: "not JSON"}, classFatal},
		{fmt.Errorf("transform t/0@1: %w", errors.New("boom")), classFatal},
		{&TransformerError{Err: fmt.Errorf("its new state is not a JSON object: %w", io.ErrUnexpectedEOF)}, classFatal},
		{fmt.Errorf("task 0: %w", &TransformerError{Err: &net.OpError{Op: "read", Err: syscall.ECONNRESET}}), classFatal},
		{fmt.Errorf("state store: %w", errors.New("disk full")), classFatal},
		{fmt.Errorf("unable to join group session: %w", kerr.FencedInstanceID), classFatal},
		{fmt.Errorf("task 0: %w", kerr.TopicAuthorizationFailed), classFatal},
		{fmt.Errorf("task 0: produce: %w", kerr.MessageTooLarge), classFatal},
		{nil, classFatal},

		{fmt.Errorf("task 5: commit: %w", kerr.ProducerFenced), classOwnership},
		{fmt.Errorf("task 1: flush: %w", kerr.InvalidProducerEpoch), classOwnership},
		{fmt.Errorf("task 1: TxnOffsetCommit t/1: %w", kerr.UnknownMemberID), classOwnership},
		{fmt.Errorf("task 1: TxnOffsetCommit t/1: %w", kerr.IllegalGeneration), classOwnership},

		{fmt.Errorf("task 0: produce: unable to dial: %w", dial), classRetriable},
		{fmt.Errorf("task 2: produce: %w", kerr.NotEnoughReplicas), classRetriable},
		{fmt.Errorf("task 0: flush: %w", kerr.NotLeaderForPartition), classRetriable},
		{fmt.Errorf("task 0: commit: %w", kerr.CoordinatorNotAvailable), classRetriable},
		{fmt.Errorf("task 0: commit: %w", kerr.RebalanceInProgress), classRetriable},
		{fmt.Errorf("task 0: flush: %w", context.DeadlineExceeded), classRetriable},
		{fmt.Errorf("task 0: produce: %w", kgo.ErrRecordTimeout), classRetriable},
		{fmt.Errorf("task 0: begin transaction: %w", kerr.TransactionAbortable), classRetriable},
	} {
		if got := classify(tc.err); got != tc.want {
			t.Errorf("classify(%v) = %s, want %s", tc.err, got, tc.want)
		}
	}
}
