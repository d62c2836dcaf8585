//go:build e2e

package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// A scale-down without a pod-spec change: one of two transformer
// instances is stopped without --leave-group, so its static member stays
// and holds its partitions idle; `flecht group leave --execute` removes it,
// and the other instance holds every partition within seconds instead of
// after the stopped member's session timeout.
func TestGroupLeaveScalesDownAStaticMember(t *testing.T) {
	app := topicName(t, "app")
	raw, out := topicName(t, "raw"), topicName(t, "out")
	rpCreate(t, raw, 4, nil)
	rpCreate(t, out, 4, nil)
	stage := rpStage(t, app, raw, out)
	adm := kadm.NewClient(rpClient(t))
	rpRunStage(t, stage, "count-a", t.TempDir())
	b := rpRunStage(t, stage, "count-b", t.TempDir())
	rpWaitMembers(t, adm, app, 2, 2*time.Minute)
	b.stop()
	if g := rpWaitMembers(t, adm, app, 2, 5*time.Second); len(g.Members) != 2 {
		t.Fatalf("the stopped static member left on its own: %+v", g.Members)
	}

	out1, errOut, code := runFlecht(t, "", "group", "leave", app, "--instance", "count-b", "--execute", "--watch", "2s", "-b", brokers)
	if code != 0 || !strings.Contains(out1, "removed count-b") || !strings.Contains(out1, "no removed member rejoined within 2s") {
		t.Fatalf("group leave: exit %d\n%s%s", code, out1, errOut)
	}
	began := time.Now()
	g := rpWaitMembers(t, adm, app, 1, 8*time.Second) // its session is 10 s: faster than that, or the leave did nothing
	held := 0
	for _, a := range g.Members[0].Assigned {
		held += len(a.Partitions)
	}
	if g.Members[0].ClientID != "count-a" || held != 4 {
		t.Fatalf("after the leave: %+v", g.Members)
	}
	t.Logf("count-a held all 4 partitions %s after the leave", time.Since(began).Round(10*time.Millisecond))

	// count-a runs: removed, it rejoins at its next heartbeat and takes
	// its partitions back, which the command says, exiting 3.
	out2, errOut, code := runFlecht(t, "", "group", "leave", app, "--instance", "count-a", "--execute", "-b", brokers)
	if code != 3 || !strings.Contains(out2, "removed count-a") || !strings.Contains(out2, "count-a is running: it rejoined the group") {
		t.Fatalf("group leave of a running member: exit %d\n%s%s", code, out2, errOut)
	}
	g = rpWaitMembers(t, adm, app, 1, 30*time.Second)
	if g.Members[0].InstanceID != "count-a" {
		t.Fatalf("after the leave of a running member: %+v", g.Members)
	}
}
