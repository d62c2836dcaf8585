package topicio

import (
	"context"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/flecht-dev/flecht/internal/acl"
	"github.com/flecht-dev/flecht/internal/acl/acltest"
	"github.com/flecht-dev/flecht/internal/exitcode"
)

// topic create refuses before it creates anything when the principal may
// not create one of the topics: the other is not created either.
func TestCreateRefusesBeforeCreatingAny(t *testing.T) {
	grant := []acl.ACL{
		{Principal: acltest.Principal, ResourceType: acl.Topic, ResourceName: "a", PatternType: acl.Literal, Operation: acl.Create, Permission: "allow", Host: "*"},
		{Principal: acltest.Principal, ResourceType: acl.Topic, ResourceName: "a", PatternType: acl.Literal, Operation: acl.Describe, Permission: "allow", Host: "*"},
		{Principal: acltest.Principal, ResourceType: acl.Topic, ResourceName: "b", PatternType: acl.Literal, Operation: acl.Describe, Permission: "allow", Host: "*"},
	}
	c := acltest.Start(t, grant, 1)
	ctx := context.Background()
	_, err := Create(ctx, c.Client(t), []Created{{Topic: "a", Partitions: 1}, {Topic: "b", Partitions: 1}})
	if exitcode.Code(err) != exitcode.Refused || !strings.Contains(err.Error(), "Create on topic b") {
		t.Fatalf("create: %v, want a refusal naming Create on topic b", err)
	}
	listed, err := kadm.NewClient(c.AdminClient(t)).ListTopics(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if d, ok := listed["a"]; ok && d.Err == nil {
		t.Error("topic a was created before the refusal")
	}
}
