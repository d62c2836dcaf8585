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

// onRevoked tears every task down (eager rebalance: nothing is kept across
// it). The rebalance is blocked while a batch runs, so no transaction is
// open here.
func (r *Runner) onRevoked(_ context.Context, _ *kgo.Client, revoked map[string][]int32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tasks.Revoke(revoked)
	r.obs.TasksAssigned.Set(float64(r.tasks.Len()))
	r.log.Info("partitions revoked", "partitions", fmt.Sprint(revoked))
}

// initPending starts the tasks of newly assigned partitions one at a time
// (fence → restore → resume).
func (r *Runner) initPending(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	defer func() { r.obs.TasksAssigned.Set(float64(r.tasks.Len())) }()
	return r.tasks.StartPending(ctx, func(p int32) {
		resume := map[string][]int32{}
		for _, topic := range r.stage.InputTopics {
			resume[topic] = []int32{p}
		}
		r.consumer.ResumeFetchPartitions(resume)
		r.obs.TasksAssigned.Set(float64(r.tasks.Len()))
		r.log.Info("task started", "partition", p)
	})
}

// shutdown leaves the group and closes the tasks. franz-go's Close waits
// for a join in flight to finish (so that a revoke callback may commit one
// last time), and a join waits for every member to rejoin: for the session
// timeout when one is gone, up to the rebalance timeout when one is in a
// long batch. A runner commits nothing on revoke — every batch committed
// in its own transactions, and no task is open during a join — so the wait
// is bounded by the leave timeout; after it the process goes on, and the
// group drops the member when its session expires.
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
