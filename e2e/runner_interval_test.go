//go:build e2e

package e2e

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Chaos inside a commit interval: the transformer's transactions span
// several polls (commit_interval 500ms, max_poll_records 100), and every
// counted SIGKILL lands while the process holds far more processed than
// committed records, so at least one task's open transaction carries
// records of several polls — outputs produced, state changed, offsets not
// committed — and the kill cuts it (fewer inputs committed after the kill
// than were processed before it). Afterwards every input is in the output
// exactly once with per-key seq 1..n.
func TestRunnerChaosKillMidInterval(t *testing.T) {
	const (
		total      = 600_000
		keys       = 500
		partitions = 6
		maxPoll    = 100
		kills      = 4
	)
	app, in, out := runnerTopics(t, partitions)
	want := produceInputs(t, inputProducer(t), in, partitions, 0, total, keys, 60)
	stageFile := filepath.Join(t.TempDir(), "stage.yaml")
	yaml := fmt.Sprintf(`application_id: %s
kind: transformer
input_topics: [%s]
max_poll_records: %d
commit_interval: 500ms
max_transaction_records: 200000
transform:
  builtin: count
  output_topic: %s
`, app, in, maxPoll, out)
	if err := os.WriteFile(stageFile, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	stateDir := t.TempDir()
	adm := admin(t)
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 11))
	t.Logf("seed %d", seed)

	// More processed than committed, by more than a poll per task: some
	// task's open transaction holds records of several polls.
	const severalPolls = partitions*maxPoll + 1
	type kill struct{ processed, committedBefore, committedAfter int64 }
	var done []kill
	for attempt := 1; len(done) < kills; attempt++ {
		if attempt > 3*kills {
			t.Fatalf("only %d of %d kills cut an open transaction in %d attempts", len(done), kills, attempt-1)
		}
		k := len(done)
		p := startRun(t, stageFile, "interval-0", stateDir)
		before, err := committed(testCtx(t, 30*time.Second), adm, app, in)
		if err != nil {
			t.Fatal(err)
		}
		// A random share more commits first, so the kills spread over
		// the run and leave most of it for the later ones.
		target := before + 1 + rng.Int64N(total/20)
		waitCommitted(t, adm, app, in, target, 3*time.Minute, p)
		var processed, committedNow int64
		waitUntil(t, 3*time.Minute, "an open transaction holding several polls", func() bool {
			if p.exited() {
				t.Fatalf("flecht exited (%d):\n%s", p.code, tail(p.logs(), 30))
			}
			v, err := p.tryMetric("flechtwerk_messages_in_total")
			if err != nil {
				return false
			}
			// Offsets read after the metric: the gap is if anything
			// smaller than it really is.
			c, err := committed(testCtx(t, 10*time.Second), adm, app, in)
			if err != nil {
				return false
			}
			processed, committedNow = before+int64(v), c
			// The metric counts this life's records only, from the
			// offsets committed when it started.
			return processed-committedNow >= severalPolls
		})
		p.kill()
		after, err := committed(testCtx(t, 30*time.Second), adm, app, in)
		if err != nil {
			t.Fatal(err)
		}
		if after >= total {
			t.Fatalf("kill %d was not mid-run: %d of %d inputs committed", k+1, after, total)
		}
		if after >= processed {
			// A commit landed between the look and the kill: this kill
			// proves nothing about an open interval; it does not count.
			t.Logf("kill attempt %d: %d committed after the kill, %d processed before it: not counted", attempt, after, processed)
			continue
		}
		done = append(done, kill{processed, committedNow, after})
		t.Logf("kill %d: SIGKILL with %d inputs processed, %d committed just before (open: at least %d), %d committed after",
			k+1, processed, committedNow, processed-committedNow, after)
	}

	p := startRun(t, stageFile, "interval-0", stateDir)
	waitCommitted(t, adm, app, in, total, 5*time.Minute, p)
	p.stop()
	rep := checkExactlyOnce(t, out, want)
	t.Logf("chaos mid-interval: %d SIGKILLs %v; %s", len(done), done, rep)
}
