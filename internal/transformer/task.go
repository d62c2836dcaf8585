package transformer

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/health"
	"github.com/flecht-dev/flecht/internal/lease"
	"github.com/flecht-dev/flecht/internal/lineage"
	"github.com/flecht-dev/flecht/internal/state"
)

// A task is the worker of one input partition number. It owns the task's
// lease (fenced producer, store) and runs its transactions one after the
// other on its own goroutine:
//
//   - the open transaction collects the records of several polls, for up
//     to the stage's commit_interval or max_transaction_records;
//   - then it is sealed and committed (flush, offsets, EndTxn) on a second
//     goroutine, while the worker goes on decoding and transforming the
//     next records into a new open transaction. Their outputs wait in
//     memory until the commit is done, since a producer holds one
//     transaction at a time; the state they saw is the sealed
//     transaction's, which is the store's once the commit succeeds.
//
// The store is written only after a commit succeeded, so it always holds
// exactly the committed state: a task that aborts (see abort) resumes from
// the group's committed offsets and its own store, with nothing to undo.
type task struct {
	r     *Runner
	lease *lease.Lease
	n     int32

	in   chan taskMsg  // records and requests, in the order they were sent
	done chan struct{} // closed when the worker has stopped
	err  error         // why it stopped, read after done
	// stopping is closed when the worker fails, before it aborts what it
	// holds: from then on the poll loop hands it nothing.
	stopping chan struct{}
	// hasCommitted: a transaction of this worker committed (read after
	// done).
	hasCommitted bool
	// recovered, when set, is the restart this worker ends: its first
	// commit says the task is back.
	recovered *restart

	open   *txn              // collecting records; never nil while running
	sealed *txn              // committing on its own goroutine, or nil
	result chan commitResult // the sealed transaction's outcome
	timer  *time.Timer       // fires when open is due

	cache *stateCache // committed state of recently used keys
	// sink, when set, takes every record the task would produce: a Lane's
	// task, which has no producer and never commits.
	sink func(*kgo.Record)
	// from is the input record whose outputs are being produced.
	from *kgo.Record
	em   emitter       // reused by every Transform call
	outs []*kgo.Record // one record's outputs, checked before any is produced (oversize.go)

	// lineageGen is the generation of the stage's output, read from the
	// task's committed input offsets when it starts and committed back
	// with them (as meta); stamp gives its outputs their lineage headers
	// (lineage.go).
	lineageGen int64
	meta       string
	stamp      stamper

	// A BatchTransformer's instance, and the records queued for its next
	// call (batchcall.go).
	bt        BatchTask
	callCap   int // records per call at most (callCap)
	calls     []Call
	callKeys  map[string]struct{}
	callBytes int

	beat *health.Worker // busy in a step, or waiting for work

	// slowest is the longest one record or one module call took in this
	// task, or in the ones before it on this partition (mustCut).
	slowest time.Duration
	// clockEvery is how many records go by between readings of the clock
	// (took).
	clockEvery int
	// ending is set when the task is asked to end: it takes no more
	// records, so that a revoke or a stop waits for one record at most,
	// not for every record handed to it.
	ending atomic.Bool
	// txnAge is how long the transaction that failed, or the oldest the
	// task held when it failed, had been open (read after done).
	txnAge time.Duration
}

// taskMsg is one message to a task: records of one poll, or a request to
// end (finish or abort) with the answer sent on reply.
type taskMsg struct {
	recs  []*kgo.Record
	batch *batchTracker
	end   endMode
	reply chan error
}

type endMode int

const (
	endNone   endMode = iota
	endFinish         // commit what is open, then stop (revoke, SIGTERM)
	endAbort          // abort what is open, then stop (lost partitions, a failure)
)

// txn is one transaction of a task: what it carries and how far it got.
type txn struct {
	// started: BeginTransaction was called and outputs go straight to the
	// producer; until then they wait in pending.
	started bool
	pending []*kgo.Record
	records int // input records
	opened  time.Time
	states  map[string]*stateEntry
	offsets map[string]int64 // next offset per input topic (partition = task)
	batches []*batchTracker  // the polls it holds records of
	// produced counts outputs given to the producer; firstErr is the first
	// produce failure (set from franz-go's callbacks).
	produced int
	firstErr atomic.Pointer[error]
	// writes is what the store applies once the transaction committed,
	// with the position it brings the store to: the offset after the
	// transaction's last changelog record (set from the produce
	// callbacks), and the time it was sealed, before which nothing after
	// that offset was written.
	writes       []state.Write
	changelogEnd atomic.Int64
	sealedAt     time.Time
}

func newTxn() *txn {
	return &txn{states: map[string]*stateEntry{}, offsets: map[string]int64{}}
}

type commitResult struct {
	err error
}

// taskQueue is how many polls' records may wait for a task: enough to
// keep it busy while the poll loop fetches, little enough that a task that
// falls behind holds the fetching back instead of filling memory.
const taskQueue = 2

// newTask starts the worker of a started lease; recovered is the restart
// it ends, if it is one.
func (r *Runner) newTask(l *lease.Lease, recovered *restart) *task {
	t := &task{
		r: r, lease: l, n: l.N,
		in:         make(chan taskMsg, taskQueue),
		done:       make(chan struct{}),
		stopping:   make(chan struct{}),
		recovered:  recovered,
		open:       newTxn(),
		result:     make(chan commitResult, 1),
		cache:      newStateCache(),
		beat:       r.taskBeat.Add(l.N),
		slowest:    r.slowest[l.N],
		clockEvery: 1,
	}
	go t.run()
	return t
}

// send hands the task records; false if the task has failed or stopped.
func (t *task) send(m taskMsg) bool {
	select {
	case t.in <- m:
		return true
	case <-t.stopping:
		return false
	case <-t.done:
		return false
	}
}

// end asks the task to finish or abort and waits until it has; a task
// that failed meanwhile returns its failure.
func (t *task) end(mode endMode) error {
	t.ending.Store(true)
	reply := make(chan error, 1)
	select {
	case t.in <- taskMsg{end: mode, reply: reply}:
	case <-t.done:
		return t.err
	}
	select {
	case err := <-reply:
		<-t.done
		return err
	case <-t.done:
		return t.err
	}
}

// run is the worker loop. A failure ends it: the open transaction is
// aborted, and the runner hears of it through r.fail.
func (t *task) run() {
	defer close(t.done)
	defer t.beat.Done()
	gen, err := t.r.readGeneration(context.Background(), t.n)
	if err != nil {
		t.fail(err)
		return
	}
	t.lineageGen, t.meta = gen, lineage.OffsetMetadata(gen)
	t.stamp = newStamper(t.r.stage.LineageOn(), t.r.logic, gen)
	if bf := t.r.batchTF; bf != nil {
		bt, err := bf.NewBatchTask(context.Background(), t.n)
		if err != nil {
			t.fail(transformerFailure(fmt.Errorf("task %d: %w", t.n, err)))
			return
		}
		t.bt, t.callKeys, t.callCap = bt, map[string]struct{}{}, maxBatchCalls
		defer bt.Close(context.Background())
		if in, ok := bt.(Interrupter); ok {
			defer context.AfterFunc(t.r.stopped, in.Interrupt)()
		}
	}
	defer func() {
		if t.timer != nil {
			t.timer.Stop()
		}
	}()
	for {
		var timerC <-chan time.Time
		if t.timer != nil {
			timerC = t.timer.C
		}
		in := t.in
		if t.sealed != nil && t.atCap() {
			in = nil // full: take nothing until the commit in flight is done
		} else {
			t.beat.Waiting() // for work: no stall, however long it takes
		}
		var err error
		select {
		case m := <-in:
			t.beat.Busy()
			if m.end != endNone {
				err = t.stop(m.end)
				m.reply <- err
				t.err = err
				return
			}
			err = t.process(m)
		case res := <-t.result:
			t.beat.Busy()
			err = t.committed(res)
		case <-timerC:
			t.beat.Busy()
			t.timer = nil
			err = t.commitIfDue()
		}
		if err != nil {
			t.fail(err)
			return
		}
	}
}

// fail aborts what the task holds and reports err to the runner, which
// decides whether the task restarts or the stage ends (recovery.go).
func (t *task) fail(err error) {
	close(t.stopping)
	switch {
	case t.sealed != nil:
		t.txnAge = max(t.txnAge, time.Since(t.sealed.opened))
	case t.open.records > 0:
		t.txnAge = max(t.txnAge, time.Since(t.open.opened))
	}
	t.abortAll()
	t.err = err
	t.r.taskFailed(t, err)
}

// process runs one poll's records of this task into the open transaction,
// ending it on the way whenever it is due (cutIfDue): a poll's records
// may take far longer than a transaction may stay open.
func (t *task) process(m taskMsg) error {
	err := t.processRecords(m)
	if errors.Is(err, errInterrupted) {
		return nil // the task ends next: its end commits what was done
	}
	return err
}

func (t *task) processRecords(m taskMsg) error {
	ctx := context.Background()
	// The clock is read every few records (clockEvery): when the records
	// are fast a read costs more than a record's share of the checks.
	var last time.Time // the last reading, before the records since
	since := 0         // records since last
	for i, rec := range m.recs {
		if t.ending.Load() || t.r.stopping.Load() {
			if i == 0 {
				m.batch.committed() // no transaction holds any of its records
			}
			break // the rest is read again by whoever owns the partition next
		}
		if t.atCap() {
			if err := t.cut(ctx); err != nil {
				return err
			}
			last, since = time.Now(), 0
		}
		if last.IsZero() || since >= t.clockEvery {
			now := time.Now()
			if since > 0 {
				t.took(now.Sub(last), since)
			}
			if cut, err := t.cutIfDue(ctx, now); err != nil {
				return err
			} else if cut {
				now = time.Now()
			}
			last, since = now, 0
		}
		since++
		tx := t.open
		if tx.records == 0 {
			tx.opened = last // a little early at most: the deadlines come sooner
			t.armTimer()
		}
		if len(tx.batches) == 0 || tx.batches[len(tx.batches)-1] != m.batch {
			tx.batches = append(tx.batches, m.batch)
			if i > 0 {
				m.batch.add() // a poll split over two transactions
			}
		}
		tx.records++
		tx.offsets[rec.Topic] = rec.Offset + 1
		if err := t.processOne(ctx, rec); err != nil {
			return err
		}
	}
	if since > 0 {
		t.took(time.Since(last), since)
	}
	if err := t.flushCalls(ctx); err != nil {
		return err
	}
	return t.commitIfDue()
}

// processOne takes one record into the open transaction: transformed
// now, or queued for the BatchTransformer's next call.
func (t *task) processOne(ctx context.Context, rec *kgo.Record) error {
	t.from = rec
	if t.bt != nil {
		return t.r.queueRecord(ctx, t, rec)
	}
	return t.r.processRecord(ctx, t, rec)
}

// cut ends the open transaction now: its queued records called, it
// commits, after the commit in flight if any.
func (t *task) cut(ctx context.Context) error {
	if err := t.flushCalls(ctx); err != nil {
		return err
	}
	return t.seal()
}

// cutIfDue ends the open transaction before the next record when it must
// (mustCut: near the transaction timeout), waiting for the commit in
// flight if need be; and when it is merely due (its commit_interval
// passed) and no commit is in flight, it starts its commit without
// waiting. cut says it committed or waited.
func (t *task) cutIfDue(ctx context.Context, now time.Time) (cut bool, err error) {
	tx := t.open
	if tx.records == 0 {
		return false, nil
	}
	if t.mustCut(now.Sub(tx.opened)) {
		return true, t.cut(ctx)
	}
	if t.sealed != nil {
		select {
		case res := <-t.result: // the commit in flight is done: take it now
			if err := t.flushCalls(ctx); err != nil {
				return false, err
			}
			return true, t.committed(res)
		default:
			return false, nil
		}
	}
	if now.Sub(tx.opened) < t.r.commitEvery() {
		return false, nil
	}
	if err := t.flushCalls(ctx); err != nil {
		return false, err
	}
	return true, t.startCommit()
}

// mustCut says whether a transaction open for elapsed must end before the
// next record: once open for a third of the transaction timeout, or when
// the slowest record (or module call) seen so far would take it past two
// thirds. Past the timeout the coordinator aborts it and fences the
// producer, and the task would never commit.
func (t *task) mustCut(elapsed time.Duration) bool {
	cut := t.r.txnCut()
	return elapsed >= cut || elapsed+t.slowest >= 2*cut
}

// txnCut is a third of the transaction timeout: what a task's transaction
// may take before it must commit, leaving room for one more record and
// the commit.
func (r *Runner) txnCut() time.Duration { return r.txnTimeout / 3 }

// commitEvery is how long a transaction collects records before it is
// due: commit_interval, unless that comes near the transaction timeout.
func (r *Runner) commitEvery() time.Duration { return min(r.commitInterval, r.txnCut()) }

// took notes that n records (or a module call, which ends the records it
// holds together: n 1) took d. The slowest bounds how early a transaction
// must end; d counts for one record, which errs on the early side. How
// fast they were sets how many records go by between readings of the
// clock: a millisecond's worth, up to 64. And a task that takes long
// keeps beating its liveness.
func (t *task) took(d time.Duration, n int) {
	if d > t.slowest {
		t.slowest = d
	}
	t.clockEvery = int(min(max(clockSlack/max(d/time.Duration(n), 1), 1), maxClockEvery))
	if d >= time.Second {
		t.beat.Busy()
	}
}

// How late a transaction's deadlines may be seen, and how many records
// may go by between readings of the clock at most.
const (
	clockSlack    = time.Millisecond
	maxClockEvery = 64
)

func (t *task) atCap() bool { return t.open.records >= t.r.stage.MaxTransactionRecords }

func (t *task) armTimer() {
	if t.timer != nil {
		t.timer.Stop()
	}
	t.timer = time.NewTimer(t.r.commitEvery())
}

// due reports whether the open transaction should commit now.
func (t *task) due() bool {
	tx := t.open
	return tx.records > 0 && (t.atCap() || time.Since(tx.opened) >= t.r.commitEvery())
}

// commitIfDue starts the commit of the open transaction when it is due and
// no other commit is in flight; otherwise the end of that commit checks
// again.
func (t *task) commitIfDue() error {
	if t.sealed != nil || !t.due() {
		return nil
	}
	return t.startCommit()
}

// seal ends the open transaction when it must (full, or near the
// transaction timeout): it waits for the commit in flight, if any, then
// starts the open transaction's.
func (t *task) seal() error {
	if t.sealed != nil {
		if err := t.committed(<-t.result); err != nil {
			return err
		}
		if t.sealed != nil { // committed started the full one already
			return nil
		}
	}
	return t.startCommit()
}

// startCommit seals the open transaction, commits it on its own
// goroutine and opens the next one.
func (t *task) startCommit() error {
	tx := t.open
	if err := t.begin(tx); err != nil {
		return err
	}
	writes, err := t.r.stateWrites(t, tx)
	if err != nil {
		return err
	}
	tx.writes, tx.sealedAt = writes, time.Now()
	t.sealed, t.open = tx, newTxn()
	if t.timer != nil {
		t.timer.Stop()
		t.timer = nil
	}
	go func() { t.result <- commitResult{err: t.r.commit(t, tx)} }()
	return nil
}

// committed takes the outcome of the sealed transaction (see settle), and
// the open transaction may start producing.
func (t *task) committed(res commitResult) error {
	if err := t.settle(res); err != nil {
		return err
	}
	if t.open.records == 0 {
		return nil
	}
	if err := t.begin(t.open); err != nil {
		return err
	}
	return t.commitIfDue()
}

// settle takes the outcome of the sealed transaction: once it committed,
// the store learns its state, so the store is always the committed state.
func (t *task) settle(res commitResult) error {
	tx := t.sealed
	t.sealed = nil
	if res.err != nil {
		t.txnAge = time.Since(tx.opened)
		return res.err
	}
	t.r.obs.TxnCommitted.Inc()
	if !t.hasCommitted && t.recovered != nil {
		rs := t.recovered
		t.r.log.Info("task commits again: Kafka is back", "partition", t.n, "failed_attempts", rs.attempts,
			"since_first_failure", time.Since(rs.since).Round(time.Millisecond))
	}
	t.hasCommitted = true
	if t.lease.Store != nil && len(tx.writes) > 0 {
		at := state.Position{Offset: tx.changelogEnd.Load(), Since: tx.sealedAt}
		if err := t.lease.Store.Apply(tx.writes, at); err != nil {
			return err
		}
	}
	t.cache.apply(tx)
	for _, b := range tx.batches {
		b.committed()
	}
	return nil
}

// begin starts tx on the producer, if it is not started yet, and hands it
// the outputs that waited for the previous commit.
func (t *task) begin(tx *txn) error {
	if tx.started {
		return nil
	}
	if err := t.lease.Prod.BeginTransaction(); err != nil {
		return fmt.Errorf("task %d: begin transaction: %w", t.n, err)
	}
	tx.started = true
	for _, rec := range tx.pending {
		t.produceNow(tx, rec)
	}
	tx.pending = nil
	return nil
}

// produce adds an output to the open transaction, or hands it to the
// sink of a task that runs outside the runner (Lane).
func (t *task) produce(rec *kgo.Record) {
	if t.sink != nil {
		t.sink(rec)
		return
	}
	tx := t.open
	if !tx.started && t.sealed == nil {
		if err := t.begin(tx); err != nil {
			tx.firstErr.CompareAndSwap(nil, &err)
			return
		}
	}
	if !tx.started {
		tx.pending = append(tx.pending, rec)
		return
	}
	t.produceNow(tx, rec)
}

func (t *task) produceNow(tx *txn, rec *kgo.Record) {
	tx.produced++
	changelog := t.r.changelog
	t.lease.Prod.Produce(context.Background(), rec, func(r *kgo.Record, err error) {
		if err != nil {
			err = produceFailure(r, err)
			tx.firstErr.CompareAndSwap(nil, &err)
			return
		}
		if r.Topic == changelog {
			for end := r.Offset + 1; ; {
				cur := tx.changelogEnd.Load()
				if end <= cur || tx.changelogEnd.CompareAndSwap(cur, end) {
					break
				}
			}
		}
	})
}

// stop ends the worker: finish commits the open transaction (after the
// one in flight), abort throws it away.
func (t *task) stop(mode endMode) error {
	if mode == endAbort {
		t.abortAll()
		return nil
	}
	if t.sealed != nil {
		if err := t.committed(<-t.result); err != nil {
			t.abortAll()
			return err
		}
	}
	if t.sealed == nil && t.open.records > 0 {
		if err := t.startCommit(); err != nil {
			t.abortAll()
			return err
		}
	}
	if t.sealed != nil {
		if err := t.committed(<-t.result); err != nil {
			t.abortAll()
			return err
		}
	}
	return nil
}

// abortAll lets the commit in flight end (if it commits, the store takes
// its state as usual) and aborts the open transaction if it reached the
// producer. Best effort: the next owner's fence aborts anything left open.
func (t *task) abortAll() {
	if t.sealed != nil {
		if err := t.settle(<-t.result); err != nil {
			t.r.log.Debug("commit in flight failed while aborting", "partition", t.n, "error", err)
		}
	}
	if t.open.started {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := t.lease.Prod.EndTransaction(ctx, kgo.TryAbort); err != nil {
			t.r.log.Debug("abort", "partition", t.n, "error", err)
		}
	}
	t.open = newTxn()
}

// commit ends a sealed transaction: every output acknowledged, the input
// offsets added, EndTxn. It runs on its own goroutine and touches nothing
// of the task but tx and the producer, which the worker leaves alone until
// the result arrives.
func (r *Runner) commit(t *task, tx *txn) error {
	ctx, cancel := context.WithTimeout(context.Background(), r.txnTimeout)
	defer cancel()
	prod := t.lease.Prod
	if err := prod.Flush(ctx); err != nil {
		return fmt.Errorf("task %d: flush: %w", t.n, err)
	}
	if p := tx.firstErr.Load(); p != nil {
		return fmt.Errorf("task %d: produce: %w", t.n, *p)
	}
	offsets := map[string]map[int32]int64{}
	for topic, off := range tx.offsets {
		offsets[topic] = map[int32]int64{t.n: off}
	}
	if err := commitOffsets(ctx, prod, t.lease.TxnID, r.stage.ApplicationID, r.generation, offsets, t.meta); err != nil {
		return fmt.Errorf("task %d: %w", t.n, err)
	}
	if err := prod.EndTransaction(ctx, kgo.TryCommit); err != nil {
		return fmt.Errorf("task %d: commit: %w", t.n, err)
	}
	if tx.produced == 0 {
		if err := endEmptyTransaction(ctx, prod, t.lease.TxnID); err != nil {
			return fmt.Errorf("task %d: commit offsets: %w", t.n, err)
		}
	}
	// The worker produces the outputs that waited for this commit as
	// soon as it has the result: hand it over once the coordinator can
	// take them (kafkax.TxnSettler).
	t.lease.Settler.Ended()
	t.lease.Settler.Settle(ctx)
	return nil
}

// batchTracker observes batch_processing_seconds for one poll: from the
// poll until every transaction holding its records has committed.
type batchTracker struct {
	start   time.Time
	pending atomic.Int32 // transactions (and the dispatch) still open
	r       *Runner
}

func (b *batchTracker) add() { b.pending.Add(1) }

func (b *batchTracker) committed() {
	if b.pending.Add(-1) == 0 {
		b.r.obs.BatchProcessing.Observe(time.Since(b.start).Seconds())
	}
}
