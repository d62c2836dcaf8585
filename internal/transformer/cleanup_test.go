package transformer_test

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/flecht-dev/flecht/internal/metrics"
)

// stores lists the task stores in a state directory.
func stores(t *testing.T, dir string) []int {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, e := range entries {
		if n, err := strconv.Atoi(e.Name()); err == nil && e.IsDir() {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// TestStoresOfTasksThatLeftAreRemoved: with state_cleanup_delay: 1s, the
// stores of tasks that moved to another instance, and a stale one left
// from before, are removed from an instance's disk; those of the tasks it
// runs stay, and so does everything that is not a task's store. With a
// standby replica the moved tasks' stores stay: they are standbys now.
func TestStoresOfTasksThatLeftAreRemoved(t *testing.T) {
	for _, standbys := range []int{0, 1} {
		t.Run("standby_replicas "+strconv.Itoa(standbys), func(t *testing.T) {
			f := newFixture(t)
			f.topics(4, "raw", "refined")
			st := stageFile(t, countStage+"state_cleanup_delay: 1s\nstandby_replicas: "+strconv.Itoa(standbys)+"\n")
			dir := t.TempDir()
			aDir, bDir := filepath.Join(dir, "a"), filepath.Join(dir, "b")
			for _, d := range []string{filepath.Join(aDir, "9"), filepath.Join(aDir, "notes")} {
				if err := os.MkdirAll(d, 0o700); err != nil {
					t.Fatal(err)
				}
			}
			a := f.start(st, aDir, "a")
			f.produce("raw", keyed(400, 40, "a")...)
			waitFor(t, 30*time.Second, "400 outputs", func() bool { return len(f.read("refined")) >= 400 })
			waitFor(t, 10*time.Second, "the stale store 9 to be removed", func() bool {
				return slices.Equal(stores(t, aDir), []int{0, 1, 2, 3})
			})
			if _, err := os.Stat(filepath.Join(aDir, "notes")); err != nil {
				t.Errorf("a directory that is no task's store went: %v", err)
			}

			b := f.start(st, bDir, "b")
			waitFor(t, 30*time.Second, "the tasks split 2 and 2", func() bool {
				return metrics.Value(a.obs.TasksAssigned) == 2 && metrics.Value(b.obs.TasksAssigned) == 2
			})
			if standbys == 0 {
				waitFor(t, 10*time.Second, "a's stores of b's tasks to be removed", func() bool { return len(stores(t, aDir)) == 2 })
			} else {
				// Twice the delay and more: the stores stay as standbys.
				time.Sleep(3 * time.Second)
				if got := stores(t, aDir); !slices.Equal(got, []int{0, 1, 2, 3}) {
					t.Errorf("a keeps stores %v, want all four: two tasks, two standbys", got)
				}
			}
			f.produce("raw", keyed(400, 40, "b")...)
			waitFor(t, 30*time.Second, "800 outputs", func() bool { return len(f.read("refined")) >= 800 })
			if err := b.stop(t); err != nil {
				t.Fatal(err)
			}
			if err := a.stop(t); err != nil {
				t.Fatal(err)
			}
			for k, n := range checkSeq(t, f.read("refined")) {
				if n != 20 {
					t.Errorf("key %s has %d outputs, want 20", k, n)
				}
			}
		})
	}
}
