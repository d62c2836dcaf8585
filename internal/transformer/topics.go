package transformer

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/stagefile"
)

// prepareTopics checks every topic the stage touches before it joins the
// group, and creates the ones flecht owns (the changelog, dead-letter
// topics) when missing. Errors say which topic and what to do.
func (r *Runner) prepareTopics(ctx context.Context, adm *kadm.Client) error {
	n, err := kafkax.CommonPartitionCount(ctx, adm, r.stage.InputTopics...)
	if err != nil {
		return fmt.Errorf("input topics: %w", err)
	}
	var writes []string // the topics whose record limit the tasks check against
	if len(r.stage.ConfigTopics) > 0 {
		if _, err := kafkax.DescribeTopics(ctx, adm, r.stage.ConfigTopics...); err != nil {
			return fmt.Errorf("config topics: %w", err)
		}
	}
	if d, ok := r.tf.(OutputDeclarer); ok {
		outs := d.OutputTopics()
		details, err := kafkax.DescribeTopics(ctx, adm, outs...)
		if err != nil {
			var missing *kafkax.MissingTopicsError
			if errors.As(err, &missing) {
				return fmt.Errorf("output topics: %w; create them first (flecht does not create output topics)", err)
			}
			return err
		}
		for _, t := range outs {
			r.counts.Set(t, len(details[t].Partitions))
		}
		writes = append(writes, outs...)
	}
	if r.stateful {
		if err := r.ensureOwnTopic(ctx, adm, r.changelog, n, map[string]string{"cleanup.policy": "compact"}, "changelog"); err != nil {
			return err
		}
		writes = append(writes, r.changelog)
	}
	usesDLQ := r.stage.InvalidMessages == stagefile.InvalidDLQ
	if d, ok := r.tf.(DLQUser); ok && d.UsesDLQ() {
		usesDLQ = true
	}
	if usesDLQ {
		for _, t := range r.stage.InputTopics {
			if err := r.ensureOwnTopic(ctx, adm, stagefile.DLQTopic(t), n, nil, "dead-letter topic"); err != nil {
				return err
			}
			writes = append(writes, stagefile.DLQTopic(t))
		}
	}
	// What a task checks each output against (oversize.go) and what its
	// producer enforces are the same limits, read here at every start.
	r.limits = kafkax.NewRecordLimits()
	for t, err := range r.limits.Load(ctx, adm, writes...) {
		r.log.Info("the topic's record size limit does not read: its records are held to the producer's default", "topic", t,
			"limit_bytes", r.limits.Of(t), "error", err, "fix", "grant DescribeConfigs on the topic to hold them to its max.message.bytes")
	}
	return nil
}

// ensureOwnTopic creates a topic flecht owns with the input partition count,
// or checks an existing one has it: partition p of the input maps one to
// one onto partition p of the changelog (and of a dead-letter topic).
func (r *Runner) ensureOwnTopic(ctx context.Context, adm *kadm.Client, topic string, n int, configs map[string]string, what string) error {
	details, err := kafkax.DescribeTopics(ctx, adm, topic)
	var missing *kafkax.MissingTopicsError
	switch {
	case errors.As(err, &missing):
		if err := kafkax.CreateTopic(ctx, adm, topic, int32(n), configs); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		r.log.Info("created "+what, "topic", topic, "partitions", n)
		return nil
	case err != nil:
		return fmt.Errorf("%s: %w", what, err)
	}
	if got := len(details[topic].Partitions); got != n {
		return fmt.Errorf("%s %q has %d partitions but the input topics have %d: partition p of the input must map to partition p of the %s; repartitioning needs a state migration (or a replay: flecht replay %s)",
			what, topic, got, n, what, r.stage.ApplicationID)
	}
	if configs["cleanup.policy"] == "compact" {
		if cfg, err := kafkax.TopicConfigs(ctx, adm, topic); err == nil && cfg["cleanup.policy"] != "compact" {
			r.log.Warn(what+" is not compacted: it will grow without bound", "topic", topic, "cleanup.policy", cfg["cleanup.policy"])
		}
	}
	return nil
}
