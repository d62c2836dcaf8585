package transformer

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/stage"
)

// A record whose output cannot be written for its size is an invalid
// message (docs/contract.md §7). Its fate has to be decided before anything
// of it is produced: a record the producer or the broker refuses fails the
// whole transaction, with the outputs and offsets of every other record in
// it. So each output is checked against the limit its producer enforces
// (the topic's max.message.bytes, kafkax.RecordLimits) before the first is
// produced, and a record with one output too large produces none of them
// and follows invalid_messages inside the transaction that commits its
// offset: crash, skip, or a dead letter that fits its own topic.

// HeaderDLQOmitted, on a dead letter, lists what of the original record
// is left out because the dead letter would not fit its topic otherwise:
// "value", "key,value" or "key,value,headers" (the original's headers).
const HeaderDLQOmitted = "flecht.dlq.omitted"

// outputs makes records of msgs, what rec's transformation emitted, into
// t.outs. reason is why rec is invalid instead ("" when every output
// fits); err is a failure of the stage.
func (r *Runner) outputs(ctx context.Context, t *task, rec *kgo.Record, msgs []stage.Message) (reason string, err error) {
	t.dropOutputs()
	for _, m := range msgs {
		out, err := m.Record(ctx, r.counts)
		if err != nil {
			return "", fmt.Errorf("output of %s/%d@%d: %w", rec.Topic, rec.Partition, rec.Offset, err)
		}
		t.stamp.stamp(out, rec) // before the size check: the headers count
		if reason := r.tooLarge(out, "its output"); reason != "" {
			t.dropOutputs()
			return reason, nil
		}
		t.outs = append(t.outs, out)
	}
	return "", nil
}

// produceOutputs produces what outputs made.
func (r *Runner) produceOutputs(t *task) {
	for _, out := range t.outs {
		r.obs.MessageOut(out.Topic, len(out.Key)+len(out.Value))
		t.produce(out)
	}
	t.dropOutputs()
}

// dropOutputs empties t.outs, keeping no record alive through it.
func (t *task) dropOutputs() {
	clear(t.outs)
	t.outs = t.outs[:0]
}

// tooLarge says why out cannot be written for its size, or "".
func (r *Runner) tooLarge(out *kgo.Record, what string) string {
	size, limit := kafkax.BatchBytes(out), int(r.limits.Of(out.Topic))
	if size <= limit {
		return ""
	}
	return fmt.Sprintf("%s to %s is %d bytes, over the %d bytes a record to %s may have (its max.message.bytes)", what, out.Topic, size, limit, out.Topic)
}

// fitDeadLetter leaves out of a dead letter what keeps it from fitting its
// topic: the original value, then also the key, then also the original
// headers, saying so in HeaderDLQOmitted and in the error header. The dead
// letter still names the original by topic, partition and offset.
func (r *Runner) fitDeadLetter(dl, rec *kgo.Record) (*kgo.Record, error) {
	if r.tooLarge(dl, "") == "" {
		return dl, nil
	}
	limit := r.limits.Of(dl.Topic)
	// deadLetter puts the original's headers first, less their lineage,
	// and its own after them; the lineage stamped on it comes last.
	n := len(rec.Headers) - lineageHeaders(rec.Headers)
	original, ours := dl.Headers[:n], dl.Headers[n:]
	left := []string{fmt.Sprintf("value (%d bytes)", len(rec.Value)), fmt.Sprintf("key (%d bytes)", len(rec.Key)), fmt.Sprintf("%d headers", len(rec.Headers))}
	for i, omitted := range []string{"value", "key,value", "key,value,headers"} {
		try := *dl
		try.Value = nil
		if i >= 1 {
			try.Key = nil
		}
		note := fmt.Sprintf("; the original's %s left out: the dead letter would be over the %d bytes a record to %s may have",
			strings.Join(left[:i+1], ", "), limit, dl.Topic)
		try.Headers = make([]kgo.RecordHeader, 0, len(dl.Headers)+1)
		if i < 2 {
			try.Headers = append(try.Headers, original...)
		}
		for _, h := range ours {
			if h.Key == HeaderDLQError {
				h.Value = append(append([]byte(nil), h.Value...), note...)
			}
			try.Headers = append(try.Headers, h)
		}
		try.Headers = append(try.Headers, kgo.RecordHeader{Key: HeaderDLQOmitted, Value: []byte(omitted)})
		if r.tooLarge(&try, "") == "" {
			return &try, nil
		}
	}
	return nil, fmt.Errorf("the dead letter of %s/%d@%d does not fit %s (at most %d bytes a record) even without the original's key, value and headers",
		rec.Topic, rec.Partition, rec.Offset, dl.Topic, limit)
}

// produceFailure is why a producer or broker refused out. One refused for
// its size despite the check (the topic's limit was lowered after the
// stage started) is named with its size: the transaction fails, and a
// restart reads the limit again and applies invalid_messages to the
// record. Any other failure names the topic (kafkax.ProduceError).
func produceFailure(out *kgo.Record, err error) error {
	if !errors.Is(err, kerr.MessageTooLarge) && !errors.Is(err, kerr.RecordListTooLarge) {
		return kafkax.ProduceError(out.Topic, err)
	}
	return fmt.Errorf("record of %d bytes to %s/%d: %w (the topic's max.message.bytes is lower than when the stage started; a restart reads it again and applies invalid_messages to the record)",
		kafkax.BatchBytes(out), out.Topic, out.Partition, err)
}
