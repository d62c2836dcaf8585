//go:build e2e

package e2e

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A mixed group on one application id: the real flechtwerk 0.17 count
// stage (e2e/upstream/py/count_stage.py, a dynamic member of the Range
// assignor, as every Python replica is) beside `flecht run` with the count
// builtin (a static member, group.instance.id = --client-id), input
// streaming in.
//
//   - flecht SIGKILLed and started again takes its own partitions back
//     before its killed member's session could expire, and the Python
//     member keeps its own throughout: it closes and initialises no task;
//   - flecht stopped with SIGTERM stays a member until its session expires,
//     then the Python member takes every partition;
//   - flecht stopped with --leave-group leaves at once, and the Python
//     member takes every partition without waiting for that session.
//
// The output holds every input exactly once, byte for byte what either
// writes, with each key's seq continuing across every move.
// nowRunning reads the task count from the Python stage's
// "Initialized tasks [...] (now running N)" line.
var nowRunning = regexp.MustCompile(`^Initialized tasks \[[^\]]*\] \(now running (\d+)\)`)

func TestUpstreamMixedGroupStaticRestart(t *testing.T) {
	upstreamRoot(t)
	const session = 6 * time.Second // flecht's --session-timeout in these tests
	h := newHandover(t)
	h.produce(600)
	py := h.startPython("python-0")
	h.waitSoleMember("python-0", py)
	waitCommitted(t, h.adm, h.app, h.in, 300, 3*time.Minute, py)

	// The inputs keep coming while members restart, stop and leave.
	stop, produced := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(produced)
		for {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
			h.produce(30)
		}
	}()
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
			<-produced
		}
	}()

	flechtDir := t.TempDir()
	startFlecht := func(extra ...string) *proc {
		return startRun(t, h.flechtStage, "flecht-0", flechtDir, extra...)
	}
	tasks := func(p *proc) float64 {
		v, err := p.tryMetric("flechtwerk_tasks_assigned")
		if err != nil {
			return -1
		}
		return v
	}
	// pyMoves counts the Python stage's task changes: its "Initialized
	// tasks" and "Closed tasks" lines.
	pyMoves := func() int {
		return strings.Count(py.logs(), "Initialized tasks") + strings.Count(py.logs(), "Closed tasks")
	}
	// pyHolds is the number of tasks the Python member holds, from the
	// group's own view.
	pyHolds := func() int {
		n := 0
		for _, m := range groupMembers(t, h.app) {
			if m.ClientID == "python-0" {
				for _, tp := range m.Assigned {
					if tp.Topic == h.in {
						n += len(tp.Partitions)
					}
				}
			}
		}
		return n
	}
	// pySettled says the Python stage has initialised the tasks the group
	// assigned it: the group shows an assignment as soon as it syncs, the
	// stage logs "Initialized tasks [...] (now running N)" only after its
	// restore, and a task change counted before that line would be
	// blamed on whatever the test does next.
	pySettled := func() bool {
		logs := py.logs()
		last := strings.LastIndex(logs, "Initialized tasks")
		if last < 0 || last < strings.LastIndex(logs, "Closed tasks") {
			return false
		}
		m := nowRunning.FindStringSubmatch(logs[last:])
		return m != nil && m[1] == strconv.Itoa(pyHolds())
	}
	split := func(f *proc) float64 {
		var mine float64
		waitUntil(t, 2*time.Minute, "the partitions split between flecht and Python", func() bool {
			f.alive()
			py.alive()
			mine = tasks(f)
			v, err := f.tryMetric("flechtwerk_transactions_committed_total")
			return mine > 0 && err == nil && v > 0 && int(mine)+pyHolds() == handoverPartitions && pySettled()
		})
		return mine
	}

	f := startFlecht()
	mine := split(f)
	for _, m := range groupMembers(t, h.app) {
		switch m.ClientID {
		case "flecht-0":
			if m.InstanceID != "flecht-0" {
				t.Errorf("flecht's member has instance id %q, want its client id", m.InstanceID)
			}
		case "python-0":
			if m.InstanceID != "" {
				t.Errorf("the Python member has instance id %q: not the dynamic member it should be", m.InstanceID)
			}
		}
	}
	t.Logf("mixed group: flecht holds %v partitions, Python %d", mine, pyHolds())

	// 1. flecht SIGKILLed and restarted.
	moves, theirs := pyMoves(), pyHolds()
	f.kill()
	restarted := time.Now()
	f = startFlecht()
	waitUntil(t, time.Minute, "the restarted flecht holding its partitions and committing", func() bool {
		f.alive()
		v, err := f.tryMetric("flechtwerk_transactions_committed_total")
		return tasks(f) == mine && err == nil && v > 0
	})
	back := time.Since(restarted)
	if back >= session {
		t.Errorf("the restarted flecht committed with its partitions %s after its restart, not before its killed member's session (%s) could expire", back, session)
	}
	if got := pyMoves(); got != moves || pyHolds() != theirs {
		t.Errorf("the Python member's tasks moved when flecht restarted: %d task changes logged (were %d), holds %d (held %d):\n%s",
			got, moves, pyHolds(), theirs, tail(py.logs(), 10))
	}
	t.Logf("flecht SIGKILLed and restarted: its %v partitions back and committing %s after the restart began; the Python member's %d untouched",
		mine, back.Round(10*time.Millisecond), theirs)

	// 2. flecht stopped with SIGTERM: still a member until its session
	// expires, then Python takes everything.
	f.stop()
	stopped := time.Now()
	if !hasInstance(groupMembers(t, h.app), "flecht-0") {
		t.Error("flecht left the group on SIGTERM without --leave-group")
	}
	waitUntil(t, 2*time.Minute, "Python holding every partition", func() bool { py.alive(); return pyHolds() == handoverPartitions })
	kept := time.Since(stopped)
	t.Logf("flecht stopped (SIGTERM): Python held all %d partitions %s later (flecht's session %s)", handoverPartitions, kept.Round(10*time.Millisecond), session)

	// 3. flecht with --leave-group: it leaves at once.
	f = startFlecht("--leave-group")
	split(f)
	f.stop()
	stopped = time.Now()
	if hasInstance(groupMembers(t, h.app), "flecht-0") {
		t.Error("flecht is still a member after SIGTERM with --leave-group")
	}
	waitUntil(t, 2*time.Minute, "Python holding every partition", func() bool { py.alive(); return pyHolds() == handoverPartitions })
	left := time.Since(stopped)
	t.Logf("flecht stopped with --leave-group: Python held all %d partitions %s later", handoverPartitions, left.Round(10*time.Millisecond))
	if left >= kept {
		t.Errorf("Python took over %s after flecht left, no sooner than after its plain stop (%s)", left, kept)
	}

	close(stop)
	<-produced
	waitCommitted(t, h.adm, h.app, h.in, int64(h.produced), 3*time.Minute, py)
	py.stop()
	rep := h.checkOutput(nil)
	n := h.checkChangelog()
	t.Logf("mixed group: restart back in %s with Python untouched; plain stop handed over in %s, --leave-group in %s; %s; %d changelog records",
		back.Round(10*time.Millisecond), kept.Round(10*time.Millisecond), left.Round(10*time.Millisecond), rep, n)
}
