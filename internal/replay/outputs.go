package replay

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/flecht-dev/flecht/internal/kafkax"
)

// What a replay does to the topics the stage writes. A rebuild writes
// every output again; unless the operator chose, --execute refuses while
// an output holds records, so that readers never get each record twice
// without anyone having said so.
const (
	// OutputsAsk is no choice yet.
	OutputsAsk = ""
	// OutputsKeep lets the rebuild append: readers see the old records and
	// then the rebuilt ones.
	OutputsKeep = "keep"
	// OutputsTruncate deletes each output's records up to its end before
	// the restart (DeleteRecords), so readers see only the rebuild.
	OutputsTruncate = "truncate"
)

// Output actions in a plan, stable for scripts.
const (
	ActionNone     = "none"     // empty or missing: nothing to duplicate
	ActionKeep     = "keep"     // the rebuild appends
	ActionTruncate = "truncate" // deleted up to its end first
	ActionChoose   = "choose"   // holds records and no choice was made
)

// Output roles: a topic the transform writes, or a dead-letter topic the
// stage's invalid messages go to.
const (
	RoleOutput     = "output"
	RoleDeadLetter = "dead_letter"
)

// OutputTopic is a topic the stage writes, as the request names it.
type OutputTopic struct {
	Topic string
	Role  string
}

// Output is one topic the stage writes, as the plan found it.
type Output struct {
	Topic      string `json:"topic"`
	Role       string `json:"role"`
	Exists     bool   `json:"exists"`
	Partitions int    `json:"partitions"`
	// Records is end - log start summed over its partitions: at most that
	// many records (transaction markers take offsets too).
	Records int64 `json:"records"`
	// Action is none, keep, truncate or choose.
	Action string `json:"action"`
}

// observeOutputs reads each output's partitions and bounds; a missing
// output is not an error (the stage refuses to start without it, and
// there is nothing in it to write twice).
func observeOutputs(ctx context.Context, adm *kadm.Client, outs []OutputTopic) ([]Output, error) {
	if len(outs) == 0 {
		return []Output{}, nil
	}
	names := make([]string, len(outs))
	for i, o := range outs {
		names[i] = o.Topic
	}
	listed, err := kafkax.ListTopicsEach(ctx, adm, names...)
	if err != nil {
		return nil, fmt.Errorf("describing the output topics: %w", err)
	}
	var present []string
	for _, t := range names {
		if d, ok := listed[t]; ok && d.Err == nil {
			present = append(present, t)
		} else if ok && !errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
			return nil, fmt.Errorf("describing output topic %q: %w", t, kafkax.NeedsACL(d.Err, "Describe on topic "+t))
		}
	}
	starts, ends := kadm.ListedOffsets{}, kadm.ListedOffsets{}
	if len(present) > 0 {
		if starts, err = adm.ListStartOffsets(ctx, present...); err == nil {
			err = starts.Error()
		}
		if err == nil {
			if ends, err = adm.ListCommittedOffsets(ctx, present...); err == nil {
				err = ends.Error()
			}
		}
		if err != nil {
			return nil, fmt.Errorf("listing the output topics' offsets: %w", err)
		}
	}
	out := make([]Output, 0, len(outs))
	for _, o := range outs {
		res := Output{Topic: o.Topic, Role: o.Role}
		if d, ok := listed[o.Topic]; ok && d.Err == nil {
			res.Exists, res.Partitions = true, len(d.Partitions)
			for p := range d.Partitions {
				s, _ := starts.Lookup(o.Topic, p)
				e, _ := ends.Lookup(o.Topic, p)
				res.Records += max(0, e.Offset-s.Offset)
			}
		}
		out = append(out, res)
	}
	return out, nil
}

// planOutputs decides each output's action under the chosen policy.
func planOutputs(outs []Output, policy string) []Output {
	out := make([]Output, len(outs))
	for i, o := range outs {
		switch {
		case o.Records == 0:
			o.Action = ActionNone
		case policy == OutputsKeep:
			o.Action = ActionKeep
		case policy == OutputsTruncate:
			o.Action = ActionTruncate
		default:
			o.Action = ActionChoose
		}
		out[i] = o
	}
	return out
}

// OutputRefusal says why --execute may not run for the stage's outputs,
// or "" when it may: an output holds records and no choice was made, or
// the outputs are not known at all.
func (p *Plan) OutputRefusal() string {
	if p.OutputPolicy != OutputsAsk {
		return ""
	}
	if !p.OutputsKnown {
		return "the plan does not know the topics the stage writes, and the rebuild writes each of them again: give -f stage.yaml or --output-topics T,... to see them, or --keep-outputs to let the rebuild append to them"
	}
	var full []string
	for _, o := range p.Outputs {
		if o.Action == ActionChoose {
			full = append(full, fmt.Sprintf("%s (%d records)", o.Topic, o.Records))
		}
	}
	if len(full) == 0 {
		return ""
	}
	return fmt.Sprintf("the rebuild writes every record of %s again, so readers would get each one twice: "+
		"choose --truncate-outputs (delete their records up to the end first; only for topics this stage alone writes), "+
		"--keep-outputs (append, and readers see both), "+
		"or point the stage file's output topics at new versioned topics (such as %s.v2), create them, replay, and move the readers over once the rebuild caught up",
		strings.Join(full, ", "), p.Outputs[0].Topic)
}

// truncating is how many outputs the plan truncates.
func (p *Plan) truncating() int {
	n := 0
	for _, o := range p.Outputs {
		if o.Action == ActionTruncate {
			n++
		}
	}
	return n
}

// truncateOutputs deletes every record of the outputs marked truncate up
// to their end as it is now (the last stable offset: an open transaction
// of another writer keeps its records).
func truncateOutputs(ctx context.Context, adm *kadm.Client, outs []Output) error {
	var topics []string
	for _, o := range outs {
		if o.Action == ActionTruncate {
			topics = append(topics, o.Topic)
		}
	}
	ends, err := adm.ListCommittedOffsets(ctx, topics...)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return fmt.Errorf("listing the output topics' ends: %w", err)
	}
	to := kadm.Offsets{}
	ends.Each(func(o kadm.ListedOffset) {
		to.Add(kadm.Offset{Topic: o.Topic, Partition: o.Partition, At: o.Offset})
	})
	resp, err := adm.DeleteRecords(ctx, to)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		return fmt.Errorf("deleting the records of the output topics %s: %w (a compacted topic refuses it: point the stage at a new versioned topic instead)", strings.Join(topics, ", "), err)
	}
	return nil
}
