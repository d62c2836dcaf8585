//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// putConfigAsAdmin writes one config record (a one-partition topic) as the
// super user.
func (s *securedTier) putConfigAsAdmin(t *testing.T, topic, key string, value any) {
	t.Helper()
	b, err := json.Marshal(value)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := s.adminCluster().Client()
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(testCtx(t, 30*time.Second), &kgo.Record{Topic: topic, Key: []byte(key), Value: b}).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// TestSecuredModuleTransformer: a WebAssembly module transformer with a
// dead-letter topic runs over mutual TLS with exactly its run plan.
func TestSecuredModuleTransformer(t *testing.T) {
	s := secured(t)
	wasm := filepath.Join(repoRoot, "bin", "modules", "count.wasm")
	app := topicName(t, "app")
	raw, out := app+".raw", app+".counted"
	s.createTopic(t, raw, 2, nil)
	s.createTopic(t, out, 2, nil)
	stage := writeStage(t, fmt.Sprintf(`application_id: %s
kind: transformer
input_topics: [%s]
invalid_messages: dlq
transform:
  module: %s
  output_topics: [%s]
`, app, raw, wasm, out))
	s.grant(t, aclPlan(t, stage, "lp-run-mod", "run")...)
	s.produceAsAdmin(t, raw, `{"n":1}`, `{"n":2}`, `not json`, `{"n":3}`)
	p := startSecuredRun(t, s.profile(t, mechMTLS, "lp-run-mod"), stage, "module-0")
	s.waitRecords(t, out, 3, 90*time.Second)
	s.waitRecords(t, raw+".dlq", 1, 30*time.Second)
	p.alive()
	p.stop()
}

// TestSecuredBridge: the MQTT bridge relays from Mosquitto into Kafka over
// OAUTHBEARER with exactly its run plan, its token fetched from the tier's
// token endpoint.
func TestSecuredBridge(t *testing.T) {
	s := secured(t)
	m := startMosquitto(t)
	app := topicName(t, "bridge")
	cfg, raw := app+".config", app+".raw"
	s.createTopic(t, cfg, 1, map[string]string{"cleanup.policy": "compact"})
	s.createTopic(t, raw, 2, nil)
	s.putConfigAsAdmin(t, cfg, "sensors", relayConfig("sensors/+/events", raw, "{payload.id}"))
	stage := bridgeStage(t, app, cfg, m.Addr)
	s.grant(t, aclPlan(t, stage, "lp-bridge", "run", "--output-topics", raw)...)
	before := s.tokens.issued.Load()
	p := startProc(t, "bridge-0", false, securedProcEnv(s.profile(t, mechOAuth, "lp-bridge")),
		"run", "-f", stage, "--client-id", "bridge-0", "--metrics-listen", "127.0.0.1:0", "--session-timeout", testSessionTimeout)
	waitSubscribedLog(t, p, app, "sensors/+/events")
	pub := newMQTTPub(t, m.Addr, "e2e-secured-pub")
	ctx := testCtx(t, 2*time.Minute)
	if err := pub.connect(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if err := pub.publish(ctx, "sensors/s1/events", i, fmt.Appendf(nil, `{"id":"s1","n":%d}`, i)); err != nil {
			t.Fatal(err)
		}
	}
	s.waitRecords(t, raw, 20, 90*time.Second)
	if s.tokens.issued.Load() == before {
		t.Error("the bridge logged in with no token from the token endpoint")
	}
	p.alive()
	p.stop()
}

// TestSecuredExtractorAndSecrets: the http-poll extractor runs over
// SCRAM-SHA-512 with exactly its run plan, its API key sealed in its
// config topic; `secrets scan`, `keys rotate-plan` and `secrets
// reencrypt` (plan, then the sweep under a new primary key) work on that
// topic over mutual TLS with hand-written least sets (Read on the config
// topic; the sweep adds Write on it and on the transactional IDs prefixed
// flecht-reencrypt-), and `group leave`
// removes the extractor's static member over OAUTHBEARER with Read on its
// group.
func TestSecuredExtractorAndSecrets(t *testing.T) {
	s := secured(t)
	keyring, token := secretKeyring(t, "s3cret-api-key")
	api := &feedAPI{key: "s3cret-api-key", start: time.Now(), perSec: 1000, max: 30}
	srv := startFeedAPI(t, api)
	app := topicName(t, "poll")
	cfg, raw := app+".config", app+".raw"
	s.createTopic(t, cfg, 1, map[string]string{"cleanup.policy": "compact"})
	s.createTopic(t, raw, 1, nil)
	s.putConfigAsAdmin(t, cfg, "feed-a", feedConfig(srv.URL+"/feeds/a", raw, token))
	stage := pollStage(t, app, cfg)
	s.grant(t, aclPlan(t, stage, "lp-extract", "run", "--output-topics", raw)...)
	p := startProc(t, "poll-0", false, append(securedProcEnv(s.profile(t, mechSCRAM, "lp-extract")), "FLECHT_KEYRING="+keyring),
		"run", "-f", stage, "--client-id", "poll-0", "--state-dir", t.TempDir(), "--metrics-listen", "127.0.0.1:0", "--session-timeout", testSessionTimeout)
	s.waitRecords(t, raw, 30, 90*time.Second)
	p.alive()

	// secrets scan, read-only, while it runs.
	s.grant(t, allow("lp-secrets", "topic", cfg, "literal", "read")...)
	out, errOut, code := runSecured(t, s.profile(t, mechMTLS, "lp-secrets"), "", "secrets", "scan", "--topics", cfg, "--field", "headers.X-Api-Key", "--keyring", keyring, "-o", "json")
	if code != 0 || !strings.Contains(out, cfg) {
		t.Fatalf("secrets scan: exit %d\n%s%s", code, out, errOut)
	}

	out, errOut, code = runSecured(t, s.profile(t, mechMTLS, "lp-secrets"), "", "secrets", "reencrypt", "--topics", cfg, "--field", "headers.X-Api-Key", "--keyring", keyring, "-o", "json")
	if code != 0 || !strings.Contains(out, cfg) {
		t.Fatalf("secrets reencrypt (plan): exit %d\n%s%s", code, out, errOut)
	}

	// A rotation: a new primary key, its plan, and the sweep, which
	// writes the config topic in transactions of its own transactional ID.
	p.signal(9)
	<-p.done
	if _, errOut, code := runFlecht(t, "", "keys", "add", "--keyring", keyring, "--kid", "k2", "--primary"); code != 0 {
		t.Fatalf("keys add: exit %d %s", code, errOut)
	}
	secrets := s.profile(t, mechMTLS, "lp-secrets")
	out, errOut, code = runSecured(t, secrets, "", "keys", "rotate-plan", "--kid", "k2", "--topics", cfg, "--field", "headers.X-Api-Key", "--keyring", keyring)
	if (code != 0 && code != 4) || strings.Contains(strings.ToLower(out+errOut), "authoriz") {
		t.Fatalf("keys rotate-plan: exit %d\n%s%s", code, out, errOut)
	}
	s.grant(t, allow("lp-secrets", "topic", cfg, "literal", "write")...)
	s.grant(t, allow("lp-secrets", "transactional_id", "flecht-reencrypt-", "prefixed", "write")...)
	out, errOut, code = runSecured(t, secrets, "", "secrets", "reencrypt", "--topics", cfg, "--field", "headers.X-Api-Key", "--keyring", keyring, "--execute", "-o", "json")
	if code != 0 || !strings.Contains(out, `"written": 1`) {
		t.Fatalf("secrets reencrypt --execute: exit %d\n%s%s", code, out, errOut)
	}

	// group leave, once it stopped (a static member stays until it leaves
	// or its session ends).
	s.grant(t, allow("lp-group", "group", app, "literal", "read")...)
	out, errOut, code = runSecured(t, s.profile(t, mechOAuth, "lp-group"), "", "group", "leave", app, "--instance", "poll-0", "--execute")
	if code != 0 {
		t.Fatalf("group leave: exit %d\n%s%s", code, out, errOut)
	}
}

// TestSecuredOAuthTokenRefresh: with tokens that live 8 s (the broker
// ends a session at its token's expiry), a transformer over OAUTHBEARER
// sits idle for three lifetimes and then processes the next inputs: its
// idle connections re-authenticated with fresh tokens, fetched at 80% of
// the lifetime rather than per connection.
func TestSecuredOAuthTokenRefresh(t *testing.T) {
	s := secured(t)
	s.tokens.lifetime.Store(8)
	t.Cleanup(func() { s.tokens.lifetime.Store(3600) })
	app := topicName(t, "app")
	raw, out := app+".raw", app+".refined"
	s.createTopic(t, raw, 2, nil)
	s.createTopic(t, out, 2, nil)
	stage := writeStage(t, fmt.Sprintf("application_id: %s\nkind: transformer\ninput_topics: [%s]\ntransform:\n  builtin: count\n  output_topic: %s\n", app, raw, out))
	s.grant(t, aclPlan(t, stage, "lp-refresh", "run")...)
	before := s.tokens.issued.Load()
	p := startSecuredRun(t, s.profile(t, mechOAuth, "lp-refresh"), stage, "refresh-0")
	s.produceAsAdmin(t, raw, `{"n":1}`, `{"n":2}`)
	s.waitRecords(t, out, 2, 90*time.Second)
	first := s.tokens.issued.Load() - before

	idle := time.Now()
	waitUntil(t, 60*time.Second, "three token lifetimes", func() bool {
		p.alive()
		return time.Since(idle) > 24*time.Second
	})
	s.produceAsAdmin(t, raw, `{"n":3}`, `{"n":4}`)
	s.waitRecords(t, out, 4, 60*time.Second)
	p.alive()
	total := s.tokens.issued.Load() - before
	if total <= first {
		t.Errorf("no token fetched while idle: %d at start, %d in all", first, total)
	}
	// One token per 80% of 8 s over about 30 s, not one per connection
	// and re-authentication (several connections, each re-authenticating).
	if total > 12 {
		t.Errorf("%d tokens fetched in about 30 s of 8 s tokens: not cached", total)
	}
	t.Logf("tokens: %d at start, %d in all", first, total)
	p.stop()
}
