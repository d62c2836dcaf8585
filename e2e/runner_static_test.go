//go:build e2e

package e2e

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/kafkax"
)

// inputStream produces inputs in chunks on a ticker until stopped, so that
// what a test does to the stages happens mid-stream.
type inputStream struct {
	// stop is closed once (ended says so). The producing goroutine holds
	// its own copy: it once read the field after end had set it to nil,
	// and then waited on a nil channel, producing for ever.
	stop    chan struct{}
	ended   bool
	stopped chan error
	mu      sync.Mutex
	want    map[string]input
	n       int
}

func streamInputs(t *testing.T, prod *kgo.Client, topic string, partitions, keys, chunk int, every time.Duration) *inputStream {
	t.Helper()
	s := &inputStream{stop: make(chan struct{}), stopped: make(chan error, 1), want: map[string]input{}}
	ctx := testCtx(t, 30*time.Minute)
	stop := s.stop
	go func() {
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				s.stopped <- nil
				return
			case <-tick.C:
			}
			s.mu.Lock()
			from := s.n
			s.mu.Unlock()
			got, err := produceInputsErr(ctx, prod, topic, partitions, from, from+chunk, keys, 60)
			if err != nil {
				s.stopped <- err
				return
			}
			s.mu.Lock()
			for id, v := range got {
				s.want[id] = v
			}
			s.n += chunk
			s.mu.Unlock()
		}
	}()
	t.Cleanup(func() { s.end(t) })
	return s
}

// end stops the stream and returns what it produced.
func (s *inputStream) end(t *testing.T) (map[string]input, int) {
	t.Helper()
	if !s.ended {
		close(s.stop)
		s.ended = true
		if err := <-s.stopped; err != nil {
			t.Fatalf("producing the input stream: %v", err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.want, s.n
}

// groupMembers describes the group's members now.
func groupMembers(t *testing.T, group string) []kafkax.GroupMember {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	g, err := kafkax.DescribeGroup(ctx, admin(t), group)
	if err != nil {
		t.Fatal(err)
	}
	return g.Members
}

func hasInstance(members []kafkax.GroupMember, id string) bool {
	for _, m := range members {
		if m.InstanceID == id {
			return true
		}
	}
	return false
}

// Static members (group.instance.id = --client-id), two `flecht run`
// instances on six partitions while input streams in:
//
//   - one SIGKILLed and started again takes its own tasks back at once,
//     before its killed incarnation's session (6 s) could expire, and the
//     other instance is not rebalanced (no revoke, no task started);
//   - one stopped with SIGTERM stays a member: the other takes its tasks
//     only once its session expired;
//   - one stopped with SIGTERM and --leave-group leaves at once, and the
//     other takes its tasks without waiting for the session.
//
// Every input is in the output exactly once with each key's seq exact.
func TestRunnerStaticMembers(t *testing.T) {
	const (
		partitions = 6
		keys       = 300
		session    = 6 * time.Second // testSessionTimeout
	)
	app, in, out := runnerTopics(t, partitions)
	stageFile := countStage(t, app, in, out, "crash", 500)
	adm := admin(t)
	stream := streamInputs(t, inputProducer(t), in, partitions, keys, 500, 50*time.Millisecond)

	a := startRun(t, stageFile, "static-a", t.TempDir())
	c := waitCommitted(t, adm, app, in, 2000, 2*time.Minute, a)
	bDir := t.TempDir()
	b := startRun(t, stageFile, "static-b", bDir)
	tasks := func(p *proc) float64 {
		v, err := p.tryMetric("flechtwerk_tasks_assigned")
		if err != nil {
			return -1
		}
		return v
	}
	split := func(b *proc) (float64, float64) {
		var ta, tb float64
		waitUntil(t, 2*time.Minute, "the tasks split between A and B", func() bool {
			a.alive()
			b.alive()
			ta, tb = tasks(a), tasks(b)
			return ta+tb == partitions && ta > 0 && tb > 0
		})
		return ta, tb
	}
	ta, held := split(b)
	for _, m := range groupMembers(t, app) {
		if m.InstanceID != m.ClientID {
			t.Errorf("member %s: instance id %q, want its client id", m.MemberID, m.InstanceID)
		}
	}
	c = waitCommitted(t, adm, app, in, c+2000, 2*time.Minute, a, b)
	t.Logf("two instances: A %v tasks, B %v", ta, held)

	// 1. SIGKILL and restart: B's own tasks back at once, A untouched.
	startsA, revokesA := a.logCount(`msg="task started"`), a.logCount(`msg="partitions revoked"`)
	b.kill()
	restarted := time.Now()
	b = startRun(t, stageFile, "static-b", bDir)
	waitUntil(t, time.Minute, "the restarted B holding its tasks", func() bool {
		b.alive()
		v, err := b.tryMetric("flechtwerk_transactions_committed_total")
		return tasks(b) == held && err == nil && v > 0
	})
	back := time.Since(restarted)
	if back >= session {
		t.Errorf("the restarted B committed with its tasks %s after its restart, not before its killed member's session (%s) could expire", back, session)
	}
	if s, r := a.logCount(`msg="task started"`), a.logCount(`msg="partitions revoked"`); s != startsA || r != revokesA || tasks(a) != ta {
		t.Errorf("A was rebalanced by B's restart: %d task starts (were %d), %d revokes (were %d), %v tasks", s, startsA, r, revokesA, tasks(a))
	}
	t.Logf("B SIGKILLed and restarted: its %v tasks back and committing %s after the restart began (process start included); A: no revoke, no task started", held, back.Round(10*time.Millisecond))

	// 2. SIGTERM without --leave-group: B stays a member until its
	// session expires; only then does A take its tasks.
	b.stop()
	stopped := time.Now()
	if !hasInstance(groupMembers(t, app), "static-b") {
		t.Error("B left its group on SIGTERM without --leave-group")
	}
	waitUntil(t, 2*time.Minute, "A holding every task after B's stop", func() bool { a.alive(); return tasks(a) == partitions })
	kept := time.Since(stopped)
	t.Logf("B stopped (SIGTERM): A held all %d tasks %s later (its session: %s)", partitions, kept.Round(10*time.Millisecond), session)

	// 3. SIGTERM with --leave-group: B leaves at once.
	b = startRun(t, stageFile, "static-b", bDir, "--leave-group")
	split(b)
	waitCommitted(t, adm, app, in, c+2000, 2*time.Minute, a, b)
	b.stop()
	stopped = time.Now()
	if hasInstance(groupMembers(t, app), "static-b") {
		t.Error("B is still a member after SIGTERM with --leave-group")
	}
	waitUntil(t, 2*time.Minute, "A holding every task after B left", func() bool { a.alive(); return tasks(a) == partitions })
	left := time.Since(stopped)
	t.Logf("B stopped with --leave-group: A held all %d tasks %s later", partitions, left.Round(10*time.Millisecond))
	if left >= kept {
		t.Errorf("A took over %s after B left, no sooner than after B's plain stop (%s)", left, kept)
	}

	want, n := stream.end(t)
	waitCommitted(t, adm, app, in, int64(n), 3*time.Minute, a)
	a.stop()
	rep := checkExactlyOnce(t, out, want)
	t.Logf("static members: restart back in %s, stop without leaving %s, with --leave-group %s; %s",
		back.Round(10*time.Millisecond), kept.Round(10*time.Millisecond), left.Round(10*time.Millisecond), rep)
}
