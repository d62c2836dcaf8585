package transformer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// A task's producer is not the consuming client, so franz-go's
// GroupTransactSession cannot attach the input offsets to its transaction:
// the runner sends AddOffsetsToTxn and TxnOffsetCommit itself, and EndTxn
// when the transaction produced no record (franz-go ends only transactions
// it saw produce). That is only sound while franz-go speaks the classic
// transaction protocol: under KIP-890 part 2 every EndTxn bumps the producer
// epoch, and an EndTxn franz-go did not send would leave it with a stale
// one. Capping these request versions keeps task producers on the classic
// protocol, which every Kafka 4.x broker still serves.
func taskProducerVersions() *kversion.Versions {
	v := kversion.Stable()
	v.SetMaxKeyVersion(int16(kmsg.TxnOffsetCommit), 4)
	v.SetMaxKeyVersion(int16(kmsg.EndTxn), 4)
	return v
}

// groupGeneration is the consumer's group membership, sent with the offset
// commit so that the group coordinator rejects a commit from a member that
// has been replaced (a zombie) even before its producer is fenced.
type groupGeneration struct {
	MemberID   string
	Generation int32
}

// generationWait bounds how long a commit the coordinator refused for its
// generation waits for the consumer to learn the new one: a cooperative
// rebalance bumps the generation while tasks the member keeps go on
// committing, and the member hears of it in its JoinGroup response, a
// moment after the coordinator moved on.
var generationWait = 5 * time.Second

// commitOffsets adds the group's offsets to the producer's open
// transaction, sent with the membership gen says now. A commit refused
// for its generation (ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS) is sent
// again once gen says the member is in a newer one: the transaction is
// still open and whole, and whether this member may still commit for the
// task is the producer fence's to say (the next owner fences it before it
// starts), not the generation's. Every offset carries metadata: the
// lineage generation (lineage.OffsetMetadata).
func commitOffsets(ctx context.Context, prod *kgo.Client, txnID, group string, gen func() groupGeneration, offsets map[string]map[int32]int64, metadata string) error {
	id, epoch, err := prod.ProducerID(ctx)
	if err != nil {
		return fmt.Errorf("producer id: %w", err)
	}
	add := kmsg.NewPtrAddOffsetsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = txnID, id, epoch, group
	if err := retryConcurrent(ctx, func() error {
		resp, err := add.RequestWith(ctx, prod)
		if err != nil {
			return err
		}
		return kerr.ErrorForCode(resp.ErrorCode)
	}); err != nil {
		return fmt.Errorf("AddOffsetsToTxn: %w", err)
	}

	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = txnID, group, id, epoch
	used := gen()
	req.Generation, req.MemberID = used.Generation, used.MemberID
	for topic, parts := range offsets {
		t := kmsg.NewTxnOffsetCommitRequestTopic()
		t.Topic = topic
		for p, off := range parts {
			tp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
			tp.Partition, tp.Offset, tp.LeaderEpoch, tp.Metadata = p, off, -1, &metadata
			t.Partitions = append(t.Partitions, tp)
		}
		req.Topics = append(req.Topics, t)
	}
	send := func() error {
		return retryConcurrent(ctx, func() error {
			resp, err := req.RequestWith(ctx, prod)
			if err != nil {
				return fmt.Errorf("TxnOffsetCommit: %w", err)
			}
			for _, t := range resp.Topics {
				for _, p := range t.Partitions {
					if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
						return fmt.Errorf("TxnOffsetCommit %s/%d: %w", t.Topic, p.Partition, err)
					}
				}
			}
			return nil
		})
	}
	err = send()
	for range 3 {
		if !errors.Is(err, kerr.IllegalGeneration) && !errors.Is(err, kerr.RebalanceInProgress) {
			break
		}
		next, ok := newerGeneration(ctx, gen, used)
		if !ok {
			break
		}
		used = next
		req.Generation, req.MemberID = used.Generation, used.MemberID
		err = send()
	}
	return err
}

// newerGeneration waits up to generationWait for gen to differ from used.
func newerGeneration(ctx context.Context, gen func() groupGeneration, used groupGeneration) (groupGeneration, bool) {
	deadline := time.Now().Add(generationWait)
	for {
		if g := gen(); g != used && g.Generation >= 0 {
			return g, true
		}
		if time.Now().After(deadline) {
			return used, false
		}
		select {
		case <-ctx.Done():
			return used, false
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// endEmptyTransaction commits a transaction that holds only offsets: franz-go
// would skip the EndTxn, leaving it open until the transaction timeout.
func endEmptyTransaction(ctx context.Context, prod *kgo.Client, txnID string) error {
	id, epoch, err := prod.ProducerID(ctx)
	if err != nil {
		return fmt.Errorf("producer id: %w", err)
	}
	end := kmsg.NewPtrEndTxnRequest()
	end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = txnID, id, epoch, true
	return retryConcurrent(ctx, func() error {
		resp, err := end.RequestWith(ctx, prod)
		if err != nil {
			return fmt.Errorf("EndTxn: %w", err)
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return fmt.Errorf("EndTxn: %w", err)
		}
		return nil
	})
}

// retryConcurrent retries while the coordinator is still finishing the
// previous transaction (CONCURRENT_TRANSACTIONS) or loading; any other error
// is returned at once.
func retryConcurrent(ctx context.Context, fn func() error) error {
	backoff := 5 * time.Millisecond
	for {
		err := fn()
		if !errors.Is(err, kerr.ConcurrentTransactions) && !errors.Is(err, kerr.CoordinatorLoadInProgress) &&
			!errors.Is(err, kerr.NotCoordinator) && !errors.Is(err, kerr.CoordinatorNotAvailable) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 500*time.Millisecond)
	}
}
