package kafkax

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// What a stage does with an error from Kafka. With replication a node's
// death, a pause or a restart is routine: leaders and coordinators move,
// connections are refused for a while, a group member times out. Those
// errors are retriable: the stage aborts its open transaction, backs off
// and tries again (rejoining its group when it was dropped). Only a fence
// (another incarnation took over), a refused authorisation or login, or an
// error that says the request itself is wrong ends the process. The
// transformer, the MQTT bridge, the extractors and the re-encryption sweep
// share this one classification.

// Retriable reports whether err is a passing condition of the cluster that
// aborting the open transaction and trying again can get past. An error
// this function does not recognise is not retriable: ending the process
// is the safe default for what nobody anticipated.
func Retriable(err error) bool {
	if err == nil || Fatal(err) {
		return false
	}
	if ke, ok := errors.AsType[*kerr.Error](err); ok {
		switch ke {
		case kerr.TransactionAbortable, kerr.OperationNotAttempted, kerr.UnknownProducerID,
			kerr.UnknownMemberID, kerr.IllegalGeneration, kerr.RebalanceInProgress,
			kerr.UnknownServerError, kerr.InvalidTxnState, kerr.InvalidProducerIDMapping:
			// InvalidTxnState: the coordinator moved while a marker was
			// being written, or an abort raced a timeout; the abort and a
			// fresh transaction settle it. InvalidProducerIDMapping: the
			// transactional ID expired while idle; aborting re-initialises
			// the producer.
			return true
		}
		return ke.Retriable
	}
	switch {
	case errors.Is(err, kgo.ErrRecordTimeout), errors.Is(err, kgo.ErrRecordRetries),
		errors.Is(err, kgo.ErrAborting),
		errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.ECONNABORTED), errors.Is(err, syscall.EPIPE),
		errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH),
		errors.Is(err, os.ErrDeadlineExceeded):
		return true
	}
	if _, ok := errors.AsType[*net.OpError](err); ok {
		return true // a dial or a read of a node that went away
	}
	if _, ok := errors.AsType[*kgo.ErrFirstReadEOF](err); ok {
		return true
	}
	return kgo.IsRetryableBrokerErr(err)
}

// Fatal reports whether err must end the process whatever else it wraps:
// this incarnation was fenced by a newer one (of its transactional ID or
// its static group member), the cluster refused it an authorisation, or
// the client was closed under it.
func Fatal(err error) bool {
	if err == nil {
		return false
	}
	for _, f := range []error{
		kerr.ProducerFenced, kerr.InvalidProducerEpoch, kerr.FencedInstanceID, kerr.FencedMemberEpoch,
		kerr.TransactionalIDAuthorizationFailed, kerr.TopicAuthorizationFailed, kerr.GroupAuthorizationFailed,
		kerr.ClusterAuthorizationFailed, kerr.SaslAuthenticationFailed,
		kgo.ErrClientClosed, context.Canceled,
	} {
		if errors.Is(err, f) {
			return true
		}
	}
	return false
}

// Fenced reports whether err says a newer incarnation took this one's
// place: its transactional ID was initialised again, or its static group
// member's instance ID joined from elsewhere.
func Fenced(err error) bool {
	return errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch) ||
		errors.Is(err, kerr.FencedInstanceID)
}

// Backoff is a bounded exponential backoff with jitter for retrying
// against the cluster: Min after the first failure, doubling to Max.
// The zero value backs off from 100 ms to 5 s.
type Backoff struct {
	Min, Max time.Duration
	attempt  int
}

// Next returns the wait before the next attempt and counts the attempt.
func (b *Backoff) Next() time.Duration {
	lo, hi := b.Min, b.Max
	if lo <= 0 {
		lo = 100 * time.Millisecond
	}
	if hi <= 0 {
		hi = 5 * time.Second
	}
	d := lo << min(b.attempt, 16)
	if d <= 0 || d > hi {
		d = hi
	}
	b.attempt++
	// Up to a quarter less, so replicas that failed together do not
	// retry in lockstep.
	return d - time.Duration(rand.Int64N(int64(d)/4+1))
}

// Attempts is the number of failures since the last Reset.
func (b *Backoff) Attempts() int { return b.attempt }

// Reset starts over after a success.
func (b *Backoff) Reset() { b.attempt = 0 }

// Wait logs what failed and that it is retried, then sleeps the next
// backoff. It returns ctx's error if ctx ends first.
func (b *Backoff) Wait(ctx context.Context, log *slog.Logger, what string, err error) error {
	d := b.Next()
	LogRetry(log, what, err, b.attempt, d)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// LogRetry logs, in the words every stage uses, that what failed on a
// retriable error and is tried again in d (attempt counts the failures in
// a row; d 0: franz-go retries by itself); more key-value pairs may
// follow.
func LogRetry(log *slog.Logger, what string, err error, attempt int, d time.Duration, more ...any) {
	if log == nil {
		return
	}
	args := []any{"error", err, "attempt", attempt}
	if d > 0 {
		args = append(args, "retry_in", d.Round(time.Millisecond))
	}
	log.Warn(what+" failed; the cluster is unavailable or changing, retrying", append(args, more...)...)
}

// StaticMember makes a group member static (KIP-345): its group.instance.id
// is the stage's --client-id, so a restarted process takes its own place
// and its own partitions back at once, without a rebalance of the others
// and without waiting for the session of its previous incarnation to
// expire, as Kafka Streams recommends for StatefulSets. Two processes with
// the same client id fence each other (FENCED_INSTANCE_ID), which Fatal
// treats as the end of the older one.
func StaticMember(clientID string) kgo.Opt { return kgo.InstanceID(clientID) }
