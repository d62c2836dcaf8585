package show

import (
	"bytes"
	"strings"
	"testing"

	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/replay"
	"github.com/flecht-dev/flecht/internal/ui"
)

// A replay that stopped after some steps is never shown under a "dry run"
// header: it says it stopped part-way and how to finish.
func TestReplayStoppedPartWayIsNoDryRun(t *testing.T) {
	plan := &replay.Plan{ApplicationID: "app", GroupState: kafkax.GroupStateDead, Members: []kafkax.GroupMember{},
		Fence: []string{"app-0"}, Steps: []replay.Step{{Step: "fence", Detail: "initialised 1 transactional ID"}}}
	var b bytes.Buffer
	if err := Replay(ui.NewHuman(&b, false), plan); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if strings.Contains(out, "dry run") || !strings.Contains(out, "stopped part-way") || !strings.Contains(out, "run the same command again") {
		t.Errorf("shown as:\n%s", out)
	}
}

// The plan says which lineage generation the rebuild writes, and the one
// before it.
func TestReplayShowsTheGeneration(t *testing.T) {
	plan := &replay.Plan{ApplicationID: "app", GroupState: "Empty", Members: []kafkax.GroupMember{}, Generation: 3, GenerationBefore: 2,
		Offsets: []replay.Offset{{Topic: "raw", Partition: 0, Role: replay.RoleInput}}}
	var b bytes.Buffer
	if err := Replay(ui.NewHuman(&b, false), plan); err != nil {
		t.Fatal(err)
	}
	if out := b.String(); !strings.Contains(out, "generation") || !strings.Contains(out, "3: the rebuild's outputs carry it") || !strings.Contains(out, "so far: 2") {
		t.Errorf("shown as:\n%s", out)
	}
}
