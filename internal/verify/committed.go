package verify

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/lineage"
)

// CommittedOffset is a group's committed offset of one partition with
// the generation its metadata names (lineage.GenerationOf).
type CommittedOffset struct {
	Offset     int64
	Generation int64
	Metadata   string
}

// unstableWait is how long Committed waits for a transaction's pending
// offset commit to complete before it gives up: a commit completes within
// the coordinator's marker round trip, so seconds mean a stuck transaction.
const unstableWait = 30 * time.Second

// Committed fetches group's committed offsets of the partitions, stable
// (KIP-447: a partition whose commit a transaction holds pending answers
// UNSTABLE_OFFSET_COMMIT, and it asks again for those partitions only, so
// a busy stage, always committing some partition, still converges), with
// their metadata. A partition without a commit is absent. Metadata
// without a generation counts as the first (offsets committed before
// lineage, or by another client).
func Committed(ctx context.Context, cl *kgo.Client, group string, partitions map[string][]int32) (map[kafkax.TopicPartition]CommittedOffset, error) {
	out := map[kafkax.TopicPartition]CommittedOffset{}
	deadline := time.Now().Add(unstableWait)
	for len(partitions) > 0 {
		unstable, err := fetchCommitted(ctx, cl, group, partitions, out)
		if err != nil {
			return nil, err
		}
		if len(unstable) > 0 && time.Now().After(deadline) {
			return nil, fmt.Errorf("committed offsets of group %q: a transaction has held a commit pending for %v on %s: %w", group, unstableWait, describe(unstable), kerr.UnstableOffsetCommit)
		}
		partitions = unstable
		if len(unstable) > 0 {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return out, nil
}

func describe(parts map[string][]int32) string {
	var out []string
	for t, ps := range parts {
		for _, p := range ps {
			out = append(out, fmt.Sprintf("%s/%d", t, p))
		}
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

// fetchCommitted asks once, filling out, and returns the partitions whose
// commit is pending.
func fetchCommitted(ctx context.Context, cl *kgo.Client, group string, partitions map[string][]int32, out map[kafkax.TopicPartition]CommittedOffset) (map[string][]int32, error) {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group, req.RequireStable = group, true
	for topic, ps := range partitions {
		t := kmsg.NewOffsetFetchRequestTopic()
		t.Topic, t.Partitions = topic, ps
		req.Topics = append(req.Topics, t)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("fetching the committed offsets of group %q: %w", group, err)
	}
	groupErr := func(code int16) (bool, error) {
		err := kerr.ErrorForCode(code)
		switch {
		case err == nil:
			return false, nil
		case errors.Is(err, kerr.GroupIDNotFound):
			return true, nil // no group: no commit
		}
		return true, fmt.Errorf("fetching the committed offsets of group %q: %w", group, kafkax.NeedsACL(err, "Describe on group "+group))
	}
	if stop, err := groupErr(resp.ErrorCode); stop {
		return nil, err
	}
	unstable := map[string][]int32{}
	put := func(topic string, p int32, at int64, meta *string, code int16) error {
		if err := kerr.ErrorForCode(code); errors.Is(err, kerr.UnstableOffsetCommit) {
			unstable[topic] = append(unstable[topic], p)
			return nil
		} else if err != nil {
			return fmt.Errorf("committed offset of %s/%d in group %q: %w", topic, p, group, err)
		}
		if at < 0 {
			return nil
		}
		c := CommittedOffset{Offset: at}
		if meta != nil {
			c.Metadata = *meta
		}
		g, err := lineage.GenerationOf(c.Metadata)
		if err != nil && !errors.Is(err, lineage.ErrNoGeneration) {
			return fmt.Errorf("committed offset of %s/%d in group %q: %w", topic, p, group, err)
		}
		c.Generation = g
		out[kafkax.TopicPartition{Topic: topic, Partition: p}] = c
		return nil
	}
	for _, g := range resp.Groups { // v8+
		if stop, err := groupErr(g.ErrorCode); stop {
			return nil, err
		}
		for _, t := range g.Topics {
			for _, p := range t.Partitions {
				if err := put(t.Topic, p.Partition, p.Offset, p.Metadata, p.ErrorCode); err != nil {
					return nil, err
				}
			}
		}
	}
	if len(resp.Groups) > 0 {
		// v8+: the client copies the answer into Topics as well.
		return unstable, nil
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := put(t.Topic, p.Partition, p.Offset, p.Metadata, p.ErrorCode); err != nil {
				return nil, err
			}
		}
	}
	return unstable, nil
}
