package reencrypt

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/kafkax"
)

// Plan reads the topics and returns what a sweep would do, writing nothing.
func Plan(ctx context.Context, reader *kgo.Client, o Options) (*Result, error) {
	o.defaults()
	if o.Keyring == nil {
		_, _, err := buildPlan(nil, nil, &o)
		return nil, err
	}
	v, rr, err := ReadView(ctx, reader, o.Topics, o.ReadPlanned, o.Read)
	if err != nil {
		return nil, err
	}
	res, _, err := buildPlan(v, rr.Bounds, &o)
	return res, err
}

// Execute sweeps the topics: every record whose secret values need the
// primary key (or their scope, or encryption) is re-produced with the same
// key bytes, headers and timestamp to the partition it was read from, its
// other bytes unchanged, in transactions of o.BatchSize records; other writers are
// detected by end offsets (see the package documentation) and their
// partitions re-read and re-swept; finally a scan verifies the result.
//
// producer must be built with ProducerOpts(o.TransactionalID). It is
// initialised first, which fences a previous sweep of the same topics and
// aborts the transaction it left open, so a killed sweep is resumed by
// running it again.
func Execute(ctx context.Context, reader, producer *kgo.Client, o Options) (*Result, error) {
	o.defaults()
	if o.Keyring == nil {
		_, _, err := buildPlan(nil, nil, &o)
		return nil, err
	}
	start := time.Now()
	if _, _, err := producer.ProducerID(ctx); err != nil {
		return nil, fmt.Errorf("initialising the transactional producer %q: %w", o.TransactionalID, err)
	}
	o.Log.Debug("sweep: producer initialised (previous sweep fenced)", "transactional_id", o.TransactionalID, "took", time.Since(start))
	v, rr, err := ReadView(ctx, reader, o.Topics, o.ReadPlanned, o.Read)
	if err != nil {
		return nil, err
	}
	o.Log.Debug("sweep: read the compacted view", "records", v.Len(), "took", time.Since(start))
	res, tps := newResult(rr.Bounds, &o)
	res.Mode = "execute"
	e := &engine{o: &o, reader: reader, prod: producer, adm: kadm.NewClient(reader), view: v, res: res, parts: map[TP]*pstate{},
		settler: kafkax.NewTxnSettler(producer, o.TransactionalID), bounds: rr.Bounds, reports: map[TP]*PartitionReport{}}
	// The plan is made from the view as read now (the records are
	// immutable; the view itself changes as the sweep writes), and
	// written as it is made.
	snapshot := map[TP][]*Rec{}
	for i, tp := range tps {
		e.reports[tp] = res.Partitions[i]
		snapshot[tp] = v.Partition(tp)
	}
	planCtx, stopPlanning := context.WithCancel(ctx)
	defer stopPlanning()
	e.plans = planAhead(planCtx, tps, snapshot, o.Fields, o.rule())
	defer e.closeCreated()
	err = e.run(ctx)
	res.Totals = Counts{}
	for _, pr := range res.Partitions {
		res.Totals.add(pr.Counts)
	}
	res.remind()
	if err != nil {
		return res, err
	}
	o.Log.Debug("sweep: written and checked", "transactions", res.Transactions, "aborted", res.Aborted, "took", time.Since(start))
	var scan *ScanReport
	err = e.retrying(ctx, "the verifying scan", false, func() error {
		var err error
		scan, err = Scan(ctx, reader, ScanOptions{Topics: o.Topics, Fields: o.Fields, Keyring: o.Keyring, Planned: o.ReadPlanned, Read: o.Read, summaryOnly: true})
		return err
	})
	if err != nil {
		return res, fmt.Errorf("verifying by a scan: %w", err)
	}
	res.Verification = verify(scan, o.Resign)
	o.Log.Debug("sweep: verified", "clean", res.Verification.Clean, "took", time.Since(start))
	return res, nil
}

// verify judges the scan that follows a sweep, each token against its own
// scope's sealing kid. A value the scan could not judge (corrupt, a token
// that does not open, a signature that does not verify) leaves the sweep
// unverified: it might name any kid.
func verify(s *ScanReport, resign bool) *Verification {
	sum := s.Summary
	v := &Verification{
		Primary: s.Primary, Targets: s.Targets, Records: sum.Records, Values: sum.Values,
		NonPrimary: sum.Stale, Plaintext: sum.Plaintext, Unsigned: sum.Unsigned, Corrupt: sum.Corrupt,
		Undecryptable: sum.Undecryptable, Unverified: sum.Unverified, OldSigner: sum.OldSigner,
		ByKid: sum.ByKid, BySigner: sum.BySigner,
	}
	if v.Targets == nil {
		v.Targets = []ScopeTarget{}
	}
	v.Clean = v.NonPrimary == 0 && v.Corrupt == 0 && v.Undecryptable == 0 && v.Unverified == 0 && (!resign || v.OldSigner == 0)
	return v
}

// ContendedError: other writers kept appending to a partition through
// MaxRounds re-reads in a row without a sweep transaction committing there
// in between, or after MaxRounds final passes. Nothing they wrote was
// reverted: each sweep transaction that raced them was aborted before it
// became visible.
type ContendedError struct {
	TP      TP
	Rereads int
}

func (e *ContendedError) Error() string {
	return fmt.Sprintf("partition %s/%d: other writers kept appending (%d re-reads); nothing they wrote was reverted "+
		"(every sweep transaction that raced them was aborted), but the partition is not fully swept: run the sweep again when it is quiet",
		e.TP.Topic, e.TP.Partition, e.Rereads)
}

// OpenTransactionError: a partition's last stable offset did not reach what
// the sweep must see, because another producer's transaction stayed open.
type OpenTransactionError struct {
	TP     TP
	Stable int64 // the last stable offset seen
	Want   int64 // the offset it had to reach
	Waited time.Duration
}

func (e *OpenTransactionError) Error() string {
	return fmt.Sprintf("partition %s/%d: the last stable offset stayed at %d, below %d, for %s: a transaction of another producer is open there, "+
		"so the sweep cannot verify the partition; run it again once that transaction has ended", e.TP.Topic, e.TP.Partition, e.Stable, e.Want, e.Waited)
}

// engine is one executing sweep.
type engine struct {
	o      *Options
	reader *kgo.Client
	prod   *kgo.Client
	adm    *kadm.Client
	view   *View
	res    *Result
	parts  map[TP]*pstate
	queue  []*job
	done   int64 // records written
	// reinits counts producers initialised again after a fence; created
	// are those producers, closed when the sweep ends.
	reinits int
	created []*kgo.Client
	// settler holds a transaction's produce until the coordinator has
	// completed the one before (kafkax.TxnSettler).
	settler *kafkax.TxnSettler
	// plans brings the plan a chunk at a time (planAhead); nil once it
	// is all in. A partition gets its pstate with its first chunk.
	plans   <-chan planned
	bounds  map[TP]kafkax.Bounds
	reports map[TP]*PartitionReport
}

// pstate is what the engine knows of one partition.
//
// Invariant: every offset below accounted has been read (read_committed,
// below the last stable offset, so each is decided) or verified by
// arithmetic; own counts the offsets this sweep has appended at or above
// accounted (its records and one transaction marker per transaction that
// wrote to the partition), and nothing else has been appended there if and
// only if the partition's end offset is accounted + own.
type pstate struct {
	rep       *PartitionReport
	accounted int64
	own       int64
	ours      map[int64]bool // offsets of this sweep's committed records at or above accounted
	rereads   int            // re-reads since a transaction writing here last committed
	// replanned: a re-read planned the whole partition anew from the
	// view, so chunks of the first plan still to come are counted in the
	// report but not written (they derive from versions it superseded).
	replanned bool
}

func (e *engine) progress() {
	if e.o.Planned != nil {
		e.o.Planned(e.done + int64(len(e.queue)))
	}
}

func (e *engine) run(ctx context.Context) error {
	for round := 0; ; round++ {
		for len(e.queue) > 0 || e.plans != nil {
			// Take what is planned; wait for more only with nothing to write.
			if err := e.takePlans(ctx, len(e.queue) == 0); err != nil {
				return err
			}
			if len(e.queue) == 0 {
				continue
			}
			if err := e.retrying(ctx, "a sweep transaction", true, func() error { return e.txn(ctx) }); err != nil {
				return err
			}
		}
		// Everything planned is committed. Writers that appended after a
		// transaction's check are newer than the sweep and win; their
		// latest versions may still need it, so every partition is
		// checked once more, and re-read where anything was appended.
		var dirty []TP
		err := e.retrying(ctx, "the final check", true, func() error {
			var err error
			dirty, err = e.check(ctx, nil)
			return err
		})
		if err != nil {
			return err
		}
		if len(dirty) == 0 {
			return nil
		}
		if round >= e.o.MaxRounds {
			// Other writers keep appending after every pass.
			return &ContendedError{TP: dirty[0], Rereads: e.parts[dirty[0]].rep.Rereads}
		}
		for _, tp := range dirty {
			if err := e.retrying(ctx, "a re-read", true, func() error { return e.resweep(ctx, tp, true) }); err != nil {
				return err
			}
		}
	}
}

// takePlans counts and queues the chunks of the plan that have arrived;
// with wait it first waits for one (or for the plan's end).
func (e *engine) takePlans(ctx context.Context, wait bool) error {
	for e.plans != nil {
		var p planned
		var ok bool
		if wait {
			select {
			case p, ok = <-e.plans:
			case <-ctx.Done():
				return ctx.Err()
			}
			wait = false
		} else {
			select {
			case p, ok = <-e.plans:
			default:
				return nil
			}
		}
		if !ok {
			e.plans = nil
			e.o.Log.Debug("sweep: planned", "rewrite", e.done+int64(len(e.queue)))
			return nil
		}
		ps := e.parts[p.tp]
		if ps == nil {
			ps = &pstate{rep: e.reports[p.tp], accounted: e.bounds[p.tp].End, ours: map[int64]bool{}}
			e.parts[p.tp] = ps
		}
		for i, r := range p.recs {
			j, err := planTransformed(r, p.ts[i], p.errs[i], &ps.rep.Counts, e.res)
			if err != nil {
				return err
			}
			if j != nil && !ps.replanned {
				e.queue = append(e.queue, j)
			}
		}
		e.progress()
	}
	return nil
}

// retrying runs step, and recovers from a retriable failure of the
// cluster (a node killed, paused or restarting; a leader or coordinator
// moving): it aborts the transaction left open, re-reads every partition
// from where the sweep last read or verified it (an unconfirmed commit is
// then found committed or not, and a writer's edit is seen as ever), and
// runs step again after a bounded backoff. A failure that is not
// retriable, or failures lasting RetryFor, end the sweep: running it again
// resumes it. A step that reads only (the verifying scan) is retried
// without the recovery.
func (e *engine) retrying(ctx context.Context, what string, reread bool, step func() error) error {
	bo := kafkax.Backoff{Min: 200 * time.Millisecond, Max: 5 * time.Second}
	var failingSince time.Time
	for {
		err := step()
		fenced := reread && kafkax.Fenced(err) && e.o.NewProducer != nil && e.reinits < maxReinits
		if err == nil || (!kafkax.Retriable(err) && !fenced) || ctx.Err() != nil {
			return err
		}
		if fenced {
			// A transaction coordinator that moved during a commit can
			// answer the commit's retry PRODUCER_FENCED with no other
			// producer about. Another sweep of these topics is a writer
			// like any other to the end-offset checks, so taking the ID
			// back is safe; the bound ends a tug of war between two.
			e.reinits++
			e.o.Log.Warn("sweep: the producer was fenced; initialising it again and re-reading (a coordinator that moved mid-commit answers so)",
				"transactional_id", e.o.TransactionalID, "error", err, "reinit", e.reinits)
			if rerr := e.reinitProducer(ctx); rerr != nil {
				if !kafkax.Retriable(rerr) {
					return rerr
				}
				err = rerr
			}
		}
		if failingSince.IsZero() {
			failingSince = time.Now()
		}
		if time.Since(failingSince) > e.o.RetryFor {
			return fmt.Errorf("the cluster kept failing for %s: %w (nothing half-done is visible; run the sweep again)", e.o.RetryFor, err)
		}
		e.res.Retries++
		if werr := bo.Wait(ctx, e.o.Log, "sweep: "+what, err); werr != nil {
			return err
		}
		if !reread {
			continue
		}
		if rerr := e.recoverFrom(ctx); rerr != nil {
			if !kafkax.Retriable(rerr) {
				return rerr
			}
			continue // step fails again at once, or the next recovery succeeds
		}
	}
}

// maxReinits bounds how often a sweep takes its transactional ID back
// after a fence.
const maxReinits = 3

// reinitProducer replaces the fenced producer with a new one, initialised
// (which fences whatever holds the ID and aborts its open transaction).
func (e *engine) reinitProducer(ctx context.Context) error {
	p, err := e.o.NewProducer(e.o.TransactionalID)
	if err != nil {
		return err
	}
	if _, _, err := p.ProducerID(ctx); err != nil {
		p.Close()
		return fmt.Errorf("initialising the transactional producer %q again: %w", e.o.TransactionalID, err)
	}
	e.created = append(e.created, p)
	e.prod = p
	e.settler = kafkax.NewTxnSettler(p, e.o.TransactionalID)
	return nil
}

func (e *engine) closeCreated() {
	for _, p := range e.created {
		p.Close()
	}
}

// recoverFrom ends the sweep's own open transaction, if any (aborting it,
// or settling an unconfirmed commit by re-initialising the producer), and
// re-reads every partition, so that the engine's accounting holds again
// whatever the failed step had done.
func (e *engine) recoverFrom(ctx context.Context) error {
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	err := e.prod.EndTransaction(actx, kgo.TryAbort)
	cancel()
	if err != nil {
		return fmt.Errorf("aborting the failed transaction: %w", err)
	}
	tps := make([]TP, 0, len(e.parts))
	for tp := range e.parts {
		tps = append(tps, tp)
	}
	sortTPs(tps)
	for _, tp := range tps {
		if err := e.resweep(ctx, tp, false); err != nil {
			return err
		}
	}
	return nil
}

// txn writes one batch in one transaction, and commits it only when no
// other writer has appended to any partition it writes since the engine
// last read or verified that partition.
func (e *engine) txn(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err // stopped (SIGINT, SIGTERM) between transactions: run again to finish
	}
	n := min(e.o.BatchSize, len(e.queue))
	batch := e.queue[:n:n]
	e.queue = e.queue[n:]
	e.settler.Settle(ctx)
	if err := e.prod.BeginTransaction(); err != nil {
		return fmt.Errorf("beginning a transaction: %w", err)
	}
	recs := make([]*kgo.Record, len(batch))
	for i, j := range batch {
		recs[i] = j.record()
	}
	if err := e.prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		e.abandon(ctx)
		return fmt.Errorf("producing: %w", err)
	}
	type touch struct{ n, last int64 }
	touched := map[TP]*touch{}
	for _, r := range recs {
		tp := TP{Topic: r.Topic, Partition: r.Partition}
		t := touched[tp]
		if t == nil {
			t = &touch{last: -1}
			touched[tp] = t
		}
		t.n++
		t.last = max(t.last, r.Offset)
	}
	if e.o.hooks.fail != nil {
		if err := e.o.hooks.fail("produced"); err != nil {
			return err
		}
	}
	if e.o.hooks.beforeCheck != nil {
		e.o.hooks.beforeCheck()
	}
	// The race this guards against: another writer appends a version of a
	// key (say the old value, by a writer still on the old keyring) after
	// the sweep read that key and before this rewrite of it lands. Every
	// append takes an offset, and this transaction's records are appended
	// and acknowledged now, so such a version sits between the read offset
	// and the end offset listed here: the end exceeds what the sweep read
	// plus what it wrote itself, and the transaction is aborted instead of
	// shadowing the edit. A version appended after this check gets a higher
	// offset than every record here, so it stays the latest. (The package
	// documentation has the whole argument.)
	pending := map[TP]int64{}
	for tp, t := range touched {
		pending[tp] = t.n
	}
	dirty, err := e.check(ctx, pending)
	if err != nil {
		e.abandon(ctx)
		return err
	}
	commit := len(dirty) == 0
	if commit && e.o.hooks.afterCheck != nil {
		e.o.hooks.afterCheck()
	}
	end := kgo.TryAbort
	if commit {
		end = kgo.TryCommit
	}
	// Ending is not cancelled with ctx: a commit cut off half-way leaves
	// its outcome unknown (franz-go's advice).
	endCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	err = e.prod.EndTransaction(endCtx, end)
	cancel()
	e.settler.Ended()
	if err != nil {
		// The outcome is unknown: the recovery (retrying) settles it by
		// re-initialising the producer, and so does a rerun.
		return fmt.Errorf("ending a transaction: %w", err)
	}
	if e.o.hooks.fail != nil {
		if err := e.o.hooks.fail("ended"); err != nil {
			return err
		}
	}
	settle := map[TP]int64{}
	for tp, t := range touched {
		// The records plus the transaction's marker (commit or abort).
		e.parts[tp].own += t.n + 1
		settle[tp] = t.last + 1
	}
	if commit {
		e.res.Transactions++
		for _, r := range recs {
			tp := TP{Topic: r.Topic, Partition: r.Partition}
			ps := e.parts[tp]
			ps.rereads = 0 // progress: the bound is on re-reads in a row
			ps.ours[r.Offset] = true
			ps.rep.Written++
			e.view.Apply(FromKgo(r))
		}
		e.done += int64(len(recs))
		if e.o.Written != nil {
			e.o.Written(int64(len(recs)))
		}
	} else {
		e.res.Aborted++
		isDirty := map[TP]bool{}
		for _, tp := range dirty {
			isDirty[tp] = true
		}
		// The batch's jobs for partitions nobody else wrote to are still
		// valid; those of the others are re-planned from a re-read.
		var keep []*job
		for _, j := range batch {
			if !isDirty[j.tp] {
				keep = append(keep, j)
			}
		}
		e.queue = append(keep, e.queue...)
		e.o.Log.Info("aborted a sweep transaction: another writer appended to a partition it wrote", "dirty", len(dirty))
	}
	// The next check must count this transaction's marker: wait until the
	// last stable offset passes its records, which happens only once the
	// marker is appended.
	if err := e.settle(ctx, settle); err != nil {
		return err
	}
	for _, tp := range dirty {
		if err := e.resweep(ctx, tp, true); err != nil {
			return err
		}
	}
	e.progress()
	return nil
}

// abandon aborts the open transaction after a failure; the failure is what
// gets reported.
func (e *engine) abandon(ctx context.Context) {
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	_ = e.prod.EndTransaction(actx, kgo.TryAbort)
}

// check compares end offsets (high watermarks) with what the engine
// accounts for: pending are the records of the open transaction per
// partition. With pending nil it checks every partition. It returns the
// partitions where something else was appended.
func (e *engine) check(ctx context.Context, pending map[TP]int64) ([]TP, error) {
	var tps []TP
	if pending == nil {
		for tp := range e.parts {
			tps = append(tps, tp)
		}
	} else {
		for tp := range pending {
			tps = append(tps, tp)
		}
	}
	ends, err := e.listOffsets(ctx, tps, false)
	if err != nil {
		return nil, err
	}
	var dirty []TP
	for _, tp := range tps {
		ps := e.parts[tp]
		if ends[tp] != ps.accounted+ps.own+pending[tp] {
			dirty = append(dirty, tp)
		}
	}
	sortTPs(dirty)
	return dirty, nil
}

// listOffsets returns the end offsets (high watermarks) or, with stable,
// the last stable offsets of the partitions.
func (e *engine) listOffsets(ctx context.Context, tps []TP, stable bool) (map[TP]int64, error) {
	seen := map[string]bool{}
	var topics []string
	for _, tp := range tps {
		if !seen[tp.Topic] {
			seen[tp.Topic] = true
			topics = append(topics, tp.Topic)
		}
	}
	list, what := e.adm.ListEndOffsets, "end offsets"
	if stable {
		list, what = e.adm.ListCommittedOffsets, "last stable offsets"
	}
	listed, err := list(ctx, topics...)
	if err == nil {
		err = listed.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", what, err)
	}
	out := make(map[TP]int64, len(tps))
	for _, tp := range tps {
		o, ok := listed.Lookup(tp.Topic, tp.Partition)
		if !ok {
			return nil, fmt.Errorf("listing %s: no answer for %s/%d", what, tp.Topic, tp.Partition)
		}
		out[tp] = o.Offset
	}
	return out, nil
}

// settle waits until each partition's last stable offset reaches its
// target, so that every offset below the target is decided.
func (e *engine) settle(ctx context.Context, targets map[TP]int64) error {
	if len(targets) == 0 {
		return nil
	}
	tps := make([]TP, 0, len(targets))
	for tp := range targets {
		tps = append(tps, tp)
	}
	sortTPs(tps)
	start := time.Now()
	backoff := time.Millisecond
	for {
		lso, err := e.listOffsets(ctx, tps, true)
		if err != nil {
			return err
		}
		var behind *OpenTransactionError
		for _, tp := range tps {
			if lso[tp] < targets[tp] {
				behind = &OpenTransactionError{TP: tp, Stable: lso[tp], Want: targets[tp]}
				break
			}
		}
		if behind == nil {
			return nil
		}
		if waited := time.Since(start); waited > e.o.SettleTimeout {
			behind.Waited = waited.Round(time.Second)
			return behind
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 100*time.Millisecond)
	}
}

// resweep re-reads a partition where another writer appended, from where
// the engine last read or verified it, and re-plans it from its now
// current compacted view: a record whose latest version (another writer's,
// which wins) still holds a token to rotate is swept again; one that no
// longer needs it is left alone. Should a sweep record ever shadow another
// writer's newer version (the check before every commit exists to prevent
// exactly that), that version is re-produced, so the edit still wins.
//
// contended is false for the re-read after a failure of the cluster, which
// says nothing of other writers and counts towards no bound.
func (e *engine) resweep(ctx context.Context, tp TP, contended bool) error {
	ps := e.parts[tp]
	if contended {
		ps.rereads++
		ps.rep.Rereads++
		if ps.rereads > e.o.MaxRounds {
			return &ContendedError{TP: tp, Rereads: ps.rep.Rereads - 1}
		}
	}
	// Wait for everything appended so far (another writer's open
	// transaction, this sweep's last marker) to be decided, then read it.
	hwm, err := e.listOffsets(ctx, []TP{tp}, false)
	if err != nil {
		return err
	}
	if err := e.settle(ctx, hwm); err != nil {
		return err
	}
	var window []*Rec
	rr, err := kafkax.ReadFrom(ctx, e.reader, []string{tp.Topic}, kafkax.FromOffsets(map[TP]int64{tp: ps.accounted}), nil, func(r *kgo.Record) error {
		if r.Partition == tp.Partition {
			window = append(window, FromKgo(r))
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("re-reading %s/%d: %w", tp.Topic, tp.Partition, err)
	}
	end := rr.Bounds[tp].End
	why := "re-read a partition after another writer appended"
	if !contended {
		why = "re-read a partition after the cluster failed a step"
	}
	e.o.Log.Info(why, "topic", tp.Topic, "partition", tp.Partition, "from", ps.accounted, "to", end, "round", ps.rereads)

	w := judgeWindow(window, ps.ours)
	ps.rep.ForeignRecords += w.foreign
	for _, r := range window {
		e.view.Apply(r)
	}
	e.queue = slices.DeleteFunc(e.queue, func(j *job) bool { return j.tp == tp })
	ps.replanned = true
	var jobs []*job
	restored := map[string]bool{}
	for _, f := range w.restore {
		restored[string(f.Key)] = true
		ps.rep.Restored++
		e.view.Apply(f) // the other writer's version is the current one again
		j := newJob(f, f.Value)
		if f.Value != nil {
			if t, err := transform(f.Value, e.o.Fields, e.o.rule()); err == nil && t.Changed {
				j.value = t.Value
			}
		}
		jobs = append(jobs, j)
	}
	scratch := &Result{}
	ru := e.o.rule()
	for _, r := range e.view.Partition(tp) {
		if r.Key != nil && restored[string(r.Key)] {
			continue
		}
		var c Counts
		j, err := planRecord(r, ru, e.o.Fields, &c, scratch)
		if err != nil {
			return err
		}
		if j == nil {
			continue
		}
		jobs = append(jobs, j)
		if r.Offset >= ps.accounted && !ps.ours[r.Offset] {
			// Another writer's version, newly read, still needs the sweep.
			ps.rep.Resweep++
		}
	}
	slices.SortFunc(jobs, func(a, b *job) int { return cmp.Compare(a.base, b.base) })
	ps.accounted, ps.own = end, 0
	clear(ps.ours)
	e.queue = append(e.queue, jobs...)
	e.progress()
	return nil
}

// windowVerdict is what a re-read window says.
type windowVerdict struct {
	foreign int    // records another writer appended
	restore []*Rec // other writers' versions a sweep record shadows
}

// judgeWindow classifies a re-read window (one partition, offset order)
// into this sweep's records and other writers', and finds every key whose
// latest version from another writer is followed by a record of this sweep:
// that sweep record was derived from an older version and would revert the
// edit, so the edit must be re-produced.
func judgeWindow(window []*Rec, ours map[int64]bool) windowVerdict {
	var w windowVerdict
	lastForeign := map[string]*Rec{}
	lastOurs := map[string]int64{}
	for _, r := range window {
		if ours[r.Offset] {
			if r.Key != nil {
				lastOurs[string(r.Key)] = r.Offset
			}
			continue
		}
		w.foreign++
		if r.Key != nil {
			lastForeign[string(r.Key)] = r
		}
	}
	for k, f := range lastForeign {
		if o, ok := lastOurs[k]; ok && o > f.Offset {
			w.restore = append(w.restore, f)
		}
	}
	slices.SortFunc(w.restore, func(a, b *Rec) int { return cmp.Compare(a.Offset, b.Offset) })
	return w
}

// IsContended reports whether err is a ContendedError or an
// OpenTransactionError: the sweep stopped because of other writers.
func IsContended(err error) bool {
	var c *ContendedError
	var o *OpenTransactionError
	return errors.As(err, &c) || errors.As(err, &o)
}
