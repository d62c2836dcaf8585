package stage

import (
	"context"
	"errors"
	"net"
	"syscall"

	"github.com/twmb/franz-go/pkg/kerr"
)

// failureClass says what a task's failure means for the stage. classify is
// the one place the runner decides it.
//
// Today every failure ends the run (exit 1; the restart recovers). A
// retriable one need not: a task's store and state cache only ever hold
// committed state, and its transactions are independent of the other
// tasks', so a task can abort what it has open (task.abortAll), have its
// partition sought back to the group's committed offsets and go on — or
// restart its lease (fence, restore) — without a process exit.
type failureClass int

const (
	// classFatal: retrying cannot help. The producer was fenced by a newer
	// owner of the task (a zombie must stop), a record is invalid under
	// invalid_messages: crash, the transformer failed, or Kafka refused
	// for good (authorization, a bad request).
	classFatal failureClass = iota
	// classRetriable: Kafka was briefly unavailable — a leader or a
	// coordinator moved, a broker was unreachable or slow, the group
	// rebalanced under a commit.
	classRetriable
)

func (c failureClass) String() string {
	if c == classRetriable {
		return "retriable"
	}
	return "fatal"
}

// classify sorts a task's failure.
func classify(err error) failureClass {
	var invalid *InvalidMessageError
	switch {
	case err == nil:
		return classFatal
	case errors.As(err, &invalid),
		errors.Is(err, kerr.ProducerFenced), errors.Is(err, kerr.InvalidProducerEpoch),
		errors.Is(err, kerr.FencedInstanceID), errors.Is(err, kerr.TransactionalIDAuthorizationFailed),
		errors.Is(err, kerr.GroupAuthorizationFailed), errors.Is(err, kerr.TopicAuthorizationFailed):
		return classFatal
	case errors.Is(err, kerr.UnknownMemberID), errors.Is(err, kerr.IllegalGeneration),
		errors.Is(err, kerr.RebalanceInProgress), errors.Is(err, kerr.ConcurrentTransactions):
		return classRetriable
	case kerr.IsRetriable(err), errors.Is(err, context.DeadlineExceeded), errors.Is(err, syscall.ECONNREFUSED):
		return classRetriable
	}
	var netErr *net.OpError
	if errors.As(err, &netErr) {
		return classRetriable
	}
	return classFatal
}
