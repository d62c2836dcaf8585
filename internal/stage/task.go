package stage

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/stagefile"
	"github.com/flecht-dev/flecht/internal/state"
)

// task is the unit of work for one input partition number: its fenced
// transactional producer and its state store (SPEC §3).
type task struct {
	partition int32
	txnID     string
	prod      *kgo.Client
	store     *state.Store // nil for a stateless transformer
}

// startTask brings up the task for partition p in the order the contract
// requires: init the producer (fencing the previous owner and aborting its
// open transaction), then restore the changelog partition to its end as it
// is now, and only then may the caller resume fetching.
func (r *Runner) startTask(ctx context.Context, p int32) (*task, error) {
	t := &task{partition: p, txnID: stagefile.TransactionalID(r.stage.ApplicationID, p)}
	prod, err := r.cluster.Client(
		kgo.ClientID(r.clientID),
		kgo.TransactionalID(t.txnID),
		kgo.TransactionTimeout(r.txnTimeout),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.MaxVersions(taskProducerVersions()),
		kgo.ProducerLinger(time.Millisecond),
		kgo.RecordRetries(10),
	)
	if err != nil {
		return nil, err
	}
	t.prod = prod
	start := time.Now()
	if _, _, err := prod.ProducerID(ctx); err != nil {
		t.close()
		return nil, fmt.Errorf("task %d: initializing producer %s (fencing): %w", p, t.txnID, err)
	}
	r.log.Debug("task fenced", "partition", p, "transactional_id", t.txnID, "took", time.Since(start))
	if r.stateful {
		store, err := state.Open(filepath.Join(r.stateDir, strconv.Itoa(int(p))), r.log)
		if err != nil {
			t.close()
			return nil, err
		}
		t.store = store
		n, err := state.Restore(ctx, r.admin, r.changelog, p, store)
		if err != nil {
			t.close()
			return nil, fmt.Errorf("task %d: %w", p, err)
		}
		r.obs.Restored(p, n)
		r.log.Debug("task restored", "partition", p, "changelog_records", n, "took", time.Since(start))
	}
	return t, nil
}

// close releases the task: its producer and its local state (wiped; the
// next owner restores from the changelog).
func (t *task) close() {
	if t.prod != nil {
		t.prod.Close()
	}
	if t.store != nil {
		_ = t.store.Destroy()
	}
}
