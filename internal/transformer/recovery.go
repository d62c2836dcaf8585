package transformer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/kafkax"
)

// How the runner rides out the cluster's failures, one task at a time.
//
// A task that fails has aborted what it held (task.fail) and stopped. What
// happens next is classify's call:
//
//   - retriable: the task restarts after a bounded backoff (200 ms doubling
//     to 5 s, reset once a restarted task commits): its lease is started
//     again — a new producer fences the transactional ID, which settles a
//     commit whose answer was lost, and the store is restored from the
//     changelog, which alone knows how that commit ended — and its input is
//     sought back to the group's committed offsets, which the fence settled
//     the same way. Until then its partitions are paused and whatever was
//     fetched for them is dropped. The other tasks go on.
//   - ownership (fenced, or the group forgot this member's generation): the
//     runner asks the group who owns the task. Another member: this process
//     is a zombie and ends with the fence. This member: the cluster only
//     said so in passing (a transaction coordinator moving mid-commit
//     answers PRODUCER_FENCED), and the task restarts as above. No answer
//     within ownerWait: it restarts too.
//   - fatal: the stage ends (exit 1).
//
// A task ended by a revoke that fails to commit does not restart (the
// partition is no longer its); a retriable failure there only costs its
// open transaction, an ownership one is checked the same way.

// restart is a task on its way back after a failure.
type restart struct {
	since     time.Time // the first failure of this run of failures
	attempts  int       // failures in a row, starts included
	notBefore time.Time // when its lease may start again
	// offsets is where its input resumes (committed offset per input
	// topic), fetched once its lease started; nil until then.
	offsets map[string]int64
}

// ownerCheck asks the group who owns a task whose producer was fenced or
// whose member the group forgot.
type ownerCheck struct {
	err   error // what the task was told
	since time.Time
	next  time.Time // when to ask the group
}

// taskFailure is a task's failure, as the task reported it.
type taskFailure struct {
	t   *task
	err error
}

// maxFencedInARow is how many times a task may lose its transaction to
// Kafka (txnLost) with no commit between before the stage stops: a
// transaction coordinator that moved answers one commit PRODUCER_FENCED
// or INVALID_TXN_STATE, but a task that loses every transaction cannot
// make progress (a transaction the coordinator aborts at its timeout
// ends that way too), and restarting it would go on for ever. Kafka
// being away (connections refused, too few replicas) is not counted: the
// stage rides that out however long it lasts.
const maxFencedInARow = 3

// Recovery timings. ownerWait is in session timeouts: by then a member
// that lost its membership has heard of it, and the group has settled.
const (
	restartMin      = 200 * time.Millisecond
	restartMax      = 5 * time.Second
	ownerWaitFactor = 2
	ownerAskEvery   = time.Second
	recoveryTimeout = 10 * time.Second // one request of the recovery itself
)

// taskFailed is how a task reports its failure, from its own goroutine.
func (r *Runner) taskFailed(t *task, err error) {
	r.failedMu.Lock()
	r.failedTasks = append(r.failedTasks, taskFailure{t: t, err: err})
	r.failedMu.Unlock()
	r.wakeUp()
}

// recoverTasks handles what the tasks reported since the last round and
// asks the group about fenced tasks; it runs at the top of the poll loop.
// The stage's own end is r.failed().
func (r *Runner) recoverTasks(ctx context.Context) {
	r.failedMu.Lock()
	failures := r.failedTasks
	r.failedTasks = nil
	r.failedMu.Unlock()
	if len(failures) > 0 {
		r.mu.Lock()
		for _, f := range failures {
			if r.workers[f.t.n] != f.t {
				continue // a revoke ended it, and handled its error
			}
			delete(r.workers, f.t.n)
			<-f.t.done
			r.slowest[f.t.n] = max(r.slowest[f.t.n], f.t.slowest)
			r.onTaskError(f.t, f.err, false)
		}
		r.mu.Unlock()
	}
	r.checkOwners(ctx)
}

// onTaskError acts on the failure of task t, which has stopped; revoked
// says a revoke ended it (the partition is no longer its). r.mu is held.
func (r *Runner) onTaskError(t *task, err error, revoked bool) {
	n := t.n
	class := classify(err)
	switch {
	case class == classFatal:
		r.fail(err)
		return
	case class == classOwnership && !(revoked && generationOnly(err)):
		r.startOwnerCheck(n, err)
	case revoked:
		r.log.Warn("a revoked task could not commit its open transaction; it was aborted, and whoever owns the partition next resumes from its last commit",
			"partition", n, "error", err)
	}
	if !revoked {
		r.restartTask(t, err, class)
	}
}

// generationOnly says the coordinator refused a commit for its group
// generation alone: the producer was not fenced, so a task revoked with
// it was handed over by a rebalance, not taken from a zombie.
func generationOnly(err error) bool {
	return (errors.Is(err, kerr.IllegalGeneration) || errors.Is(err, kerr.RebalanceInProgress)) && !kafkax.Fenced(err)
}

// restartTask closes task t's lease and schedules its start again, unless
// it was fenced too often in a row (maxFencedInARow). r.mu is held.
func (r *Runner) restartTask(t *task, err error, class failureClass) {
	n, committed := t.n, t.hasCommitted
	bo := r.backoff(n)
	if committed {
		bo.Reset() // it worked since the last failure: a fresh run
	}
	d := bo.Next()
	rs := r.restarts[n]
	if rs == nil || committed {
		rs = &restart{since: time.Now()}
		r.restarts[n] = rs
	}
	rs.attempts++
	if fr := r.fenceRun(n, committed, err, t.txnAge); fr.fences >= maxFencedInARow {
		r.fail(&UncommittableError{Partition: n, Fences: fr.fences, TransactionTimeout: r.txnTimeout,
			Slowest: t.slowest, TxnAge: fr.txnAge, TransactionalID: t.lease.TxnID, Err: err})
		return
	}
	rs.notBefore = time.Now().Add(d)
	rs.offsets = nil
	r.consumer.PauseFetchPartitions(r.inputsOf(n))
	r.tasks.Restart(n)
	what := fmt.Sprintf("task %d", n)
	if class == classOwnership {
		r.log.Warn("task "+fmt.Sprint(n)+"'s producer was fenced or its group membership was not recognised; its open transactions were aborted, and it restarts once the group says it still owns the task",
			"partition", n, "error", err)
		return
	}
	kafkax.LogRetry(r.log, what, err, rs.attempts, d,
		"partition", n, "then", "its open transactions were aborted; it starts again (fence, changelog restore) and resumes from its committed offsets")
}

// fences is a task's run of lost transactions: how many of its attempts
// since its last commit ended with Kafka refusing its transaction
// (txnLost), and the longest those transactions had been open.
type fences struct {
	fences int
	txnAge time.Duration
}

// fenceRun counts a failure of task n in its run of lost transactions: a
// task that committed starts a new run; other failures (Kafka away)
// neither count nor end it. r.mu is held.
func (r *Runner) fenceRun(n int32, committed bool, err error, txnAge time.Duration) fences {
	fr := r.fenced[n]
	if committed {
		fr = fences{}
	}
	if txnLost(err) {
		fr.fences++
		fr.txnAge = max(fr.txnAge, txnAge)
	}
	r.fenced[n] = fr
	return fr
}

// txnLost says Kafka refused the task's transaction while it answered:
// the producer was fenced (classOwnership), or the coordinator no longer
// knew the transaction as the producer had it (INVALID_TXN_STATE,
// TRANSACTION_ABORTABLE), which is how a transaction aborted at its
// timeout shows as well.
func txnLost(err error) bool {
	return classify(err) == classOwnership || errors.Is(err, kerr.InvalidTxnState) || errors.Is(err, kerr.TransactionAbortable)
}

func (r *Runner) backoff(n int32) *kafkax.Backoff {
	bo := r.backoffs[n]
	if bo == nil {
		bo = &kafkax.Backoff{Min: restartMin, Max: restartMax}
		r.backoffs[n] = bo
	}
	return bo
}

// inputsOf is partition n of every input topic.
func (r *Runner) inputsOf(n int32) map[string][]int32 {
	m := make(map[string][]int32, len(r.stage.InputTopics))
	for _, t := range r.stage.InputTopics {
		m[t] = []int32{n}
	}
	return m
}

// startable reports whether a pending task may start now: not while the
// group is asked who owns it, nor before its backoff ended. r.mu is held.
func (r *Runner) startable(n int32) bool {
	if _, asking := r.owners[n]; asking {
		return false
	}
	rs := r.restarts[n]
	return rs == nil || !time.Now().Before(rs.notBefore)
}

// startFailed schedules another start of task n after a failed one. It
// returns err when retrying cannot help. r.mu is held.
func (r *Runner) startFailed(n int32, err error) error {
	if classify(err) == classFatal {
		return err
	}
	bo := r.backoff(n)
	d := bo.Next()
	rs := r.restarts[n]
	if rs == nil {
		rs = &restart{since: time.Now()}
		r.restarts[n] = rs
	}
	rs.attempts++
	rs.notBefore = time.Now().Add(d)
	kafkax.LogRetry(r.log, fmt.Sprintf("starting task %d", n), err, rs.attempts, d, "partition", n)
	return nil
}

// forget drops the restarts of tasks the group revoked or assigned anew (a
// new assignment starts from the group's offsets anyway), and, when
// assigned, the question who owns them: the group just answered it. A
// revoke leaves that question open: a zombie's revoke follows its fence,
// and only the group's answer tells it to stop. r.mu is held.
func (r *Runner) forget(parts map[string][]int32, assigned bool) {
	for _, ps := range parts {
		for _, p := range ps {
			delete(r.restarts, p)
			delete(r.fenced, p)
			if assigned {
				delete(r.owners, p)
			}
		}
	}
}

// startOwnerCheck has the group asked who owns task n. r.mu is held.
func (r *Runner) startOwnerCheck(n int32, err error) {
	if _, ok := r.owners[n]; !ok {
		r.owners[n] = &ownerCheck{err: err, since: time.Now()}
	}
}

// checkOwners asks the group who owns the tasks in question: another
// member ends the stage with the fence, this member lets the task restart.
func (r *Runner) checkOwners(ctx context.Context) {
	now := time.Now()
	r.mu.Lock()
	due := 0
	for _, c := range r.owners {
		if !now.Before(c.next) {
			due++
		}
	}
	r.mu.Unlock()
	if due == 0 {
		return
	}
	askCtx, cancel := context.WithTimeout(ctx, recoveryTimeout)
	g, err := kafkax.DescribeGroup(askCtx, kadm.NewClient(r.admin), r.stage.ApplicationID)
	cancel()

	r.mu.Lock()
	defer r.mu.Unlock()
	for n, c := range r.owners {
		if now.Before(c.next) {
			continue
		}
		var holder *kafkax.GroupMember
		if err == nil {
			holder = r.holderOf(g, n)
		}
		switch {
		case holder != nil && holder.InstanceID != r.clientID:
			r.fail(&ZombieError{Partition: n, Group: r.stage.ApplicationID, Owner: *holder, Err: c.err})
			return
		case holder != nil && g.State == "Stable":
			r.log.Warn("the group still assigns the task to this instance: no other owner fenced it, the cluster did (a transaction or group coordinator moved); initialising the producer again",
				"partition", n, "error", c.err)
		case time.Since(c.since) < ownerWaitFactor*r.session:
			c.next = now.Add(ownerAskEvery)
			continue
		default:
			r.log.Warn("the group named no owner of the task in time; initialising the producer again",
				"partition", n, "waited", time.Since(c.since).Round(time.Millisecond), "last_error", err)
		}
		delete(r.owners, n)
		if rs := r.restarts[n]; rs != nil {
			rs.notBefore = time.Now()
		}
	}
}

// holderOf is the member the group assigns task n to (partition n of the
// first input topic), or nil.
func (r *Runner) holderOf(g *kafkax.Group, n int32) *kafkax.GroupMember {
	topic := r.stage.InputTopics[0]
	for i, m := range g.Members {
		for _, tp := range m.Assigned {
			if tp.Topic != topic {
				continue
			}
			for _, p := range tp.Partitions {
				if p == n {
					return &g.Members[i]
				}
			}
		}
	}
	return nil
}

// ZombieError ends a stage whose task was fenced by another member of its
// group: this process lost its membership (paused or cut off past its
// session timeout) and another took its task over.
type ZombieError struct {
	Partition int32
	Group     string
	Owner     kafkax.GroupMember
	Err       error
}

func (e *ZombieError) Error() string {
	owner := e.Owner.ClientID
	if e.Owner.InstanceID != "" {
		owner = e.Owner.InstanceID
	}
	return fmt.Sprintf("task %d was fenced: %s (member %s of group %s) owns partition %d now, so this instance lost it (paused or cut off past its session timeout) and stops: %v",
		e.Partition, owner, e.Owner.MemberID, e.Group, e.Partition, e.Err)
}

func (e *ZombieError) Unwrap() error { return e.Err }

// fetchResumeOffsets fetches where the input of each restarted task whose
// lease started resumes: the group's committed offsets, stable now that
// the fence settled the task's last transaction. On failure the task waits
// for the next round.
func (r *Runner) fetchResumeOffsets(ctx context.Context) {
	r.mu.Lock()
	var ns []int32
	for n, rs := range r.restarts {
		if _, running := r.workers[n]; running && rs.offsets == nil {
			ns = append(ns, n)
		}
	}
	r.mu.Unlock()
	if len(ns) == 0 {
		return
	}
	sort.Slice(ns, func(i, j int) bool { return ns[i] < ns[j] })
	parts := map[string][]int32{}
	for _, t := range r.stage.InputTopics {
		parts[t] = ns
	}
	askCtx, cancel := context.WithTimeout(ctx, recoveryTimeout)
	offsets, err := kafkax.StableOffsets(askCtx, r.admin, r.stage.ApplicationID, parts)
	cancel()
	if err != nil {
		if !kafkax.Retriable(err) && !errors.Is(err, context.DeadlineExceeded) {
			r.fail(fmt.Errorf("resuming tasks %v: %w", ns, err))
			return
		}
		level := slog.LevelWarn
		if errors.Is(err, kerr.UnstableOffsetCommit) {
			level = slog.LevelDebug // the fence's markers are on their way
		}
		r.log.Log(ctx, level, "fetching the committed offsets of restarted tasks failed; asking again", "partitions", fmt.Sprint(ns), "error", err)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, n := range ns {
		if rs := r.restarts[n]; rs != nil {
			rs.offsets = map[string]int64{}
			for _, t := range r.stage.InputTopics {
				rs.offsets[t] = offsets[t][n]
			}
		}
	}
}

// resumeRestarted seeks each restarted task whose offsets are known to
// them and resumes fetching it. It runs between a poll and AllowRebalance,
// where no revoke can run, as franz-go's SetOffsets requires; the records
// that poll returned for these partitions predate the seek, and dispatch
// drops them.
func (r *Runner) resumeRestarted() {
	r.mu.Lock()
	defer r.mu.Unlock()
	clear(r.sought)
	for n, rs := range r.restarts {
		if _, running := r.workers[n]; !running || rs.offsets == nil {
			continue
		}
		set := map[string]map[int32]kgo.EpochOffset{}
		for t, off := range rs.offsets {
			if off < 0 {
				off = 0 // never committed: from the log start (an offset below it resets there)
			}
			set[t] = map[int32]kgo.EpochOffset{n: {Epoch: -1, Offset: off}}
		}
		r.consumer.SetOffsets(set)
		r.consumer.ResumeFetchPartitions(r.inputsOf(n))
		r.sought[n] = true
		delete(r.restarts, n)
		r.log.Info("task resumed from its committed offsets", "partition", n, "offsets", fmt.Sprint(rs.offsets),
			"failed_attempts", rs.attempts, "since_first_failure", time.Since(rs.since).Round(time.Millisecond))
	}
}

// stale reports whether polled records of partition n are to be dropped:
// its task is restarting, or was sought after the poll that fetched them.
// r.mu is held.
func (r *Runner) stale(n int32) bool {
	_, restarting := r.restarts[n]
	return restarting || r.sought[n]
}

// UncommittableError stops a stage whose task lost its transaction to
// Kafka Fences times in a row without a commit: it cannot make progress. It says why, from what
// the task saw: records that take too long for the transaction timeout,
// transactions open past it, or a cluster that fences it regardless.
type UncommittableError struct {
	Partition          int32
	Fences             int
	TransactionTimeout time.Duration
	Slowest            time.Duration // the longest one record or module call took
	TxnAge             time.Duration // the longest a failed transaction had been open
	TransactionalID    string
	Err                error
}

func (e *UncommittableError) Error() string {
	head := fmt.Sprintf("task %d lost its transaction %d times in a row without committing (Kafka fenced its producer or no longer knew the transaction), while this instance still held the task: it cannot make progress, so the stage stops", e.Partition, e.Fences)
	third := e.TransactionTimeout / 3
	var cause string
	switch {
	case e.Slowest >= third:
		cause = fmt.Sprintf("one record (or module call) took up to %s, more than a third of the transaction timeout (%s), and Kafka aborts a transaction at its timeout; make each record take less than %s: lower the module's transform.time_limit to at most %s, or make the transformer faster",
			e.Slowest.Round(time.Millisecond), e.TransactionTimeout, third, third)
	case e.TxnAge >= e.TransactionTimeout:
		cause = fmt.Sprintf("its transactions stayed open for up to %s, past the transaction timeout (%s), and Kafka aborts a transaction at its timeout; lower commit_interval and max_transaction_records",
			e.TxnAge.Round(time.Millisecond), e.TransactionTimeout)
	default:
		cause = fmt.Sprintf("its transactions were open for %s at most, inside the transaction timeout (%s), and its records take up to %s: the cluster fenced it regardless (a transaction coordinator that keeps moving or failing); check the brokers' logs for transactional ID %s",
			e.TxnAge.Round(time.Millisecond), e.TransactionTimeout, e.Slowest.Round(time.Millisecond), e.TransactionalID)
	}
	return fmt.Sprintf("%s: %s (last error: %v)", head, cause, e.Err)
}

func (e *UncommittableError) Unwrap() error { return e.Err }
