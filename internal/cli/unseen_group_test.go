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

// An operator without Describe on the stage's group gets status, doctor
// and the replay plan of everything else, the group's part said unknown
// (docs/security.md, "Nothing hidden"): status and doctor exit 4, the
// replay plan is refused (exit 3) rather than claim no live member.
func TestUnseenGroupIsUnknownNotAnAbort(t *testing.T) {
	stage := writeACLStage(t)
	top, _, err := acl.Load(acl.Flags{StageFile: stage, Role: "operate"})
	if err != nil {
		t.Fatal(err)
	}
	plan, err := acl.NewPlan(acltest.Principal, top, acl.Options{Role: acl.RoleOperate})
	if err != nil {
		t.Fatal(err)
	}
	cluster := acltest.Start(t, acltest.Without(plan.ACLs, acl.Group, "sensors-count", acl.Describe), 2, "sensors.raw", "sensors.refined", "sensors-count-changelog", "sensors.raw.dlq")
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	body := "profiles:\n  p:\n    brokers: [" + cluster.Addrs[0] + "]\n    sasl: {mechanism: SCRAM-SHA-256, username: p, password_env: P_PW}\n"
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"P_PW": "pw"}
	const why = "unknown: not authorized (needs Describe on group sensors-count)"
	flecht := func(args ...string) result {
		return run(t, env, "", append(args, "--config", cfg, "--profile", "p")...)
	}

	r := flecht("status", "-f", stage)
	if r.code != exitcode.Findings || strings.Count(r.out, why) < 4 || !strings.Contains(r.out, "sensors-count-changelog: 2 partitions") {
		t.Errorf("status: exit %d, want 4 and the group unknown:\n%s%s", r.code, r.out, r.err)
	}
	r = flecht("status", "-f", stage, "-o", "json")
	var rep struct {
		GroupAuthorized *bool `json:"group_authorized"`
		Inputs          []struct {
			Authorized *bool `json:"authorized"`
		} `json:"inputs"`
	}
	if err := json.Unmarshal([]byte(r.out), &rep); err != nil || r.code != exitcode.Findings || rep.GroupAuthorized == nil || *rep.GroupAuthorized ||
		len(rep.Inputs) != 2 || rep.Inputs[0].Authorized == nil || *rep.Inputs[0].Authorized {
		t.Errorf("status -o json: exit %d %v:\n%s%s", r.code, err, r.out, r.err)
	}

	r = flecht("doctor", "-f", stage, "-o", "json")
	var doc struct {
		Checks   []struct{ Name, Status, Detail string }
		Findings []struct{ Check, Message, Command string }
		Notes    []string
	}
	if err := json.Unmarshal([]byte(r.out), &doc); err != nil || r.code != exitcode.Findings {
		t.Fatalf("doctor: exit %d %v:\n%s%s", r.code, err, r.out, r.err)
	}
	checks := map[string]string{}
	for _, c := range doc.Checks {
		checks[c.Name] = c.Status + ": " + c.Detail
	}
	for _, name := range []string{"members", "lag"} {
		if checks[name] != "findings: "+why {
			t.Errorf("doctor check %s: %q", name, checks[name])
		}
	}
	if checks["transactions"] != "ok: 0 open" || !strings.Contains(checks["topics"], "2 topic(s): sensors.raw") {
		t.Errorf("doctor's other checks did not run: %v", checks)
	}
	for _, f := range doc.Findings {
		if (f.Check == "members" || f.Check == "lag") && (!strings.Contains(f.Message, why) || !strings.Contains(f.Command, "flecht acl plan")) {
			t.Errorf("finding %+v", f)
		}
	}

	if notes := strings.Join(doc.Notes, "\n"); strings.Contains(notes, "no member") {
		t.Errorf("doctor notes claim no member:\n%s", notes)
	}

	r = flecht("replay", "-f", stage)
	if r.code != exitcode.Refused || !strings.Contains(r.out, why) || strings.Contains(r.out, "members: none") || strings.Contains(r.out, "run again with --execute") {
		t.Errorf("replay dry run: exit %d, want 3 and the group unknown:\n%s%s", r.code, r.out, r.err)
	}
}
