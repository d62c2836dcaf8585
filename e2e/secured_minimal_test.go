//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// minimalProof revokes each ACL of plan in turn and runs work, which must
// then fail (or, for a read-only role, report) naming that ACL; the ACL
// is granted again after.
func (s *securedTier) minimalProof(t *testing.T, plan []aclEntry, work func(t *testing.T) (failed bool, output string)) {
	t.Helper()
	for _, a := range plan {
		t.Run("without "+needText(a), func(t *testing.T) {
			s.revoke(t, a)
			defer s.grant(t, a)
			failed, output := work(t)
			if !failed {
				t.Fatalf("succeeded without %s", needText(a))
			}
			if !namesACL(output, a) {
				t.Errorf("does not name %q:\n%s", needText(a), whyLines(output))
			}
		})
	}
}

// TestSecuredRolePlansAreMinimal: the feed, replay and operate plans of a
// count stage, each applied exactly, let the role's work succeed, and
// without any one of their ACLs the work fails naming it. The operate
// work includes verify and trace, which read the outputs.
func TestSecuredRolePlansAreMinimal(t *testing.T) {
	s := secured(t)
	app := topicName(t, "app")
	raw, out := app+".raw", app+".refined"
	stage := writeStage(t, fmt.Sprintf("application_id: %s\nkind: transformer\ninput_topics: [%s]\ntransform:\n  builtin: count\n  output_topic: %s\n", app, raw, out))
	feed := s.profile(t, mechOAuth, "lp-feed")
	replayer := s.profile(t, mechSCRAM, "lp-replay")
	ops := s.profile(t, mechMTLS, "lp-ops")
	feedPlan := aclPlan(t, stage, "lp-feed", "feed")
	replayPlan := aclPlan(t, stage, "lp-replay", "replay", "--truncate-outputs")
	opsPlan := aclPlan(t, stage, "lp-ops", "operate")
	s.grant(t, feedPlan...)
	s.grant(t, replayPlan...)
	s.grant(t, opsPlan...)
	s.grant(t, aclPlan(t, stage, "lp-minimal", "run")...)

	run := func(config string, args ...string) (int, string) {
		o, errOut, code := runSecured(t, config, `{"key":"k","value":{"n":1}}`+"\n", args...)
		return code, o + errOut
	}
	feedWork := func(t *testing.T) (bool, string) {
		var all strings.Builder
		for _, args := range [][]string{{"topic", "create", "-f", stage}, {"topic", "produce", raw}, {"topic", "consume", out}} {
			code, o := run(feed, args...)
			all.WriteString(o)
			if code != 0 {
				return true, all.String()
			}
		}
		return false, all.String()
	}
	// Each feed run starts without the topics, so that create creates.
	deleteTopics := func(t *testing.T) {
		t.Helper()
		if _, err := s.admin(t).DeleteTopics(testCtx(t, 30*time.Second), raw, out); err != nil {
			t.Fatal(err)
		}
		waitUntil(t, 30*time.Second, "the topics deleted", func() bool {
			td, err := s.admin(t).ListTopics(testCtx(t, 10*time.Second), raw, out)
			return err == nil && !td.Has(raw) && !td.Has(out)
		})
	}
	t.Run("feed", func(t *testing.T) {
		if failed, o := feedWork(t); failed {
			t.Fatalf("feed with its whole plan failed:\n%s", o)
		}
		s.minimalProof(t, feedPlan, func(t *testing.T) (bool, string) {
			deleteTopics(t)
			return feedWork(t)
		})
		// Leave the topics for the roles below.
		deleteTopics(t)
		if failed, o := feedWork(t); failed {
			t.Fatalf("feed: %s", o)
		}
	})

	// The stage runs once, so that it has state, offsets and outputs.
	p := startSecuredRun(t, s.profile(t, mechSCRAM, "lp-minimal"), stage, "count-0")
	s.waitRecords(t, out, 1, 90*time.Second)
	p.stop()

	t.Run("operate", func(t *testing.T) {
		opsWork := func(t *testing.T) (bool, string) {
			var all strings.Builder
			failed := false
			for _, args := range [][]string{{"status", app, "-f", stage}, {"lint", "topics", "-f", stage}, {"replay", app, "-f", stage},
				{"verify", "-f", stage}, {"trace", out, "--key", "k"}} {
				code, o := run(ops, args...)
				all.WriteString(o)
				// exit 4 for lint is a finding (the 7-day retention);
				// a finding about what it cannot see counts as failing.
				// exit 3 for the replay's plan is a live member (the
				// stage's static member until its session ends).
				// verify and trace must be clean: their findings would
				// be records they could not read.
				lint, replay := args[0] == "lint", args[0] == "replay"
				if (code != 0 && !(lint && code == 4) && !(replay && code == 3 && strings.Contains(o, "live member"))) || strings.Contains(o, "not authorized") {
					failed = true
				}
			}
			return failed, all.String()
		}
		if failed, o := opsWork(t); failed {
			t.Fatalf("operate with its whole plan failed:\n%s", o)
		}
		s.minimalProof(t, opsPlan, opsWork)
	})

	t.Run("replay", func(t *testing.T) {
		replayWork := func(t *testing.T) (bool, string) {
			code, o := run(replayer, "replay", app, "-f", stage, "--truncate-outputs", "--execute")
			return code != 0, o
		}
		s.minimalProof(t, replayPlan, replayWork)
		if failed, o := replayWork(t); failed {
			t.Fatalf("replay with its whole plan failed:\n%s", o)
		}
	})
}

// whyLines are the lines of output that say what failed or what is not
// authorized, else its last lines.
func whyLines(output string) string {
	var why []string
	for line := range strings.SplitSeq(output, "\n") {
		l := strings.ToLower(line)
		if strings.Contains(l, "authoriz") || strings.Contains(l, "error") || strings.Contains(l, "refused") {
			why = append(why, line)
		}
	}
	if len(why) == 0 {
		return tail(output, 8)
	}
	return strings.Join(why[:min(len(why), 10)], "\n")
}

// namesACL reports whether output names a: as the plan writes it, or, for
// a prefixed ACL, as a name it matches ("Describe on transactional ID
// app-0" for Describe on transactional IDs prefixed app-).
func namesACL(output string, a aclEntry) bool {
	if strings.Contains(output, needText(a)) {
		return true
	}
	if a.PatternType != "prefixed" {
		return false
	}
	one := a
	one.PatternType = "literal"
	return strings.Contains(output, needText(one))
}
