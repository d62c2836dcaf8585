package acl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/flecht-dev/flecht/internal/exitcode"
)

// kfakeACL is one plan entry as kfake seeds it.
func kfakeACL(t *testing.T, a ACL) kfake.ACL {
	t.Helper()
	rt := map[ResourceType]kmsg.ACLResourceType{
		Topic: kmsg.ACLResourceTypeTopic, Group: kmsg.ACLResourceTypeGroup,
		TransactionalID: kmsg.ACLResourceTypeTransactionalId, Cluster: kmsg.ACLResourceTypeCluster,
	}[a.ResourceType]
	pt := kmsg.ACLResourcePatternTypeLiteral
	if a.PatternType == Prefixed {
		pt = kmsg.ACLResourcePatternTypePrefixed
	}
	op, ok := opCode(a.Operation)
	if !ok || rt == 0 {
		t.Fatalf("cannot seed %+v", a)
	}
	return kfake.ACL{Resource: rt, Name: a.ResourceName, Pattern: pt, Operation: op, Allow: true}
}

// secured starts a kfake cluster with ACLs on, the topics seeded, and a
// user "p" holding exactly acls; it returns a client logged in as p.
func secured(t *testing.T, acls []ACL, topics ...string) *kgo.Client {
	t.Helper()
	return securedWith(t, acls, nil, topics...)
}

// securedWith is secured with more options for the principal's client.
func securedWith(t *testing.T, acls []ACL, opts []kgo.Opt, topics ...string) *kgo.Client {
	t.Helper()
	seeds := make([]kfake.ACL, 0, len(acls))
	for _, a := range acls {
		seeds = append(seeds, kfakeACL(t, a))
	}
	c, err := kfake.NewCluster(
		kfake.NumBrokers(1),
		kfake.SeedTopics(3, topics...),
		kfake.EnableSASL(),
		kfake.Superuser("SCRAM-SHA-256", "admin", "admin"),
		kfake.EnableACLs(),
		kfake.User("SCRAM-SHA-256", "p", "pw", seeds...),
	)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...), kgo.SASL(scram.Auth{User: "p", Pass: "pw"}.AsSha256Mechanism())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func stagePlan(t *testing.T, yaml string, o Options) (Topics, *Plan) {
	t.Helper()
	top, err := StageTopics(load(t, yaml), nil)
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPlan("User:p", top, o)
	if err != nil {
		t.Fatal(err)
	}
	return top, p
}

func probeAll(t *testing.T, cl *kgo.Client, top Topics, o Options) []Result {
	t.Helper()
	needs, err := Needs(top, o)
	if err != nil {
		t.Fatal(err)
	}
	names, err := TxnNames(context.Background(), cl, top, "")
	if err != nil {
		t.Fatal(err)
	}
	res, err := Probe(context.Background(), cl, needs, names)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func verdicts(res []Result, s Status) []string {
	var out []string
	for _, r := range res {
		if r.Status == s {
			out = append(out, r.Need.String())
		}
	}
	return out
}

func without(acls []ACL, typ ResourceType, name string, op Operation) []ACL {
	return slices.DeleteFunc(slices.Clone(acls), func(a ACL) bool {
		return a.ResourceType == typ && a.ResourceName == name && a.Operation == op
	})
}

func TestCheckTheFullRunPlanMissesNothing(t *testing.T) {
	top, p := stagePlan(t, countStage, Options{Role: RoleRun})
	cl := secured(t, p.ACLs, "sensors.raw", "sensors.refined")
	res := probeAll(t, cl, top, Options{Role: RoleRun})
	if m := verdicts(res, Missing); len(m) > 0 {
		t.Errorf("missing with the whole plan granted: %v", m)
	}
	// The changelog does not exist yet: Create and DescribeConfigs are
	// proven, Read and Write cannot be.
	wantUnknown := []string{"Read on topic sensors-count-changelog", "Write on topic sensors-count-changelog"}
	if u := verdicts(res, Unknown); !slices.Equal(u, wantUnknown) {
		t.Errorf("unknown %v, want %v", u, wantUnknown)
	}
	for _, r := range res {
		if r.Status == Unknown && r.Authorized != nil {
			t.Errorf("%s is unknown but says authorized=%v", r.Need, *r.Authorized)
		}
		if r.Type == TransactionalID && !slices.Equal(r.Probed, []string{"sensors-count-0", "sensors-count-1", "sensors-count-2"}) {
			t.Errorf("probed %v, want one transactional ID per input partition", r.Probed)
		}
	}
}

// TestCheckNamesEachMissingACL removes one ACL of the run plan at a time:
// the check names exactly that one.
func TestCheckNamesEachMissingACL(t *testing.T) {
	top, p := stagePlan(t, countStage, Options{Role: RoleRun})
	for _, drop := range []struct {
		typ  ResourceType
		name string
		op   Operation
		want string
	}{
		{Topic, "sensors.refined", Write, "Write on topic sensors.refined"},
		{Topic, "sensors.raw", Read, "Read on topic sensors.raw"},
		{Group, "sensors-count", Read, "Read on group sensors-count"},
		{TransactionalID, "sensors-count-", Write, "Write on transactional IDs prefixed sensors-count-"},
		{Topic, "sensors-count-changelog", Create, "Create on topic sensors-count-changelog"},
		{Topic, "sensors-count-changelog", DescribeConfigs, "DescribeConfigs on topic sensors-count-changelog"},
	} {
		t.Run(drop.want, func(t *testing.T) {
			cl := secured(t, without(p.ACLs, drop.typ, drop.name, drop.op), "sensors.raw", "sensors.refined")
			res := probeAll(t, cl, top, Options{Role: RoleRun})
			if m := verdicts(res, Missing); !slices.Equal(m, []string{drop.want}) {
				t.Errorf("missing %v, want exactly %q", m, drop.want)
			}
		})
	}
}

// TestCheckTransactionalIDsWithoutDescribe: the operator principal that
// may describe everything but the transactional IDs is told so.
func TestCheckOperateWithoutTransactionalIDs(t *testing.T) {
	top, p := stagePlan(t, countStage, Options{Role: RoleOperate})
	cl := secured(t, without(p.ACLs, TransactionalID, "sensors-count-", Describe), "sensors.raw", "sensors.refined", "sensors-count-changelog")
	res := probeAll(t, cl, top, Options{Role: RoleOperate})
	if m := verdicts(res, Missing); !slices.Equal(m, []string{"Describe on transactional IDs prefixed sensors-count-"}) {
		t.Errorf("missing %v", m)
	}
	if u := verdicts(res, Unknown); len(u) > 0 {
		t.Errorf("unknown %v with every topic existing", u)
	}
}

func TestCheckClusterDescribe(t *testing.T) {
	top, p := stagePlan(t, countStage, Options{Role: RoleOperate})
	cl := secured(t, without(p.ACLs, Cluster, ClusterName, Describe), "sensors.raw", "sensors.refined", "sensors-count-changelog")
	if m := verdicts(probeAll(t, cl, top, Options{Role: RoleOperate}), Missing); !slices.Equal(m, []string{"Describe on the cluster"}) {
		t.Errorf("missing %v", m)
	}
}

func TestRequireRefusesNamingEachMissingACL(t *testing.T) {
	top, p := stagePlan(t, countStage, Options{Role: RoleReplay, TruncateOutputs: true})
	acls := without(without(p.ACLs, Topic, "sensors.refined", Delete), Topic, "sensors-count-changelog", Delete)
	cl := secured(t, acls, "sensors.raw", "sensors.refined", "sensors-count-changelog")
	needs, _ := Needs(top, Options{Role: RoleReplay, TruncateOutputs: true})
	names, _ := TxnNames(context.Background(), cl, top, "")
	err := Require(context.Background(), cl, "replay sensors-count", PlanHint("count.yaml", RoleReplay), needs, names)
	var me *MissingError
	if !errors.As(err, &me) || exitcode.Code(err) != exitcode.Refused {
		t.Fatalf("err %v (exit %d), want a refusal", err, exitcode.Code(err))
	}
	msg := err.Error()
	for _, want := range []string{"Delete on topic sensors-count-changelog", "Delete on topic sensors.refined", "flecht acl plan -f count.yaml --role replay"} {
		if !strings.Contains(msg, want) {
			t.Errorf("%q does not name %q", msg, want)
		}
	}
	// With the plan granted, nothing is refused.
	cl = secured(t, p.ACLs, "sensors.raw", "sensors.refined", "sensors-count-changelog")
	if err := Require(context.Background(), cl, "replay", "", needs, names); err != nil {
		t.Errorf("refused with the whole plan: %v", err)
	}
}

func TestRequireProduceAndCreate(t *testing.T) {
	ctx := context.Background()
	_, p := stagePlan(t, countStage, Options{Role: RoleFeed})
	// The feed plan without Write on the input: produce is refused naming
	// it (Kafka itself would say CLUSTER_AUTHORIZATION_FAILED, from the
	// idempotent producer's InitProducerId).
	cl := secured(t, without(p.ACLs, Topic, "sensors.raw", Write), "sensors.refined")
	err := RequireProduce(ctx, cl, "sensors.raw")
	if exitcode.Code(err) != exitcode.Refused || !strings.Contains(err.Error(), "Write on topic sensors.raw") {
		t.Errorf("produce without Write: %v", err)
	}
	if err := RequireProduce(ctx, cl, "sensors.refined"); exitcode.Code(err) != exitcode.Refused {
		t.Errorf("produce to an output the feed only reads: %v", err)
	}
	// Create: sensors.refined exists (no Create needed), sensors.raw does
	// not and its Create was dropped.
	cl = secured(t, without(p.ACLs, Topic, "sensors.raw", Create), "sensors.refined")
	err = RequireCreate(ctx, cl, []string{"sensors.raw", "sensors.refined"})
	if exitcode.Code(err) != exitcode.Refused || !strings.Contains(err.Error(), "Create on topic sensors.raw") || strings.Contains(err.Error(), "sensors.refined") {
		t.Errorf("create without Create on the missing topic: %v", err)
	}
	cl = secured(t, p.ACLs, "sensors.refined")
	if err := RequireCreate(ctx, cl, []string{"sensors.raw", "sensors.refined"}); err != nil {
		t.Errorf("create with the feed plan: %v", err)
	}
	if err := RequireProduce(ctx, cl, "sensors.raw"); err != nil {
		t.Errorf("produce with the feed plan: %v", err)
	}
}

// topic produce writes in transactions of its own ID (flecht-produce-
// RANDOM): the feed plan grants Write on the prefix, and the preflight
// refuses, naming it, a principal without it.
func TestRequireProduceNeedsItsTransactionalID(t *testing.T) {
	ctx := context.Background()
	_, p := stagePlan(t, countStage, Options{Role: RoleFeed})
	txn := []kgo.Opt{kgo.TransactionalID("flecht-produce-0123456789abcdef")}
	cl := securedWith(t, p.ACLs, txn, "sensors.raw")
	if err := RequireProduce(ctx, cl, "sensors.raw"); err != nil {
		t.Errorf("transactional produce with the feed plan: %v", err)
	}
	cl = securedWith(t, without(p.ACLs, TransactionalID, "flecht-produce-", Write), txn, "sensors.raw")
	err := RequireProduce(ctx, cl, "sensors.raw")
	if exitcode.Code(err) != exitcode.Refused || !strings.Contains(err.Error(), "flecht-produce-") {
		t.Errorf("transactional produce without Write on its ID: %v", err)
	}
}

func TestRequireLeaveAndSweep(t *testing.T) {
	ctx := context.Background()
	g := Resource{Type: Group, Name: "app", Pattern: Literal}
	cl := secured(t, ACLs("User:p", []Need{{Resource: g, Operation: Describe}}))
	if err := RequireLeave(ctx, cl, "app"); exitcode.Code(err) != exitcode.Refused || !strings.Contains(err.Error(), "Read on group app") {
		t.Errorf("leave with Describe only: %v", err)
	}
	cl = secured(t, ACLs("User:p", []Need{{Resource: g, Operation: Read}}))
	if err := RequireLeave(ctx, cl, "app"); err != nil {
		t.Errorf("leave with Read: %v", err)
	}

	cfg := Resource{Type: Topic, Name: "cfg", Pattern: Literal}
	txn := Resource{Type: TransactionalID, Name: "flecht-reencrypt-1", Pattern: Literal}
	cl = secured(t, ACLs("User:p", []Need{{Resource: cfg, Operation: Read}, {Resource: txn, Operation: Write}}), "cfg")
	err := RequireSweep(ctx, cl, []string{"cfg"}, "flecht-reencrypt-1")
	if exitcode.Code(err) != exitcode.Refused || !strings.Contains(err.Error(), "Write on topic cfg") || strings.Contains(err.Error(), "transactional") {
		t.Errorf("sweep without Write on the topic: %v", err)
	}
	cl = secured(t, ACLs("User:p", []Need{{Resource: cfg, Operation: Read}, {Resource: cfg, Operation: Write}, {Resource: txn, Operation: Describe}}), "cfg")
	err = RequireSweep(ctx, cl, []string{"cfg"}, "flecht-reencrypt-1")
	if exitcode.Code(err) != exitcode.Refused || !strings.Contains(err.Error(), "Write on transactional ID flecht-reencrypt-1") {
		t.Errorf("sweep with Describe only on its transactional ID: %v", err)
	}
}

// Explain names the plan's ACL where Kafka names only the Describe it
// implies.
func TestExplainNamesThePlansACL(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "count.yaml")
	if err := os.WriteFile(path, []byte(countStage), 0o600); err != nil {
		t.Fatal(err)
	}
	_, p := stagePlan(t, countStage, Options{Role: RoleReplay})
	cl := secured(t, without(p.ACLs, Topic, "sensors.raw", Read), "sensors.raw", "sensors.refined")
	failure := fmt.Errorf("describing topic %q: %w", "sensors.raw", kerr.TopicAuthorizationFailed)
	err := Explain(ctx, cl, failure, path, RoleReplay, false)
	if !errors.Is(err, kerr.TopicAuthorizationFailed) || !strings.Contains(err.Error(), "of the replay role's ACLs the principal lacks Read on topic sensors.raw (flecht acl plan -f "+path+" --role replay") {
		t.Errorf("explained as %v", err)
	}
	if got := Explain(ctx, cl, io.EOF, path, RoleReplay, false); got != io.EOF {
		t.Errorf("another error changed: %v", got)
	}
	if got := Explain(ctx, cl, failure, "", RoleReplay, false); got != failure {
		t.Errorf("without a stage file: %v", got)
	}
}

// TestExplainForNamesAnExtractorsOutputs: a replay of an extractor that
// truncates the outputs its --output-topics name, refused on one of them,
// is explained with the Delete on it the plan grants; without the
// outputs the plan cannot name it.
func TestExplainForNamesAnExtractorsOutputs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "stage.yaml")
	if err := os.WriteFile(path, []byte("application_id: ex\nkind: extractor\nconfig_topics: [ex.config]\nextract: {builtin: http-poll}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f := Flags{StageFile: path, Role: string(RoleReplay), OutputTopics: []string{"items"}, TruncateOutputs: true}
	p, err := NewPlanFrom(Flags{StageFile: path, Principal: "User:p", Role: f.Role, OutputTopics: f.OutputTopics, TruncateOutputs: true})
	if err != nil {
		t.Fatal(err)
	}
	var acls []ACL
	for _, a := range p.ACLs {
		if a.ResourceName != "items" {
			acls = append(acls, a)
		}
	}
	if len(acls) == len(p.ACLs) {
		t.Fatalf("the plan has no ACL on items: %+v", p.ACLs)
	}
	cl := secured(t, acls, "ex.config", "items", "ex-changelog")
	refused := fmt.Errorf("describing output topic %q: %w", "items", kerr.TopicAuthorizationFailed)
	got := ExplainFor(context.Background(), cl, refused, f)
	if !strings.Contains(got.Error(), "lacks Delete on topic items") || !errors.Is(got, kerr.TopicAuthorizationFailed) {
		t.Errorf("ExplainFor: %v", got)
	}
	f.OutputTopics = nil
	if got := ExplainFor(context.Background(), cl, refused, f); strings.Contains(got.Error(), "Delete on topic items") {
		t.Errorf("named an output it was not given: %v", got)
	}
}
