package status_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/acl"
	"github.com/flecht-dev/flecht/internal/acl/acltest"
	"github.com/flecht-dev/flecht/internal/status"
)

// An operator that may describe the group and the topics but not the
// transactional IDs sees "unknown: not authorized", never "none": Kafka
// leaves the IDs it may not describe out of ListTransactions, so the
// open transaction of app-0 would otherwise read as health.
func TestTransactionsTheOperatorCannotSeeAreUnknown(t *testing.T) {
	top := acl.Topics{Kind: "transformer", ApplicationID: "app", Inputs: []string{"raw"}, Outputs: []string{"out"}, Changelog: "app-changelog"}
	plan, err := acl.NewPlan(acltest.Principal, top, acl.Options{Role: acl.RoleOperate})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, c := range []struct {
		name       string
		acls       []acl.ACL
		authorized bool
	}{
		{"without Describe on the transactional IDs", acltest.Without(plan.ACLs, acl.TransactionalID, "app-", acl.Describe), false},
		{"with the operate plan", plan.ACLs, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			cluster := acltest.Start(t, c.acls, 2, "raw", "out", "app-changelog")
			zombie := cluster.AdminClient(t, kgo.TransactionalID("app-0"), kgo.DefaultProduceTopic("out"))
			if err := zombie.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			if err := zombie.ProduceSync(ctx, &kgo.Record{Value: []byte("{}")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
			s, err := status.Take(ctx, cluster.Client(t), status.Request{ApplicationID: "app", InputTopics: []string{"raw"}})
			if err != nil {
				t.Fatal(err)
			}
			tx := s.Transaction
			if (tx.Authorized == nil) != c.authorized || tx.Authorized != nil && *tx.Authorized {
				t.Fatalf("authorized %v, want %v (%+v)", tx.Authorized, c.authorized, tx)
			}
			if !c.authorized {
				if !slices.Equal(tx.Unauthorized, []string{"app-0", "app-1"}) || !strings.Contains(tx.NotAuthorized(), "unknown: not authorized (needs Describe on transactional ID app-0, app-1)") {
					t.Errorf("unauthorized %v, %q", tx.Unauthorized, tx.NotAuthorized())
				}
				return
			}
			if len(tx.Pending) != 1 || tx.Pending[0].TransactionalID != "app-0" || tx.NotAuthorized() != "" {
				t.Errorf("pending %+v", tx)
			}
		})
	}
}

// A changelog the principal may not describe is unknown, not missing, and
// the sample goes on.
func TestChangelogTheOperatorCannotSeeIsUnknown(t *testing.T) {
	top := acl.Topics{Kind: "transformer", ApplicationID: "app", Inputs: []string{"raw"}, Changelog: "app-changelog"}
	plan, err := acl.NewPlan(acltest.Principal, top, acl.Options{Role: acl.RoleOperate})
	if err != nil {
		t.Fatal(err)
	}
	grant := acltest.Without(acltest.Without(plan.ACLs, acl.Topic, "app-changelog", acl.Describe), acl.Topic, "app-changelog", acl.DescribeConfigs)
	c := acltest.Start(t, grant, 2, "raw", "app-changelog")
	s, err := status.Take(t.Context(), c.Client(t), status.Request{ApplicationID: "app", InputTopics: []string{"raw"}})
	if err != nil {
		t.Fatalf("status aborted: %v", err)
	}
	cl := s.Changelog
	if cl.Authorized == nil || *cl.Authorized || cl.Unauthorized != "unknown: not authorized (needs Describe on topic app-changelog)" {
		t.Errorf("changelog %+v", cl)
	}
}

// A principal that may describe the inputs but not read them gets the lag
// by offsets and a note saying why the records are not counted.
func TestUnreadTheOperatorCannotReadIsUnknown(t *testing.T) {
	top := acl.Topics{Kind: "transformer", ApplicationID: "app", Inputs: []string{"raw"}, Changelog: "app-changelog"}
	plan, err := acl.NewPlan(acltest.Principal, top, acl.Options{Role: acl.RoleOperate})
	if err != nil {
		t.Fatal(err)
	}
	grant := acltest.Without(plan.ACLs, acl.Topic, "raw", acl.Read)
	grant = append(grant, acl.ACL{Principal: acltest.Principal, ResourceType: acl.Topic, ResourceName: "raw", PatternType: acl.Literal, Operation: acl.Describe, Permission: "allow", Host: "*"})
	c := acltest.Start(t, grant, 1, "raw", "app-changelog")
	admin := c.AdminClient(t, kgo.DefaultProduceTopic("raw"))
	if err := admin.ProduceSync(t.Context(), &kgo.Record{Value: []byte("{}")}, &kgo.Record{Value: []byte("{}")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	s, err := status.Take(t.Context(), c.Client(t), status.Request{ApplicationID: "app", InputTopics: []string{"raw"}})
	if err != nil {
		t.Fatalf("status aborted: %v", err)
	}
	if s.UnreadUnauthorized != "unknown: not authorized (needs Read on topic raw)" {
		t.Errorf("unread %v, %q", s.Unread, s.UnreadUnauthorized)
	}
}

// A group the principal may not describe is unknown, not empty: its
// members, committed offsets and lag say so, authorized: false, and the
// sample goes on with what the principal can see (the inputs' ends, the
// changelog).
func TestGroupTheOperatorCannotSeeIsUnknown(t *testing.T) {
	top := acl.Topics{Kind: "transformer", ApplicationID: "app", Inputs: []string{"raw"}, Changelog: "app-changelog"}
	plan, err := acl.NewPlan(acltest.Principal, top, acl.Options{Role: acl.RoleOperate})
	if err != nil {
		t.Fatal(err)
	}
	c := acltest.Start(t, acltest.Without(plan.ACLs, acl.Group, "app", acl.Describe), 2, "raw", "app-changelog")
	admin := c.AdminClient(t, kgo.DefaultProduceTopic("raw"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for range 3 {
		if err := admin.ProduceSync(t.Context(), &kgo.Record{Value: []byte("{}")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: "raw", Partition: 0, At: 3, LeaderEpoch: -1})
	if err := kadm.NewClient(admin).CommitAllOffsets(t.Context(), "app", offs); err != nil {
		t.Fatal(err)
	}

	s, err := status.Take(t.Context(), c.Client(t), status.Request{ApplicationID: "app", InputTopics: []string{"raw"}})
	if err != nil {
		t.Fatalf("status aborted: %v", err)
	}
	const why = "unknown: not authorized (needs Describe on group app)"
	if s.GroupUnauthorized != why || s.Group.State != status.GroupStateUnknown || len(s.Committed) != 0 {
		t.Fatalf("group %+v, %q, committed %v", s.Group, s.GroupUnauthorized, s.Committed)
	}
	if !s.Changelog.Exists || s.Ends[status.TP{Topic: "raw", Partition: 0}] != 3 {
		t.Errorf("what the principal can see is missing: changelog %+v, ends %v", s.Changelog, s.Ends)
	}
	r := status.Build("app", s, s)
	if r.GroupAuthorized == nil || *r.GroupAuthorized || r.GroupUnauthorized != why || r.LagCounted || r.Throughput != nil {
		t.Errorf("report: authorized %v %q, lag counted %v, throughput %+v", r.GroupAuthorized, r.GroupUnauthorized, r.LagCounted, r.Throughput)
	}
	if len(r.Inputs) != 2 {
		t.Fatalf("inputs %+v", r.Inputs)
	}
	for _, in := range r.Inputs {
		if in.Authorized == nil || *in.Authorized || in.Committed != nil || in.LagCounted {
			t.Errorf("input %+v", in)
		}
	}
	if u := r.Unseen(); len(u) != 1 || u[0] != "group: "+why {
		t.Errorf("unseen %q", u)
	}
}

// An extractor's transactional IDs are APP-<token>, a token per partition
// of its config topics: an operator that may not describe them sees
// "unknown: not authorized" for them too, though the extractor has no
// input partition to derive them from.
func TestAnExtractorsTransactionsTheOperatorCannotSeeAreUnknown(t *testing.T) {
	top := acl.Topics{Kind: "extractor", ApplicationID: "ex", Configs: []string{"ex.config"}, Outputs: []string{"items"}, Changelog: "ex-changelog", OutputsFromConfigs: true}
	plan, err := acl.NewPlan(acltest.Principal, top, acl.Options{Role: acl.RoleOperate})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req := status.Request{ApplicationID: "ex", Kind: "extractor", ConfigTopics: []string{"ex.config"}}
	without := acltest.Start(t, acltest.Without(plan.ACLs, acl.TransactionalID, "ex-", acl.Describe), 2, "ex.config", "items", "ex-changelog")
	s, err := status.Take(ctx, without.Client(t), req)
	if err != nil {
		t.Fatal(err)
	}
	if tx := s.Transaction; !slices.Equal(tx.Unauthorized, []string{"ex-0", "ex-1"}) || tx.Authorized == nil || *tx.Authorized {
		t.Errorf("without Describe on ex-: unauthorized %v, authorized %v", tx.Unauthorized, tx.Authorized)
	}
	with := acltest.Start(t, plan.ACLs, 2, "ex.config", "items", "ex-changelog")
	s, err = status.Take(ctx, with.Client(t), req)
	if err != nil {
		t.Fatal(err)
	}
	if tx := s.Transaction; len(tx.Unauthorized) > 0 || tx.NotAuthorized() != "" {
		t.Errorf("with the operate plan: %+v", tx)
	}
}
