//go:build e2e

package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The plan-is-minimal proofs of the stage kinds beside the builtin
// transformer (secured_minimal_test.go): a module transformer with a
// config topic, the http-poll extractor (run, replay, operate) and the
// MQTT bridge. Each runs with exactly its plan, and without any one ACL
// of it refuses, naming that ACL.

// refusedStart is the work of a run plan's proof: start, which must exit
// non-zero within 40 s (the preflight refuses before the stage joins).
func refusedStart(start func(t *testing.T) *proc) func(t *testing.T) (bool, string) {
	return func(t *testing.T) (bool, string) {
		p := start(t)
		select {
		case <-p.done:
			return p.code != 0, p.logs()
		case <-time.After(40 * time.Second):
			p.signal(syscall.SIGKILL)
			<-p.done
			return false, p.logs()
		}
	}
}

// TestSecuredModulePlanIsMinimal: a WebAssembly module transformer (enrich)
// with a config topic and a dead-letter topic runs over mutual TLS with
// exactly its run plan, and without any one ACL of the plan refuses to
// start, naming it.
func TestSecuredModulePlanIsMinimal(t *testing.T) {
	s := secured(t)
	const principal = "lp-min-mod"
	wasm := filepath.Join(repoRoot, "bin", "modules", "enrich.wasm")
	app := topicName(t, "app")
	raw, cfg, out := app+".raw", app+".config", app+".enriched"
	s.createTopic(t, raw, 2, nil)
	s.createTopic(t, cfg, 1, map[string]string{"cleanup.policy": "compact"})
	s.createTopic(t, out, 2, nil)
	stage := writeStage(t, fmt.Sprintf(`application_id: %s
kind: transformer
input_topics: [%s]
config_topics: [%s]
invalid_messages: dlq
transform:
  module: %s
  output_topics: [%s]
  config: {lookup: device, into: meta, missing: reject}
`, app, raw, cfg, wasm, out))
	plan := aclPlan(t, stage, principal, "run")
	s.grant(t, plan...)
	conf := s.profile(t, mechMTLS, principal)
	s.putConfigAsAdmin(t, cfg, "d-1", map[string]any{"site": "north"})

	// The whole plan: the device's record is enriched, the one without a
	// config and the one that is not JSON are dead-lettered.
	s.produceAsAdmin(t, raw, `{"device":"d-1","n":1}`, `{"device":"d-9","n":2}`, `not json`)
	p := startSecuredRun(t, conf, stage, "module-0")
	if got := s.waitRecords(t, out, 1, 90*time.Second); !strings.Contains(string(got[0].Value), "north") {
		t.Errorf("not enriched: %s", got[0].Value)
	}
	s.waitRecords(t, raw+".dlq", 2, 30*time.Second)
	p.alive()
	p.stop()

	s.minimalProof(t, plan, refusedStart(func(t *testing.T) *proc {
		return startSecuredRun(t, conf, stage, "module-0")
	}))
}

// TestSecuredExtractorPlansAreMinimal: the http-poll extractor runs over
// SCRAM-SHA-512 with exactly its run plan (its output named by
// --output-topics), and without any one ACL of it refuses to start; its
// replay plan (--truncate-outputs) and operate plan, applied exactly, let
// `flecht replay --execute` and status, lint and the replay's dry run
// work, and trace reads a raw record, and fail naming any one ACL left
// out.
func TestSecuredExtractorPlansAreMinimal(t *testing.T) {
	s := secured(t)
	keyring, token := secretKeyring(t, "s3cret-api-key")
	srv := startFeedAPI(t, &feedAPI{key: "s3cret-api-key", start: time.Now(), perSec: 1000, max: 30})
	app := topicName(t, "poll")
	cfg, raw := app+".config", app+".raw"
	s.createTopic(t, cfg, 1, map[string]string{"cleanup.policy": "compact"})
	s.createTopic(t, raw, 1, nil)
	s.putConfigAsAdmin(t, cfg, "feed-a", feedConfig(srv.URL+"/feeds/a", raw, token))
	stage := pollStage(t, app, cfg)
	runPlan := aclPlan(t, stage, "lp-min-extract", "run", "--output-topics", raw)
	replayPlan := aclPlan(t, stage, "lp-min-extract-replay", "replay", "--output-topics", raw, "--truncate-outputs")
	opsPlan := aclPlan(t, stage, "lp-min-extract-ops", "operate", "--output-topics", raw)
	s.grant(t, runPlan...)
	s.grant(t, replayPlan...)
	s.grant(t, opsPlan...)
	runner := append(securedProcEnv(s.profile(t, mechSCRAM, "lp-min-extract")), "FLECHT_KEYRING="+keyring)
	start := func(t *testing.T) *proc {
		return startProc(t, "poll-0", false, runner, "run", "-f", stage, "--client-id", "poll-0", "--state-dir", t.TempDir(),
			"--metrics-listen", "127.0.0.1:0", "--session-timeout", testSessionTimeout)
	}

	t.Run("run", func(t *testing.T) {
		p := start(t)
		s.waitRecords(t, raw, 30, 90*time.Second)
		p.alive()
		p.stop()
		s.minimalProof(t, runPlan, refusedStart(start))
	})

	// The extractor's static member stays until its session ends.
	waitUntil(t, 60*time.Second, "the extractor's group to empty", func() bool {
		gs, err := s.admin(t).DescribeGroups(testCtx(t, 10*time.Second), app)
		return err == nil && len(gs[app].Members) == 0
	})
	ops, replayer := s.profile(t, mechMTLS, "lp-min-extract-ops"), s.profile(t, mechOAuth, "lp-min-extract-replay")
	run := func(config string, args ...string) (int, string) {
		o, errOut, code := runSecured(t, config, "", args...)
		return code, o + errOut
	}

	t.Run("operate", func(t *testing.T) {
		opsWork := func(t *testing.T) (bool, string) {
			var all strings.Builder
			failed := false
			for _, args := range [][]string{{"status", app, "-f", stage}, {"lint", "topics", "-f", stage}, {"replay", app, "-f", stage}, {"trace", raw + "/0@0"}} {
				code, o := run(ops, args...)
				all.WriteString(o)
				// exit 4 for lint is a finding (the 7-day retention); a
				// finding about what it cannot see counts as failing.
				if (code != 0 && code != 4) || strings.Contains(o, "not authorized") {
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
			code, o := run(replayer, "replay", app, "-f", stage, "--output-topics", raw, "--truncate-outputs", "--execute")
			return code != 0, o
		}
		s.minimalProof(t, replayPlan, replayWork)
		if failed, o := replayWork(t); failed {
			t.Fatalf("replay with its whole plan failed:\n%s", o)
		}
	})
}

// TestSecuredBridgePlanIsMinimal: the MQTT bridge relays from Mosquitto
// over OAUTHBEARER with exactly its run plan (its output named by
// --output-topics), and without any one ACL of it refuses to start,
// naming it.
func TestSecuredBridgePlanIsMinimal(t *testing.T) {
	s := secured(t)
	m := startMosquitto(t)
	app := topicName(t, "bridge")
	cfg, raw := app+".config", app+".raw"
	s.createTopic(t, cfg, 1, map[string]string{"cleanup.policy": "compact"})
	s.createTopic(t, raw, 2, nil)
	s.putConfigAsAdmin(t, cfg, "sensors", relayConfig("sensors/+/events", raw, "{payload.id}"))
	stage := bridgeStage(t, app, cfg, m.Addr)
	plan := aclPlan(t, stage, "lp-min-bridge", "run", "--output-topics", raw)
	s.grant(t, plan...)
	env := securedProcEnv(s.profile(t, mechOAuth, "lp-min-bridge"))
	start := func(t *testing.T) *proc {
		return startProc(t, "bridge-0", false, env, "run", "-f", stage, "--client-id", "bridge-0",
			"--metrics-listen", "127.0.0.1:0", "--session-timeout", testSessionTimeout)
	}

	p := start(t)
	waitSubscribedLog(t, p, app, "sensors/+/events")
	pub := newMQTTPub(t, m.Addr, "e2e-secured-min-pub")
	ctx := testCtx(t, 2*time.Minute)
	if err := pub.connect(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := pub.publish(ctx, "sensors/s1/events", i, fmt.Appendf(nil, `{"id":"s1","n":%d}`, i)); err != nil {
			t.Fatal(err)
		}
	}
	s.waitRecords(t, raw, 5, 90*time.Second)
	p.alive()
	p.stop()

	s.minimalProof(t, plan, refusedStart(start))
}
