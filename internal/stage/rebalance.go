package stage

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// onAssigned only records the new partitions and pauses them: restoring in
// the callback would stall the whole group. The main loop starts the tasks.
func (r *Runner) onAssigned(_ context.Context, cl *kgo.Client, assigned map[string][]int32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	r.tasks.Assign(assigned)
	pause := map[string][]int32{}
	for _, p := range r.tasks.Pending() {
		for _, t := range r.stage.InputTopics {
			pause[t] = append(pause[t], p)
		}
	}
	cl.PauseFetchPartitions(pause)
	r.log.Info("partitions assigned", "partitions", fmt.Sprint(assigned))
	r.wakeUp()
}

// onRevoked ends the revoked tasks before the revoke completes: each
// commits its open transaction (the membership is still current during the
// revoke) and stops; then their leases close (eager rebalance: nothing is
// kept across it). A commit that fails here ends the run.
func (r *Runner) onRevoked(_ context.Context, _ *kgo.Client, revoked map[string][]int32) {
	r.endTasks(revoked, endFinish)
	r.log.Info("partitions revoked", "partitions", fmt.Sprint(revoked))
}

// onLost ends the lost tasks without committing: the membership is gone,
// so their offsets could not commit, and a new owner may already hold them.
func (r *Runner) onLost(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	r.endTasks(lost, endAbort)
	r.log.Info("partitions lost", "partitions", fmt.Sprint(lost))
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
				r.fail(err)
			}
		}
	}
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
	err := r.tasks.StartPending(ctx, func(p int32) {
		l, ok := r.tasks.Get(p)
		if !ok {
			return
		}
		if _, running := r.workers[p]; !running {
			r.workers[p] = r.newTask(l)
		}
		resume := map[string][]int32{}
		for _, topic := range r.stage.InputTopics {
			resume[topic] = []int32{p}
		}
		r.consumer.ResumeFetchPartitions(resume)
		started++
		restored += l.Restored
		r.log.Info("task started", "partition", p, "restored", l.Restored)
	})
	if started > 0 {
		r.log.Info("tasks started", "tasks", started, "restored", restored, "took", time.Since(start).Round(time.Millisecond))
	}
	return err
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
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	r.tasks.CloseAll()
	r.obs.TasksAssigned.Set(0)
}
