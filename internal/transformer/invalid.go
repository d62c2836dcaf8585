package transformer

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/metrics"
	"github.com/flecht-dev/flecht/internal/stagefile"
)

// invalid applies the stage's invalid_messages policy to a record that
// cannot be processed (docs/contract.md §7). skip and dlq return nil and the batch goes
// on (the offset commits with it; a dead letter joins the same
// transaction, with its lineage); crash returns the error that stops the stage. The outcome
// label is upstream's: crash counts as raised, skip as skipped, and dlq as
// flecht's own dead_lettered.
func (r *Runner) invalid(ctx context.Context, rec *kgo.Record, reason string, t *task) error {
	switch r.stage.InvalidMessages {
	case stagefile.InvalidSkip:
		r.obs.Invalid(metrics.OutcomeSkipped, rec.Topic)
		r.log.Warn("invalid message skipped", "topic", rec.Topic, "partition", rec.Partition, "offset", rec.Offset, "error", reason)
		return nil
	case stagefile.InvalidDLQ:
		r.obs.Invalid(metrics.OutcomeDeadLettered, rec.Topic)
		r.log.Warn("invalid message sent to dead-letter topic", "topic", rec.Topic, "partition", rec.Partition, "offset", rec.Offset, "dlq", stagefile.DLQTopic(rec.Topic), "error", reason)
		out, err := deadLetter(rec, reason, time.Now()).Record(ctx, r.counts)
		if err != nil {
			return err
		}
		t.stamp.stamp(out, rec)
		if out, err = r.fitDeadLetter(out, rec); err != nil {
			return err
		}
		t.produce(out)
		return nil
	default:
		r.obs.Invalid(metrics.OutcomeRaised, rec.Topic)
		return &InvalidMessageError{Topic: rec.Topic, Partition: rec.Partition, Offset: rec.Offset, Reason: reason}
	}
}

// InvalidMessageError stops a stage whose policy is crash.
type InvalidMessageError struct {
	Topic     string
	Partition int32
	Offset    int64
	Reason    string
}

func (e *InvalidMessageError) Error() string {
	return fmt.Sprintf("invalid message at %s/%d offset %d: %s (invalid_messages: crash; use skip or dlq to get past it)", e.Topic, e.Partition, e.Offset, e.Reason)
}
