package transformer

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/flecht-dev/flecht/internal/kafkax"
)

// failureClass says what a task's failure means for the stage. classify is
// the one place the runner decides it; recovery.go acts on it.
//
// A task's store and state cache only ever hold committed state, and its
// transactions are independent of the other tasks', so a task can abort
// what it has open and start again — fenced anew, restored from its
// changelog partition (which alone knows whether a commit whose answer was
// lost went through), its input sought back to the group's committed
// offsets — while the other tasks go on.
type failureClass int

const (
	// classFatal: retrying cannot help, the process ends (exit 1). A
	// record is invalid under invalid_messages: crash, the transformer
	// (TransformerError, whatever it wraps) or the store failed, another process took this one's --client-id
	// (FENCED_INSTANCE_ID), Kafka refused for good (authorization, a bad
	// request), or an error nobody anticipated.
	classFatal failureClass = iota
	// classRetriable: Kafka was unavailable or changing — a node died or
	// paused, a leader or a coordinator moved, too few replicas were in
	// sync. The task restarts after a backoff.
	classRetriable
	// classOwnership: the task's producer was fenced, or the group no
	// longer knows this member's generation. Either another member owns
	// the task now (this one is a zombie and must stop) or the cluster
	// only said so in passing (a transaction coordinator that moved
	// mid-commit answers PRODUCER_FENCED; a group coordinator that moved
	// can forget a generation): the runner asks the group who owns the
	// task before it restarts it.
	classOwnership
)

func (c failureClass) String() string {
	switch c {
	case classRetriable:
		return "retriable"
	case classOwnership:
		return "ownership"
	}
	return "fatal"
}

// classify sorts a task's failure.
func classify(err error) failureClass {
	var invalid *InvalidMessageError
	var own *TransformerError
	switch {
	case err == nil, errors.As(err, &invalid), errors.As(err, &own), errors.Is(err, kerr.FencedInstanceID):
		return classFatal
	case kafkax.Fenced(err), errors.Is(err, kerr.UnknownMemberID), errors.Is(err, kerr.IllegalGeneration):
		return classOwnership
	case kafkax.Retriable(err):
		return classRetriable
	}
	return classFatal
}

// TransformerError is a failure of the transformer itself: a module's
// error on a record, an answer of it the runner cannot take (an output or
// a state that is not a JSON object, however it got cut short), a
// builtin's error, an instance that does not start. The stage caused it,
// not the cluster: it stops the stage whatever it wraps, even an
// io.ErrUnexpectedEOF that a network read would also return.
type TransformerError struct {
	Err error
}

func (e *TransformerError) Error() string { return e.Err.Error() }
func (e *TransformerError) Unwrap() error { return e.Err }

// transformerFailure marks err, an error out of the transformer, as its
// own (TransformerError); nil stays nil.
func transformerFailure(err error) error {
	if err == nil {
		return nil
	}
	return &TransformerError{Err: err}
}
