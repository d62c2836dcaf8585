//go:build e2e

package e2e

import (
	"fmt"
	"testing"
	"time"
)

// TestSecuredStandbysUnderTheRunPlan: two instances of a count stage with
// standby_replicas: 1 run over SCRAM-SHA-512 with exactly `flecht acl plan
// --role run`: each keeps the other's task warm (following its changelog
// read_committed needs nothing the plan lacks: no "standby cannot follow"
// warning), and when one is killed the other takes its task over from
// that standby with a tail restore.
func TestSecuredStandbysUnderTheRunPlan(t *testing.T) {
	s := secured(t)
	const principal = "lp-standby"
	app := topicName(t, "app")
	raw, out := app+".raw", app+".refined"
	s.createTopic(t, raw, 2, nil)
	s.createTopic(t, out, 2, nil)
	stage := writeStage(t, fmt.Sprintf(`application_id: %s
kind: transformer
input_topics: [%s]
standby_replicas: 1
transform:
  builtin: count
  output_topic: %s
`, app, raw, out))
	s.grant(t, aclPlan(t, stage, principal, "run")...)
	cfg := s.profile(t, mechSCRAM, principal)

	a := startSecuredRun(t, cfg, stage, "sb-a")
	b := startSecuredRun(t, cfg, stage, "sb-b")
	waitUntil(t, 90*time.Second, "one task and one warm standby on each instance", func() bool {
		for _, p := range []*proc{a, b} {
			if p.exited() {
				t.Fatalf("%s exited (%d):\n%s", p.name, p.code, tail(p.logs(), 30))
			}
			tasks, err1 := p.tryMetric("flechtwerk_tasks_assigned")
			warm, err2 := p.tryMetric("flechtwerk_standby_tasks", `state="warm"`)
			if err1 != nil || err2 != nil || tasks != 1 || warm != 1 {
				return false
			}
		}
		return true
	})
	var values []string
	for i := range 30 {
		values = append(values, fmt.Sprintf(`{"n":%d}`, i))
	}
	s.produceAsAdmin(t, raw, values...)
	s.waitRecords(t, out, 30, 60*time.Second)
	time.Sleep(2 * time.Second) // a few standby polls past the last commit

	tails := b.metric("flechtwerk_state_restores_total", `kind="tail"`)
	a.kill()
	waitUntil(t, time.Minute, "sb-b to run both tasks", func() bool {
		v, err := b.tryMetric("flechtwerk_tasks_assigned")
		return err == nil && v == 2
	})
	if got := b.metric("flechtwerk_state_restores_total", `kind="tail"`) - tails; got != 1 {
		t.Errorf("sb-b took sb-a's task with %v tail restores, want 1 (from its standby)", got)
	}
	s.produceAsAdmin(t, raw, `{"n":30}`, `{"n":31}`, `{"n":32}`)
	s.waitRecords(t, out, 33, 60*time.Second)
	b.stop()
	for _, p := range []*proc{a, b} {
		if n := p.logCount("standby cannot follow its changelog"); n > 0 {
			t.Errorf("%s: a standby could not follow its changelog under the run plan:\n%s", p.name, tail(p.logs(), 30))
		}
	}
}
