package kafkax

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The errors a node's death, pause or restart produces, as franz-go hands
// them to a stage, are retriable; a fence, a refused authorisation, a
// closed client and anything unknown are not.
func TestRetriableAndFatal(t *testing.T) {
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	for _, tc := range []struct {
		err              error
		retriable, fatal bool
	}{
		{fmt.Errorf("produce: unable to dial: %w", dial), true, false},
		{fmt.Errorf("committing: %w", kerr.CoordinatorNotAvailable), true, false},
		{fmt.Errorf("committing: %w", kerr.NotCoordinator), true, false},
		{kerr.NotLeaderForPartition, true, false},
		{kerr.NotEnoughReplicas, true, false},
		{kerr.RequestTimedOut, true, false},
		{fmt.Errorf("TxnOffsetCommit bar-in/1: %w", kerr.UnknownMemberID), true, false},
		{kerr.IllegalGeneration, true, false},
		{kerr.RebalanceInProgress, true, false},
		{kerr.TransactionAbortable, true, false},
		{kerr.OperationNotAttempted, true, false},
		{kerr.UnknownServerError, true, false},
		{kgo.ErrRecordTimeout, true, false},
		{kerr.InvalidProducerIDMapping, true, false},
		{fmt.Errorf("flush: %w", context.DeadlineExceeded), true, false},
		{fmt.Errorf("read: %w", syscall.ECONNRESET), true, false},

		{fmt.Errorf("committing: %w", kerr.ProducerFenced), false, true},
		{kerr.InvalidProducerEpoch, false, true},
		{kerr.FencedInstanceID, false, true},
		{kerr.TopicAuthorizationFailed, false, true},
		{kerr.TransactionalIDAuthorizationFailed, false, true},
		{kgo.ErrClientClosed, false, true},
		{context.Canceled, false, true},

		{kerr.MessageTooLarge, false, false},
		{kerr.InvalidTopicException, false, false},
		{errors.New("state store: disk full"), false, false},
		{nil, false, false},
	} {
		if got := Retriable(tc.err); got != tc.retriable {
			t.Errorf("Retriable(%v) = %v, want %v", tc.err, got, tc.retriable)
		}
		if got := Fatal(tc.err); got != tc.fatal {
			t.Errorf("Fatal(%v) = %v, want %v", tc.err, got, tc.fatal)
		}
	}
	if !Fenced(fmt.Errorf("x: %w", kerr.ProducerFenced)) || Fenced(kerr.TopicAuthorizationFailed) {
		t.Error("Fenced")
	}
}

// Backoff doubles from Min to Max, never above Max, with at most a
// quarter of jitter below, and starts over after Reset.
func TestBackoffIsBounded(t *testing.T) {
	b := Backoff{Min: 100 * time.Millisecond, Max: 2 * time.Second}
	want := []time.Duration{100, 200, 400, 800, 1600, 2000, 2000, 2000}
	for i, w := range want {
		w *= time.Millisecond
		d := b.Next()
		if d > w || d < w*3/4 {
			t.Errorf("attempt %d: %s, want within [%s, %s]", i+1, d, w*3/4, w)
		}
	}
	for range 100 {
		if d := b.Next(); d > 2*time.Second {
			t.Fatalf("%s above Max", d)
		}
	}
	if b.Attempts() != len(want)+100 {
		t.Errorf("attempts %d", b.Attempts())
	}
	b.Reset()
	if d := b.Next(); d > 100*time.Millisecond {
		t.Errorf("after Reset: %s", d)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := (&Backoff{Min: time.Hour, Max: time.Hour}).Wait(ctx, nil, "x", errors.New("y")); !errors.Is(err, context.Canceled) {
		t.Errorf("Wait on a cancelled context: %v", err)
	}
}
