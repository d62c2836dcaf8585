package lease

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/flecht-dev/flecht/internal/health"
	"github.com/flecht-dev/flecht/internal/state"
)

// restoreBoard holds the restores under way of one member, so that its
// readiness probe says which leases are restoring, how much of their
// changelog is left and when they should be done. A nil board shows
// nothing (a lease started on its own, in tests).
type restoreBoard struct {
	ready *health.Condition
	app   string
	what  string

	mu    sync.Mutex
	left  map[int32]state.Progress
	shown time.Time
}

// boardEvery bounds how often progress rewrites the readiness detail.
const boardEvery = 200 * time.Millisecond

func (b *restoreBoard) begin(n int32, left int64) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.left == nil {
		b.left = map[int32]state.Progress{}
	}
	b.left[n] = state.Progress{Left: left}
	b.show()
}

func (b *restoreBoard) update(n int32, p state.Progress) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.left[n] = p
	if time.Since(b.shown) >= boardEvery {
		b.show()
	}
}

func (b *restoreBoard) end(n int32) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.left, n)
	if len(b.left) > 0 {
		b.show()
	}
}

// show writes the board into the readiness detail; the caller holds mu.
// When the last restore ends the set's own report takes over.
func (b *restoreBoard) show() {
	b.shown = time.Now()
	ns := make([]int32, 0, len(b.left))
	for n := range b.left {
		ns = append(ns, n)
	}
	sort.Slice(ns, func(i, j int) bool { return ns[i] < ns[j] })
	parts := make([]string, 0, len(ns))
	for _, n := range ns {
		parts = append(parts, fmt.Sprintf("%s %d (%s)", b.what, n, describeProgress(b.left[n])))
	}
	b.ready.Set(false, fmt.Sprintf("joined group %s; restoring from the changelog: %s", b.app, strings.Join(parts, ", ")))
}

// describeProgress says how much of a restore is left.
func describeProgress(p state.Progress) string {
	s := fmt.Sprintf("%d changelog records left", p.Left)
	if eta := p.ETA(); eta > 0 {
		s += ", about " + eta.Round(100*time.Millisecond).String()
	}
	return s
}
