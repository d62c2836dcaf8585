//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/kafkax"
)

// The least-privilege runs of the secured tier: each principal gets
// exactly what `flecht acl plan` prints for its role (or, for the verbs no
// role covers, a hand-written set), and does its work over one of the
// three mechanisms.

// aclPlan runs `flecht acl plan -o json` (it connects to nothing).
func aclPlan(t *testing.T, stage, principal, role string, extra ...string) []aclEntry {
	t.Helper()
	out, errOut, code := runFlecht(t, "", append([]string{"acl", "plan", "-f", stage, "--principal", "User:" + principal, "--role", role, "-o", "json"}, extra...)...)
	if code != 0 {
		t.Fatalf("acl plan: exit %d: %s", code, errOut)
	}
	var plan struct {
		ACLs []aclEntry `json:"acls"`
	}
	if err := json.Unmarshal([]byte(out), &plan); err != nil || len(plan.ACLs) == 0 {
		t.Fatalf("acl plan: %v\n%s", err, out)
	}
	return plan.ACLs
}

// needText is how flecht names a missing ACL: "Write on topic x",
// "Write on transactional IDs prefixed app-".
func needText(a aclEntry) string {
	var op strings.Builder
	for _, w := range strings.Split(a.Operation, "_") {
		if w != "" {
			op.WriteString(strings.ToUpper(w[:1]) + w[1:])
		}
	}
	res := map[string]string{"topic": "topic ", "group": "group ", "transactional_id": "transactional ID ", "cluster": "the cluster"}[a.ResourceType]
	if a.PatternType == "prefixed" {
		res = map[string]string{"topic": "topics", "group": "groups", "transactional_id": "transactional IDs"}[a.ResourceType] + " prefixed "
	}
	if a.ResourceType != "cluster" {
		res += a.ResourceName
	}
	return op.String() + " on " + res
}

// securedProcEnv points a flecht process at the profile in config.
func securedProcEnv(config string) []string {
	return []string{"FLECHT_CONFIG=" + config, "FLECHT_BROKERS=", "FLECHT_PROFILE="}
}

// startSecuredRun starts `flecht run` as the profile's principal.
func startSecuredRun(t *testing.T, config, stage, clientID string, extra ...string) *proc {
	t.Helper()
	args := append([]string{"run", "-f", stage, "--client-id", clientID, "--state-dir", t.TempDir(),
		"--metrics-listen", "127.0.0.1:0", "--session-timeout", testSessionTimeout}, extra...)
	return startProc(t, clientID, false, securedProcEnv(config), args...)
}

// produceAsAdmin writes values (one record each, keyed k<i>) as the
// super user.
func (s *securedTier) produceAsAdmin(t *testing.T, topic string, values ...string) {
	t.Helper()
	cl, err := s.adminCluster().Client(kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	for i, v := range values {
		recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i%3), Value: []byte(v)})
	}
	if err := cl.ProduceSync(testCtx(t, 30*time.Second), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// waitRecords waits until topic holds at least n committed records (read
// as the super user) and returns them.
func (s *securedTier) waitRecords(t *testing.T, topic string, n int, d time.Duration) []*kgo.Record {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		cl, err := s.adminCluster().Client()
		if err != nil {
			t.Fatal(err)
		}
		var got []*kgo.Record
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		_, err = kafkax.ReadFrom(ctx, cl, []string{topic}, kafkax.FromLogStart, nil, func(r *kgo.Record) error {
			got = append(got, r)
			return nil
		})
		cancel()
		cl.Close()
		if err == nil && len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s holds %d records after %s, want %d (%v)", topic, len(got), d, n, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// TestSecuredRunPlanIsMinimal: a count transformer with a dead-letter
// topic runs over SCRAM-SHA-512 with exactly `flecht acl plan --role run`;
// without any one ACL of the plan it refuses to start, naming that ACL.
func TestSecuredRunPlanIsMinimal(t *testing.T) {
	s := secured(t)
	const principal = "lp-run"
	app := topicName(t, "app")
	raw, out := app+".raw", app+".refined"
	s.createTopic(t, raw, 2, nil)
	s.createTopic(t, out, 2, nil)
	stage := writeStage(t, fmt.Sprintf(`application_id: %s
kind: transformer
input_topics: [%s]
invalid_messages: dlq
transform:
  builtin: count
  output_topic: %s
`, app, raw, out))
	plan := aclPlan(t, stage, principal, "run")
	s.grant(t, plan...)
	cfg := s.profile(t, mechSCRAM, principal)

	// The whole plan: the stage runs, counts, and dead-letters the record
	// that is not JSON.
	s.produceAsAdmin(t, raw, `{"n":1}`, `{"n":2}`, `{"n":3}`, `not json`, `{"n":4}`)
	p := startSecuredRun(t, cfg, stage, "count-0")
	s.waitRecords(t, out, 4, 90*time.Second)
	s.waitRecords(t, raw+".dlq", 1, 30*time.Second)
	p.alive()
	p.stop()

	// Each ACL left out in turn: the stage, restarting with state to
	// restore from its changelog, refuses before it joins, naming the ACL.
	s.minimalProof(t, plan, refusedStart(func(t *testing.T) *proc {
		return startSecuredRun(t, cfg, stage, "count-0")
	}))
}
