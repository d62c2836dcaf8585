package doctor

import (
	"strings"
	"testing"
	"time"

	"github.com/flecht-dev/flecht/internal/lint"
	"github.com/flecht-dev/flecht/internal/status"
)

// Transactional IDs the principal may not describe are a finding and
// "unknown" in the check's detail, never "0 open" (Kafka leaves them out
// of ListTransactions).
func TestDiagnoseUnseenTransactionsAreAFinding(t *testing.T) {
	st := stage(t, countYAML)
	members := map[string][]int32{"c0": {0}, "c1": {1}}
	second := sample(t0.Add(10*time.Second), "Stable", members, [2]int64{180, 100}, [2]int64{185, 100})
	second.Transaction.Unauthorized = []string{"app-0", "app-1"}
	obs := Observations{First: sample(t0, "Stable", members, [2]int64{90, 50}, [2]int64{100, 60}), Second: second, Topics: cleanTopics()}
	r := Diagnose(Inputs{Stage: st, Interval: 10 * time.Second}, obs)
	fs := findings(r, CheckTransactions)
	if len(fs) != 1 || !strings.Contains(fs[0].Message, "unknown: not authorized (needs Describe on transactional ID app-0, app-1)") || !strings.Contains(fs[0].Command, "flecht acl plan") {
		t.Fatalf("findings %+v", fs)
	}
	for _, c := range r.Checks {
		if c.Name == CheckTransactions && (c.Status != StatusFindings || !strings.HasPrefix(c.Detail, "unknown: not authorized")) {
			t.Errorf("check %+v", c)
		}
	}
}

// On a secured cluster the Kafka tool commands a finding prints carry the
// client properties the tools need there (every other fix is a flecht
// command, which reads the profile).
func TestDiagnoseCommandsCarryTheCommandConfig(t *testing.T) {
	st := stage(t, countYAML)
	members := map[string][]int32{"c0": {0}, "c1": {1}}
	hanging := status.PendingTransaction{TransactionalID: "app-0", StartedAt: t0.Add(-90 * time.Second), TimeoutMillis: 60000, Partitions: []string{"out/0"}}
	obs := Observations{
		First:  sample(t0, "Stable", members, [2]int64{90, 50}, [2]int64{100, 60}),
		Second: sample(t0.Add(10*time.Second), "Stable", members, [2]int64{180, 100}, [2]int64{185, 100}, hanging),
		Topics: cleanTopics(),
	}
	r := Diagnose(Inputs{Stage: st, Interval: 10 * time.Second, Brokers: "k:9093", CommandConfig: "admin client.properties"}, obs)
	fs := findings(r, CheckTransactions)
	if len(fs) != 1 || !strings.Contains(fs[0].Command, "kafka-transactions.sh --bootstrap-server k:9093 --command-config 'admin client.properties' find-hanging") {
		t.Fatalf("findings %+v", fs)
	}
}

// A changelog the principal may not describe is a finding that says so,
// not "the stage's state is gone".
func TestDiagnoseUnseenChangelogIsNotLost(t *testing.T) {
	st := stage(t, countYAML)
	members := map[string][]int32{"c0": {0}, "c1": {1}}
	no := false
	topics := cleanTopics()
	topics.Topics = append(topics.Topics, lint.Topic{Topic: "app-changelog", Roles: []string{lint.RoleChangelog}, Authorized: &no})
	topics.Problems = append(topics.Problems, lint.TopicProblem{Kind: lint.ProblemNotAuthorized, Topic: "app-changelog", Message: "app-changelog: unknown: not authorized (needs Describe on topic app-changelog)"})
	obs := Observations{
		First:  sample(t0, "Stable", members, [2]int64{90, 50}, [2]int64{100, 60}),
		Second: sample(t0.Add(10*time.Second), "Stable", members, [2]int64{180, 100}, [2]int64{185, 100}),
		Topics: topics,
	}
	fs := findings(Diagnose(Inputs{Stage: st, Interval: 10 * time.Second}, obs), CheckTopics)
	if len(fs) != 1 || !strings.Contains(fs[0].Message, "not authorized") || !strings.Contains(fs[0].Command, "flecht acl plan") {
		t.Fatalf("findings %+v", fs)
	}
}

// A group the principal may not describe is a finding of the members and
// lag checks that says "unknown", never "no member" or a lag of 0, and
// the other checks still run.
func TestDiagnoseUnseenGroupIsAFinding(t *testing.T) {
	st := stage(t, countYAML)
	unseen := func(at time.Time) *status.Sample {
		s := sample(at, status.GroupStateUnknown, nil, [2]int64{}, [2]int64{100, 60})
		s.Committed = map[status.TP]int64{}
		s.GroupUnauthorized = status.GroupNotAuthorized("app")
		return s
	}
	obs := Observations{First: unseen(t0), Second: unseen(t0), OneSample: true, Topics: cleanTopics()}
	r := Diagnose(Inputs{Stage: st, Interval: 10 * time.Second}, obs)
	const why = "unknown: not authorized (needs Describe on group app)"
	for _, check := range []string{CheckMembers, CheckLag} {
		fs := findings(r, check)
		if len(fs) != 1 || !strings.Contains(fs[0].Message, why) || !strings.Contains(fs[0].Command, "flecht acl plan") {
			t.Errorf("%s findings %+v", check, fs)
		}
	}
	for _, c := range r.Checks {
		switch c.Name {
		case CheckMembers, CheckLag:
			if c.Status != StatusFindings || c.Detail != why {
				t.Errorf("check %+v", c)
			}
		case CheckTransactions, CheckTopics:
			if c.Status != StatusOK {
				t.Errorf("check %+v", c)
			}
		}
	}
	for _, n := range r.Notes {
		if strings.Contains(n, "no member") {
			t.Errorf("note %q", n)
		}
	}
}
