package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flecht-dev/flecht/internal/acl"
	"github.com/flecht-dev/flecht/internal/acl/acltest"
	"github.com/flecht-dev/flecht/internal/exitcode"
)

const aclStage = "application_id: sensors-count\nkind: transformer\ninput_topics: [sensors.raw]\ntransform: {builtin: count, output_topic: sensors.refined}\n"

func writeACLStage(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "count.yaml")
	if err := os.WriteFile(path, []byte(aclStage), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestACLPlanFormats(t *testing.T) {
	stage := writeACLStage(t)
	r := run(t, nil, "", "acl", "plan", "-f", stage, "--principal", "User:count", "--role", "run", "-b", "k:9093", "--command-config", "admin.properties")
	if r.code != 0 || !strings.Contains(r.out, "kafka-acls.sh --bootstrap-server k:9093 --command-config admin.properties --add --allow-principal User:count --operation Write --topic sensors.refined\n") {
		t.Fatalf("text: exit %d\n%s%s", r.code, r.out, r.err)
	}
	r = run(t, nil, "", "acl", "plan", "-f", stage, "--principal", "User:ops", "--role", "replay", "--truncate-outputs", "-o", "json")
	var p struct{ ACLs []acl.ACL }
	if err := json.Unmarshal([]byte(r.out), &p); err != nil || r.code != 0 || len(p.ACLs) != 6 {
		t.Fatalf("json: exit %d %v\n%s", r.code, err, r.out)
	}
	r = run(t, nil, "", "acl", "plan", "-f", stage, "--principal", "User:CN=count", "--role", "run", "-o", "yaml")
	if r.code != 0 || !strings.Contains(r.out, "kind: KafkaUser") || !strings.Contains(r.out, "type: transactionalId") || !strings.Contains(r.out, "patternType: prefix") {
		t.Fatalf("yaml: exit %d\n%s%s", r.code, r.out, r.err)
	}
	for _, args := range [][]string{
		{"--principal", "User:x", "--role", "admin"},
		{"--principal", "alice", "--role", "run"},
		{"--principal", "User:x", "--role", "run", "--truncate-outputs"},
	} {
		if r := run(t, nil, "", append([]string{"acl", "plan", "-f", stage}, args...)...); r.code != exitcode.Usage {
			t.Errorf("%v: exit %d, want 2 (%s)", args, r.code, r.err)
		}
	}
}

// acl check as the principal itself: exit 4 and the command that grants
// each missing ACL; exit 0 with the plan granted.
func TestACLCheckAsThePrincipal(t *testing.T) {
	stage := writeACLStage(t)
	top, _, err := acl.Load(acl.Flags{StageFile: stage, Role: "run"})
	if err != nil {
		t.Fatal(err)
	}
	plan, err := acl.NewPlan(acltest.Principal, top, acl.Options{Role: acl.RoleRun})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		acls []acl.ACL
		code int
		want string
	}{
		{acltest.Without(plan.ACLs, acl.Topic, "sensors.refined", acl.Write), exitcode.Findings, "--add --allow-principal User:p --operation Write --topic sensors.refined"},
		{plan.ACLs, 0, "unknown: the topic does not exist yet"},
	} {
		cluster := acltest.Start(t, c.acls, 2, "sensors.raw", "sensors.refined")
		cfg := filepath.Join(t.TempDir(), "config.yaml")
		body := "profiles:\n  p:\n    brokers: [" + cluster.Addrs[0] + "]\n    sasl: {mechanism: SCRAM-SHA-256, username: p, password_env: P_PW}\n"
		if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		r := run(t, map[string]string{"P_PW": "pw"}, "", "acl", "check", "-f", stage, "--role", "run", "--config", cfg, "--profile", "p")
		if r.code != c.code || !strings.Contains(r.out, c.want) {
			t.Errorf("exit %d, want %d and %q:\n%s%s", r.code, c.code, c.want, r.out, r.err)
		}
	}
}
