package lease

import (
	"testing"
	"time"

	"github.com/flecht-dev/flecht/internal/health"
	"github.com/flecht-dev/flecht/internal/state"
)

// While leases restore, readiness names each with the changelog records it
// has left and, once it has a rate, when it should be done; the last one
// to end leaves the detail to the set's own report.
func TestRestoreBoardShowsWhatIsLeft(t *testing.T) {
	reg := health.New()
	ready := reg.Condition("group", "not joined yet")
	b := &restoreBoard{ready: ready, app: "app", what: "task"}
	detail := func() string { return reg.Readiness().Checks[0].Detail }

	b.begin(3, 120000)
	b.begin(1, 50)
	if got, want := detail(), "joined group app; restoring from the changelog: task 1 (50 changelog records left), task 3 (120000 changelog records left)"; got != want {
		t.Fatalf("begun: %q, want %q", got, want)
	}
	b.shown = time.Time{} // past the throttle
	b.update(3, state.Progress{Records: 20000, Left: 100000, Rate: 50000})
	if got, want := detail(), "joined group app; restoring from the changelog: task 1 (50 changelog records left), task 3 (100000 changelog records left, about 2s)"; got != want {
		t.Fatalf("progress: %q, want %q", got, want)
	}
	b.update(3, state.Progress{Records: 30000, Left: 90000, Rate: 50000})
	if got := detail(); got != "joined group app; restoring from the changelog: task 1 (50 changelog records left), task 3 (100000 changelog records left, about 2s)" {
		t.Fatalf("the detail changed within %v: %q", boardEvery, got)
	}
	b.end(1)
	if got, want := detail(), "joined group app; restoring from the changelog: task 3 (90000 changelog records left, about 1.8s)"; got != want {
		t.Fatalf("one ended: %q, want %q", got, want)
	}
	ready.Set(true, "the set's report")
	b.end(3)
	if got := detail(); got != "the set's report" {
		t.Fatalf("the last end rewrote the detail: %q", got)
	}
	if reg.Readiness().OK != true {
		t.Fatal("not ready")
	}
	var none *restoreBoard
	none.begin(1, 1) // a lease started on its own has no board
	none.update(1, state.Progress{})
	none.end(1)
}
