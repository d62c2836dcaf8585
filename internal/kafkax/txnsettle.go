package kafkax

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TxnSettler lets a transactional producer begin its next transaction only
// once the coordinator has completed the last one. EndTxn is answered as
// soon as the coordinator logged PrepareCommit; it writes the markers and
// CompleteCommit afterwards. A produce of the next transaction that
// arrives before that is refused with CONCURRENT_TRANSACTIONS, and the
// broker (transaction.version 2, where the partition leader adds the
// partition) or the client (before it) retries after a 20 ms backoff.
// Measured on one local node: a produce sent at once after EndTxn took 25
// ms; after waiting here (1–2 ms, a few DescribeTransactions) it took 1 ms.
// A stage that commits back to back (the bridge, the extractors' pages, a
// task whose outputs waited for the commit, the sweep) therefore settles
// before its next produce.
//
// Ended marks a transaction ended; Settle, before the next produce, waits
// for it. A producer that does not produce right away loses nothing to the
// mark.
//
// A broker that cannot describe transactions (too old, or no DESCRIBE
// right on the transactional ID) turns the settler off: the next produce
// then just pays the backoff, as it did without it.
type TxnSettler struct {
	cl    *kgo.Client
	id    string
	ended atomic.Bool
	off   atomic.Bool
}

// NewTxnSettler settles the transactions of cl, whose transactional ID is id.
func NewTxnSettler(cl *kgo.Client, id string) *TxnSettler {
	return &TxnSettler{cl: cl, id: id}
}

// settleBound caps one wait: past it, the markers are slow for a reason
// (a node down), and the produce's own retries take over.
const settleBound = 500 * time.Millisecond

// Ended records that a transaction ended (EndTxn was sent, committing or
// aborting).
func (s *TxnSettler) Ended() {
	if s != nil {
		s.ended.Store(true)
	}
}

// Settle waits until the coordinator has completed the transaction that
// ended last, if one ended since the last Settle: at most settleBound, or
// until ctx ends. It never fails: at worst the next produce waits on the
// broker as it would have anyway.
func (s *TxnSettler) Settle(ctx context.Context) {
	if s == nil || !s.ended.Swap(false) || s.off.Load() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, settleBound)
	defer cancel()
	pause := 100 * time.Microsecond
	for {
		req := kmsg.NewPtrDescribeTransactionsRequest()
		req.TransactionalIDs = []string{s.id}
		resp, err := req.RequestWith(ctx, s.cl)
		if err != nil {
			if ctx.Err() == nil && !Retriable(err) {
				s.off.Store(true)
			}
			return
		}
		if len(resp.TransactionStates) != 1 {
			return
		}
		st := resp.TransactionStates[0]
		if st.ErrorCode != 0 {
			// Not authorised, not the coordinator any more, unknown: the
			// first is for good, the others pass; neither is worth a wait.
			if !Retriable(kerr.ErrorForCode(st.ErrorCode)) {
				s.off.Store(true)
			}
			return
		}
		if st.State != "PrepareCommit" && st.State != "PrepareAbort" {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(pause):
		}
		pause = min(pause*2, 2*time.Millisecond)
	}
}
