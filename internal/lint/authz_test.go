package lint

import (
	"context"
	"strings"
	"testing"

	"github.com/flecht-dev/flecht/internal/acl"
	"github.com/flecht-dev/flecht/internal/acl/acltest"
)

// A topic whose configs the principal may not describe is "unknown: not
// authorized", a finding, and authorized: false, never a passing check
// or a wrong one; lint still checks what it can see.
func TestTopicsTheOperatorCannotSeeAreUnknown(t *testing.T) {
	top := acl.Topics{Kind: "transformer", ApplicationID: "app", Inputs: []string{"raw"}, Changelog: "app-changelog"}
	plan, err := acl.NewPlan(acltest.Principal, top, acl.Options{Role: acl.RoleOperate})
	if err != nil {
		t.Fatal(err)
	}
	grant := acltest.Without(acltest.Without(plan.ACLs, acl.Topic, "raw", acl.DescribeConfigs), acl.Topic, "app-changelog", acl.Describe)
	c := acltest.Start(t, grant, 2, "raw", "app-changelog")
	rep, err := Topics(context.Background(), c.Client(t), TopicsSpec{Raw: []string{"raw"}, Input: []string{"raw"}, Changelog: "app-changelog", TaskTopics: []string{"raw"}})
	if err != nil {
		t.Fatalf("lint aborted: %v", err)
	}
	want := map[string]string{
		"raw":           "raw: unknown: not authorized (needs DescribeConfigs on topic raw)",
		"app-changelog": "app-changelog: unknown: not authorized (needs Describe on topic app-changelog)",
	}
	if len(rep.Problems) != len(want) {
		t.Fatalf("problems %+v", rep.Problems)
	}
	for _, p := range rep.Problems {
		if p.Kind != ProblemNotAuthorized || want[p.Topic] != p.Message {
			t.Errorf("problem %+v", p)
		}
	}
	for _, tp := range rep.Topics {
		if tp.OK || tp.Authorized == nil || *tp.Authorized {
			t.Errorf("topic %+v reads as seen", tp)
		}
		if tp.Topic == "raw" && (!tp.Exists || tp.Partitions != 2) {
			t.Errorf("what could be seen of raw is lost: %+v", tp)
		}
	}
	if strings.Contains(strings.Join(rep.Notes, " "), "does not exist yet") {
		t.Errorf("an unseen changelog reads as missing: %v", rep.Notes)
	}
}
