//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestSecuredStageLifecycle: one count stage through its life on the
// secured node, every principal holding exactly its role's plan and each
// on another mechanism: a feeder (OAUTHBEARER) creates the topics, feeds
// the input and reads the output; the stage (SCRAM-SHA-512) runs; an
// operator (mutual TLS) runs status, doctor, lint topics and a replay dry
// run; a replayer (OAUTHBEARER) replays with --truncate-outputs.
func TestSecuredStageLifecycle(t *testing.T) {
	s := secured(t)
	app := topicName(t, "app")
	raw, out := app+".raw", app+".refined"
	stage := writeStage(t, fmt.Sprintf(`application_id: %s
kind: transformer
input_topics: [%s]
transform:
  builtin: count
  output_topic: %s
`, app, raw, out))
	s.grant(t, aclPlan(t, stage, "lp-feed", "feed")...)
	s.grant(t, aclPlan(t, stage, "lp-minimal", "run")...)
	s.grant(t, aclPlan(t, stage, "lp-ops", "operate")...)
	s.grant(t, aclPlan(t, stage, "lp-replay", "replay", "--truncate-outputs")...)
	feed := s.profile(t, mechOAuth, "lp-feed")
	runner := s.profile(t, mechSCRAM, "lp-minimal")
	ops := s.profile(t, mechMTLS, "lp-ops")
	replayer := s.profile(t, mechOAuth, "lp-replay")

	must := func(config, stdin string, args ...string) string {
		t.Helper()
		o, errOut, code := runSecured(t, config, stdin, args...)
		if code != 0 {
			t.Fatalf("flecht %s: exit %d\n%s%s", strings.Join(args, " "), code, o, errOut)
		}
		return o
	}

	// feed: the topics, then the input.
	must(feed, "", "topic", "create", "-f", stage, "--partitions", "2")
	var lines strings.Builder
	for i := range 6 {
		fmt.Fprintf(&lines, `{"key":"k%d","value":{"n":%d}}`+"\n", i%2, i)
	}
	must(feed, lines.String(), "topic", "produce", raw)

	// run.
	p := startSecuredRun(t, runner, stage, "count-0")
	s.waitRecords(t, out, 6, 90*time.Second)
	consumed := must(feed, "", "topic", "consume", out)
	if n := strings.Count(strings.TrimSpace(consumed), "\n") + 1; n != 6 {
		t.Fatalf("topic consume %s: %d lines, want 6:\n%s", out, n, consumed)
	}

	// operate, read-only, while the stage runs. lint and doctor may
	// report findings (exit 4: the topics keep 7 days, a replay reaches
	// back only that far), but none about what the principal may see.
	findingsOnly := func(args ...string) {
		t.Helper()
		o, errOut, code := runSecured(t, ops, "", args...)
		if (code != 0 && code != 4) || strings.Contains(strings.ToLower(o+errOut), "authoriz") {
			t.Fatalf("flecht %s: exit %d\n%s%s", strings.Join(args, " "), code, o, errOut)
		}
	}
	must(ops, "", "status", app, "-f", stage, "-o", "json")
	findingsOnly("lint", "topics", "-f", stage, "-o", "json")
	findingsOnly("doctor", app, "-f", stage, "--metrics-url", p.metricsURL(), "--interval", "2s", "-o", "json")
	// The replay's dry run refuses (exit 3) while the stage is a live
	// member, and says so; it must not fail on what it may not see.
	if o, errOut, code := runSecured(t, ops, "", "replay", app, "-f", stage, "-o", "json"); (code != 0 && !(code == 3 && strings.Contains(o, "live member"))) || strings.Contains(strings.ToLower(o+errOut), "authoriz") {
		t.Fatalf("replay (dry run): exit %d\n%s%s", code, o, errOut)
	}

	// replay --execute with the outputs truncated, once the stage stopped.
	p.stop()
	must(replayer, "", "replay", app, "-f", stage, "--truncate-outputs", "--wait", "30s", "--execute", "-o", "json")
	ends := rpListed(t, out, s.admin(t).ListEndOffsets)
	starts := rpListed(t, out, s.admin(t).ListStartOffsets)
	for part, end := range ends {
		if starts[part] != end {
			t.Errorf("%s/%d: log start %d, end %d: not truncated", out, part, starts[part], end)
		}
	}
}
