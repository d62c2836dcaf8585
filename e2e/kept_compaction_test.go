//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/state"
)

// On the real broker's log cleaner: a tombstone written after a kept
// store's checkpoint and compacted away before the next start would leave
// its key in a tailed store. The test makes Kafka remove one (a changelog
// with 2 s delete.retention.ms and 300 ms segments), shows that a tail of
// the kept store would keep the deleted key, and that the start instead
// distrusts the checkpoint for its age and restores what a restore from
// scratch holds.
func TestKeptStoreRefusedWhenCompactionPassedIt(t *testing.T) {
	ctx := testCtx(t, 3*time.Minute)
	app := topicName(t, "app")
	changelog := app + "-changelog"
	createTopic(t, changelog, 1, map[string]string{
		"cleanup.policy": "compact", "delete.retention.ms": "2000", "segment.ms": "300",
		"min.cleanable.dirty.ratio": "0.01", "min.compaction.lag.ms": "0",
	})
	owner := client(t, kgo.TransactionalID(app+"-0"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	reader := client(t, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	adm := kadm.NewClient(reader)
	commit := func(kv ...string) {
		t.Helper()
		if err := owner.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < len(kv); i += 2 {
			var v []byte
			if kv[i+1] != "" {
				v = []byte(kv[i+1])
			}
			owner.Produce(ctx, state.ChangelogRecord(changelog, 0, kv[i], v), nil)
		}
		if err := owner.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if err := owner.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatal(err)
		}
		waitStable(t, ctx, adm, changelog)
	}
	bringUp := func(dir string, plan *state.Plan) (*state.Store, state.Plan) {
		t.Helper()
		cl, err := state.DescribeChangelog(ctx, adm, changelog, 0)
		if err != nil {
			t.Fatal(err)
		}
		var s *state.Store
		var p state.Plan
		if plan != nil {
			if s, err = state.Open(dir, nil); err != nil {
				t.Fatal(err)
			}
			p = *plan
		} else if s, p, err = state.Prepare(dir, app, cl, time.Now(), nil); err != nil {
			t.Fatal(err)
		}
		if _, err := state.Restore(ctx, reader, cl, s, p, nil); err != nil {
			t.Fatal(err)
		}
		return s, p
	}
	dump := func(s *state.Store) map[string]string { return storeDump(t, s) }

	commit("gone", `{"seq":1}`, "kept", `{"seq":1}`)
	dir := filepath.Join(t.TempDir(), "0")
	s, _ := bringUp(dir, nil)
	if got := dump(s); got["gone"] != `{"seq":1}` {
		t.Fatalf("the first restore holds %v", got)
	}
	cp, _, err := s.Checkpoint()
	if err != nil {
		t.Fatal(err)
	}
	s.Close()

	// The tombstone, then filler until the cleaner has removed it.
	commit("gone", "", "kept", `{"seq":2}`)
	removed := false
	for i := 0; !removed; i++ {
		if ctx.Err() != nil {
			t.Fatal("Kafka's cleaner did not remove the tombstone within 3 minutes")
		}
		time.Sleep(300 * time.Millisecond)
		commit(fmt.Sprintf("filler-%d", i%5), fmt.Sprintf(`{"i":%d}`, i))
		recs, err := kafkax.ReadToEnd(ctx, reader, changelog)
		if err != nil {
			t.Fatal(err)
		}
		removed = true
		for _, r := range recs {
			if string(r.Key) == "gone" {
				removed = false
			}
		}
	}

	// A tail from the checkpoint keeps gone: wrong.
	naive := filepath.Join(t.TempDir(), "naive")
	if err := os.CopyFS(naive, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	ns, _ := bringUp(naive, &state.Plan{From: cp.Offset, Tail: true})
	if _, ok := dump(ns)["gone"]; !ok {
		t.Error("a tail past the removed tombstone lost gone anyway: the test proves nothing")
	}
	ns.Close()

	// The start distrusts the checkpoint and restores in full: right.
	ks, plan := bringUp(dir, nil)
	defer ks.Close()
	if plan.Tail || !strings.Contains(plan.Why, "delete.retention.ms") {
		t.Fatalf("plan %+v, want a full restore for the changelog's delete.retention.ms", plan)
	}
	scratch, _ := bringUp(filepath.Join(t.TempDir(), "scratch"), nil)
	defer scratch.Close()
	if got, want := dump(ks), dump(scratch); !maps.Equal(got, want) {
		t.Errorf("after the full restore the store holds %v, a restore from scratch %v", got, want)
	}
	if _, ok := dump(ks)["gone"]; ok {
		t.Error("the restored store still holds gone")
	}
}

// waitStable waits until topic's last stable offsets reach its end offsets:
// EndTxn is answered before the commit markers are written, and until they
// are, a restore (which stops at the last stable offset) sees nothing of
// the transaction.
func waitStable(t *testing.T, ctx context.Context, adm *kadm.Client, topic string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ends, err := adm.ListEndOffsets(ctx, topic)
		if err == nil {
			err = ends.Error()
		}
		if err != nil {
			t.Fatal(err)
		}
		stable, err := adm.ListCommittedOffsets(ctx, topic)
		if err == nil {
			err = stable.Error()
		}
		if err != nil {
			t.Fatal(err)
		}
		settled := true
		ends.Each(func(e kadm.ListedOffset) {
			if s, ok := stable.Lookup(e.Topic, e.Partition); !ok || s.Offset < e.Offset {
				settled = false
			}
		})
		if settled {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: last stable offsets %v still behind end offsets %v after 30 s", topic, stable, ends)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
