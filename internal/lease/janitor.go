package lease

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// janitor removes the stores of leases that left this member for good: a
// store in the state directory that no lease, pending start or standby
// has used for delay is deleted, so that the disk of an instance whose
// tasks moved away (a scale-out) does not fill for ever. A lease that
// comes back within delay finds its store and reads only the tail.
type janitor struct {
	dir   string
	delay time.Duration
	log   *slog.Logger
	// unused holds since when each store found was not in use.
	unused map[int32]time.Time
	last   time.Time
}

// every is how often the state directory is looked at.
func (j *janitor) every() time.Duration {
	return min(30*time.Second, max(j.delay/4, 250*time.Millisecond))
}

// sweep removes what has been unused for delay at now. inUse says whether
// n is held or waiting to start; standbys (may be nil) whether it is kept
// as a standby, and removes the store only while it is not.
func (j *janitor) sweep(now time.Time, inUse func(n int32) bool, standbys *Standbys) {
	if now.Sub(j.last) < j.every() {
		return
	}
	j.last = now
	entries, err := os.ReadDir(j.dir)
	if err != nil {
		return // the next start says what is wrong with the directory
	}
	seen := map[int32]bool{}
	for _, e := range entries {
		n, err := strconv.ParseInt(e.Name(), 10, 32)
		if err != nil || !e.IsDir() || strconv.Itoa(int(n)) != e.Name() || n < 0 {
			continue // not a store's directory: never ours to remove
		}
		p := int32(n)
		seen[p] = true
		if inUse(p) || standbys.keeps(p) {
			delete(j.unused, p)
			continue
		}
		since, ok := j.unused[p]
		if !ok {
			j.unused[p] = now
			continue
		}
		if now.Sub(since) < j.delay {
			continue
		}
		path := filepath.Join(j.dir, e.Name())
		removed, err := standbys.removeUnkept(p, func() error { return os.RemoveAll(path) })
		switch {
		case err != nil:
			j.log.Warn("removing the store of a task that left this instance failed; retrying", "n", p, "dir", path, "error", err)
		case removed:
			delete(j.unused, p)
			j.log.Info(fmt.Sprintf("removed the store of task %d: not used here for %s (state_cleanup_delay)", p, now.Sub(since).Round(time.Second)), "dir", path)
		}
	}
	for p := range j.unused {
		if !seen[p] {
			delete(j.unused, p)
		}
	}
}
