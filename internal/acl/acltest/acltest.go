// Package acltest starts an in-process Kafka (kfake) that enforces ACLs,
// with a least-privilege SASL user holding exactly the ACLs a test gives:
// the tests of `acl check` and of the verbs' preflights.
package acltest

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/flecht-dev/flecht/internal/acl"
	"github.com/flecht-dev/flecht/internal/kafkax"
)

// Principal is the test user's principal.
const Principal = "User:p"

// Cluster is a kfake cluster with ACLs on.
type Cluster struct {
	Addrs []string
	// User logs in as Principal; Admin as a super user.
	User  sasl.Mechanism
	Admin sasl.Mechanism
}

// Start starts a one-broker cluster with ACLs enforced, the topics seeded
// with partitions each, and the user Principal holding exactly acls; it
// closes in t.Cleanup.
func Start(t testing.TB, acls []acl.ACL, partitions int32, topics ...string) *Cluster {
	t.Helper()
	seeds := make([]kfake.ACL, 0, len(acls))
	for _, a := range acls {
		seeds = append(seeds, seed(t, a))
	}
	opts := []kfake.Opt{
		kfake.NumBrokers(1),
		kfake.EnableSASL(),
		kfake.Superuser("SCRAM-SHA-256", "admin", "admin"),
		kfake.EnableACLs(),
		kfake.User("SCRAM-SHA-256", "p", "pw", seeds...),
	}
	if len(topics) > 0 {
		opts = append(opts, kfake.SeedTopics(partitions, topics...))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return &Cluster{
		Addrs: c.ListenAddrs(),
		User:  scram.Auth{User: "p", Pass: "pw"}.AsSha256Mechanism(),
		Admin: scram.Auth{User: "admin", Pass: "admin"}.AsSha256Mechanism(),
	}
}

// Client is a client logged in as Principal, closed in t.Cleanup.
func (c *Cluster) Client(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	return c.client(t, c.User, opts)
}

// AdminClient is a client logged in as the super user.
func (c *Cluster) AdminClient(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	return c.client(t, c.Admin, opts)
}

func (c *Cluster) client(t testing.TB, m sasl.Mechanism, opts []kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.Addrs...), kgo.SASL(m)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// Kafka is how a stage reaches the cluster as Principal.
func (c *Cluster) Kafka() *kafkax.Cluster {
	return &kafkax.Cluster{Brokers: c.Addrs, SASL: c.User}
}

// Without is acls less every entry of typ, name and op.
func Without(acls []acl.ACL, typ acl.ResourceType, name string, op acl.Operation) []acl.ACL {
	out := make([]acl.ACL, 0, len(acls))
	for _, a := range acls {
		if a.ResourceType != typ || a.ResourceName != name || a.Operation != op {
			out = append(out, a)
		}
	}
	return out
}

func seed(t testing.TB, a acl.ACL) kfake.ACL {
	t.Helper()
	rt := map[acl.ResourceType]kmsg.ACLResourceType{
		acl.Topic: kmsg.ACLResourceTypeTopic, acl.Group: kmsg.ACLResourceTypeGroup,
		acl.TransactionalID: kmsg.ACLResourceTypeTransactionalId, acl.Cluster: kmsg.ACLResourceTypeCluster,
	}[a.ResourceType]
	pt := kmsg.ACLResourcePatternTypeLiteral
	if a.PatternType == acl.Prefixed {
		pt = kmsg.ACLResourcePatternTypePrefixed
	}
	op, err := kmsg.ParseACLOperation(string(a.Operation))
	if err != nil || rt == 0 {
		t.Fatalf("acltest: cannot seed %+v", a)
	}
	return kfake.ACL{Resource: rt, Name: a.ResourceName, Pattern: pt, Operation: op, Allow: true}
}

// Revoke deletes the ACL a as the super user: a permission taken away
// while a verb runs.
func (c *Cluster) Revoke(t testing.TB, a acl.ACL) {
	t.Helper()
	s := seed(t, a)
	f := kmsg.NewDeleteACLsRequestFilter()
	f.ResourceType, f.ResourceName, f.ResourcePatternType = s.Resource, kmsg.StringPtr(s.Name), s.Pattern
	f.Principal, f.Host = kmsg.StringPtr(Principal), kmsg.StringPtr("*")
	f.Operation, f.PermissionType = s.Operation, kmsg.ACLPermissionTypeAllow
	req := kmsg.NewPtrDeleteACLsRequest()
	req.Filters = append(req.Filters, f)
	resp, err := req.RequestWith(context.Background(), c.AdminClient(t))
	if err != nil || len(resp.Results) != 1 || resp.Results[0].ErrorCode != 0 || len(resp.Results[0].MatchingACLs) != 1 {
		t.Fatalf("acltest: revoking %+v: %v %+v", a, err, resp)
	}
}
