package transformer

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/devenv/devenvtest"
	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/lineage"
)

// A commit sent with the generation a cooperative rebalance just ended is
// refused (ILLEGAL_GENERATION) and sent again, in the same transaction,
// once the member knows its new generation; a member that learns of none
// gets the refusal back after generationWait.
func TestCommitOffsetsFollowsANewGeneration(t *testing.T) {
	env := devenvtest.Start(t)
	admin := devenvtest.KafkaClient(t, env)
	adm := kadm.NewClient(admin)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := kafkax.CreateTopic(ctx, adm, "in", 1, nil); err != nil {
		t.Fatal(err)
	}
	member := devenvtest.KafkaClient(t, env, kgo.ConsumerGroup("g"), kgo.ConsumeTopics("in"))
	devenvtest.Joined(t, member)
	current := func() groupGeneration {
		id, gen := member.GroupMetadata()
		return groupGeneration{MemberID: id, Generation: gen}
	}
	stale := current()
	stale.Generation--

	commit := func(txnID string, gen func() groupGeneration, offset int64) error {
		t.Helper()
		prod := devenvtest.KafkaClient(t, env, kgo.TransactionalID(txnID), kgo.DefaultProduceTopic("in"), kgo.MaxVersions(taskProducerVersions()))
		if err := prod.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		err := commitOffsets(ctx, prod, txnID, "g", gen, map[string]map[int32]int64{"in": {0: offset}}, lineage.OffsetMetadata(1))
		end := kgo.TryCommit
		if err != nil {
			end = kgo.TryAbort
		}
		if eerr := prod.EndTransaction(ctx, end); eerr != nil {
			t.Fatal(eerr)
		}
		return err
	}
	committed := func() int64 {
		t.Helper()
		offs, err := adm.FetchOffsets(ctx, "g")
		if err != nil {
			t.Fatal(err)
		}
		o, _ := offs.Lookup("in", 0)
		return o.At
	}

	calls := 0
	refreshed := func() groupGeneration { // the rebalance's news arrives after the first send
		calls++
		if calls == 1 {
			return stale
		}
		return current()
	}
	if err := commit("tx-a", refreshed, 7); err != nil {
		t.Fatalf("a commit whose member learned its new generation: %v", err)
	}
	if at := committed(); at != 7 || calls < 2 {
		t.Fatalf("committed offset %d after %d generation reads, want 7 after the retry", at, calls)
	}

	generationWait = 300 * time.Millisecond
	t.Cleanup(func() { generationWait = 5 * time.Second })
	start := time.Now()
	err := commit("tx-b", func() groupGeneration { return stale }, 9)
	if !errors.Is(err, kerr.IllegalGeneration) {
		t.Fatalf("a member that never learns a new generation: %v, want ILLEGAL_GENERATION", err)
	}
	if took := time.Since(start); took < generationWait {
		t.Errorf("gave up after %s, before generationWait", took)
	}
	if at := committed(); at != 7 {
		t.Errorf("committed offset %d after the refused commit, want 7 still", at)
	}
}
