package transformer

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/kafkax"
)

// onAssigned only records the new partitions and pauses them: restoring in
// the callback would stall the whole group. The main loop starts the tasks.
func (r *Runner) onAssigned(_ context.Context, cl *kgo.Client, assigned map[string][]int32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	r.forget(assigned, true)
	r.tasks.Assign(assigned)
	if n := r.sessionErrs.Swap(0); n > 0 {
		// The runbook's check after an outage shorter than the session
		// timeout too, which the session watch does not call one.
		r.log.Info("Kafka is back: rejoined group "+r.stage.ApplicationID+" after its session failed", "failed_attempts", n)
	}
	r.sessionSaid.Store(0) // a session again: a new failure is news
	pause := map[string][]int32{}
	for _, p := range r.tasks.Pending() {
		for _, t := range r.stage.InputTopics {
			pause[t] = append(pause[t], p)
		}
	}
	cl.PauseFetchPartitions(pause)
	r.log.Info("partitions assigned", "partitions", kafkax.FormatPartitions(assigned))
	r.wakeUp()
}

// onRevoked ends the revoked tasks before the revoke completes: each
// commits its open transaction (the membership is still current during the
// revoke) and stops; then their leases close. Under the cooperative
// assignment (kafkax.TaskBalancers) these are only the tasks that move;
// under range, which a group with any Flechtwerk replica falls back to,
// every task. A commit that fails here is aborted (onTaskError says what
// else it means).
func (r *Runner) onRevoked(_ context.Context, _ *kgo.Client, revoked map[string][]int32) {
	if !kafkax.AnyPartition(revoked) {
		return // a cooperative session's end that revoked nothing
	}
	r.endTasks(revoked, endFinish)
	r.log.Info("partitions revoked", "partitions", kafkax.FormatPartitions(revoked))
}

// onLost ends the lost tasks without committing: the membership is gone,
// so their offsets could not commit, and a new owner may already hold them.
func (r *Runner) onLost(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	r.endTasks(lost, endAbort)
	r.sessionErrs.Add(1)
	r.mu.Lock()
	if !r.closed {
		r.tasks.Lost("the group session was lost (a coordinator unavailable, or this member dropped)")
	}
	r.mu.Unlock()
	if kafkax.AnyPartition(lost) { // franz-go calls it on every failed rejoin, with nothing to lose
		r.log.Info("partitions lost", "partitions", kafkax.FormatPartitions(lost))
	}
}

func (r *Runner) endTasks(parts map[string][]int32, mode endMode) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ps := range parts {
		for _, p := range ps {
			t, ok := r.workers[p]
			if !ok {
				continue
			}
			delete(r.workers, p)
			if err := t.end(mode); err != nil {
				r.onTaskError(t, err, true)
			}
		}
	}
	r.forget(parts, false)
	r.tasks.Revoke(parts)
	r.obs.TasksAssigned.Set(float64(r.tasks.Len()))
}

// initPending starts the tasks of newly assigned partitions (fence →
// restore → resume, the partitions concurrently) and logs how long the
// restore took.
func (r *Runner) initPending(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	defer func() { r.obs.TasksAssigned.Set(float64(r.tasks.Len())) }()
	if len(r.tasks.Pending()) == 0 {
		return nil
	}
	start := time.Now()
	var started, restored int
	failed := r.tasks.StartEligible(ctx, r.startable, func(p int32) {
		l, ok := r.tasks.Get(p)
		if !ok {
			return
		}
		rs := r.restarts[p]
		if _, running := r.workers[p]; !running {
			r.workers[p] = r.newTask(l, rs)
		}
		if rs == nil {
			r.consumer.ResumeFetchPartitions(r.inputsOf(p))
		} // else: resumeRestarted seeks it to its committed offsets first
		started++
		restored += l.Restored
		r.log.Info("task started", "partition", p, "restored", l.Restored)
	})
	if started > 0 {
		r.log.Info("tasks started", "tasks", started, "restored", restored, "took", time.Since(start).Round(time.Millisecond))
	}
	for _, p := range r.tasks.Pending() {
		if err, ok := failed[p]; ok {
			if err := r.startFailed(p, err); err != nil {
				return err
			}
		}
	}
	return nil
}

// shutdown leaves the group and closes the leases. franz-go's Close waits
// for a join in flight to finish (so that a revoke callback may commit one
// last time), and a join waits for every member to rejoin: for the session
// timeout when one is gone, up to the rebalance timeout when one is in a
// long batch. By now the runner has ended its tasks (finishAll on a clean
// stop, abortAll after a failure), so a revoke has nothing left to commit
// and the wait is bounded by the leave timeout; after it the process goes
// on, and the group drops the member when its session expires.
func (r *Runner) shutdown() {
	left := make(chan struct{})
	go func() {
		r.consumer.Close() // leaves the group; its revoke callback closes the tasks
		close(left)
	}()
	select {
	case <-left:
	case <-time.After(r.leaveTimeout):
		r.log.Warn("leaving the group waits for a rebalance in progress; not waiting longer (the group drops this member when its session expires)",
			"waited", r.leaveTimeout)
	}
	if r.leaveGroup && r.stoppedCleanly {
		r.leave()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	r.tasks.CloseAll()
	r.obs.TasksAssigned.Set(0)
}

// leave removes this instance's static member from the group, as Kafka
// Streams' close with leaveGroup does: the others take its partitions in
// the rebalance this starts, without waiting for its session to expire.
// franz-go never sends a static member's LeaveGroup itself.
func (r *Runner) leave() {
	ctx, cancel := context.WithTimeout(context.Background(), r.leaveTimeout)
	defer cancel()
	resp, err := kadm.NewClient(r.admin).LeaveGroup(ctx, kadm.LeaveGroup(r.stage.ApplicationID).
		InstanceIDs(r.clientID).Reason("flecht run stopped with --leave-group (scale-down)"))
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		r.log.Warn("leaving the group failed; the group drops this member when its session expires", "error", err)
		return
	}
	r.log.Info("left the group: the other instances take its partitions now", "group", r.stage.ApplicationID, "instance_id", r.clientID)
}
