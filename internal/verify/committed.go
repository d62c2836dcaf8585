package verify

import (
	"context"
	"errors"
	"fmt"
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
// (KIP-447: a transaction's pending commit answers UNSTABLE_OFFSET_COMMIT,
// and it asks again), with their metadata. A partition without a commit
// is absent. Metadata without a generation counts as the first (offsets
// committed before lineage, or by another client).
func Committed(ctx context.Context, cl *kgo.Client, group string, partitions map[string][]int32) (map[kafkax.TopicPartition]CommittedOffset, error) {
	out := map[kafkax.TopicPartition]CommittedOffset{}
	if len(partitions) == 0 {
		return out, nil
	}
	deadline := time.Now().Add(unstableWait)
	for {
		err := fetchCommitted(ctx, cl, group, partitions, out)
		if !errors.Is(err, kerr.UnstableOffsetCommit) || time.Now().After(deadline) {
			return out, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func fetchCommitted(ctx context.Context, cl *kgo.Client, group string, partitions map[string][]int32, out map[kafkax.TopicPartition]CommittedOffset) error {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group, req.RequireStable = group, true
	for topic, ps := range partitions {
		t := kmsg.NewOffsetFetchRequestTopic()
		t.Topic, t.Partitions = topic, ps
		req.Topics = append(req.Topics, t)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("fetching the committed offsets of group %q: %w", group, err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		if errors.Is(err, kerr.GroupIDNotFound) {
			return nil
		}
		return fmt.Errorf("fetching the committed offsets of group %q: %w", group, kafkax.NeedsACL(err, "Describe on group "+group))
	}
	put := func(topic string, p int32, at int64, meta *string, code int16) error {
		if err := kerr.ErrorForCode(code); err != nil {
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
		if err := kerr.ErrorForCode(g.ErrorCode); err != nil {
			if errors.Is(err, kerr.GroupIDNotFound) {
				return nil
			}
			return fmt.Errorf("fetching the committed offsets of group %q: %w", group, kafkax.NeedsACL(err, "Describe on group "+group))
		}
		for _, t := range g.Topics {
			for _, p := range t.Partitions {
				if err := put(t.Topic, p.Partition, p.Offset, p.Metadata, p.ErrorCode); err != nil {
					return err
				}
			}
		}
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := put(t.Topic, p.Partition, p.Offset, p.Metadata, p.ErrorCode); err != nil {
				return err
			}
		}
	}
	return nil
}
