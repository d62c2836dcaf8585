package doctor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/lint"
	"github.com/flecht-dev/flecht/internal/promscrape"
	"github.com/flecht-dev/flecht/internal/stagefile"
	"github.com/flecht-dev/flecht/internal/status"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func stage(t *testing.T, yaml string) *stagefile.Stage {
	t.Helper()
	st, err := stagefile.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	st.Path = "stage.yaml"
	return st
}

// writeStage writes yaml as a stage file and returns its path.
func writeStage(t *testing.T, yaml string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "stage.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

const countYAML = "application_id: app\nkind: transformer\ninput_topics: [in]\ninvalid_messages: skip\ntransform: {builtin: count, output_topic: out}\n"
const bridgeYAML = "application_id: br\nkind: mqtt\nconfig_topics: [cfg]\nextract: {builtin: mqtt-relay, output_topic: raw, key: \"{topic}\"}\nmqtt: {session_expiry: 1h}\n"

// sample is a status sample of group app on topic in (2 partitions):
// members name the partitions each owns, committed and ends the offsets.
func sample(at time.Time, state string, members map[string][]int32, committed, ends [2]int64, pending ...status.PendingTransaction) *status.Sample {
	s := &status.Sample{At: at, Inputs: []string{"in"}, Partitions: map[string][]int32{"in": {0, 1}},
		Committed: map[status.TP]int64{}, Starts: map[status.TP]int64{}, Ends: map[status.TP]int64{},
		Group:       kafkax.Group{Group: "app", State: state, Members: []kafkax.GroupMember{}},
		Transaction: status.Transactions{Supported: true, Pending: pending}}
	for id, ps := range members {
		s.Group.Members = append(s.Group.Members, kafkax.GroupMember{ClientID: id, Assigned: []kafkax.TopicPartitions{{Topic: "in", Partitions: ps}}})
	}
	for p := range 2 {
		tp := status.TP{Topic: "in", Partition: int32(p)}
		s.Committed[tp], s.Ends[tp] = committed[p], ends[p]
	}
	return s
}

func scrape(t *testing.T, at time.Time, text string) *promscrape.Sample {
	t.Helper()
	f, err := promscrape.Parse(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	return &promscrape.Sample{At: at, Families: f}
}

func cleanTopics() *lint.TopicsReport {
	return &lint.TopicsReport{Topics: []lint.Topic{{Topic: "in", Roles: []string{"raw", "input"}, Exists: true, Partitions: 2, OK: true}},
		Problems: []lint.TopicProblem{}, Notes: []string{}}
}

const healthyMetrics = `# TYPE flechtwerk_state_record_max_bytes gauge
flechtwerk_state_record_max_bytes 2048
# TYPE flechtwerk_message_out_max_bytes gauge
flechtwerk_message_out_max_bytes{topic="out"} 300
# TYPE flechtwerk_keyring_keys_loaded gauge
flechtwerk_keyring_keys_loaded{kid="k1"} 1
`

func statuses(r *Report) map[string]string {
	out := map[string]string{}
	for _, c := range r.Checks {
		out[c.Name] = c.Status
	}
	return out
}

func findings(r *Report, check string) []Finding {
	var out []Finding
	for _, f := range r.Findings {
		if f.Check == check {
			out = append(out, f)
		}
	}
	return out
}

// A healthy transformer: two members own both tasks, the lag falls, no
// transaction is old, the topics are right, records are small, nothing
// invalid, every reader holds the keyring's kid. Every check passes, and
// the bridge-only checks say why they were skipped.
func TestDiagnoseCleanTransformer(t *testing.T) {
	st := stage(t, countYAML)
	members := map[string][]int32{"c0": {0}, "c1": {1}}
	obs := Observations{
		First:  sample(t0, "Stable", members, [2]int64{90, 50}, [2]int64{100, 60}),
		Second: sample(t0.Add(10*time.Second), "Stable", members, [2]int64{180, 100}, [2]int64{185, 100}, status.PendingTransaction{TransactionalID: "app-0", StartedAt: t0.Add(9 * time.Second), TimeoutMillis: 60000}),
		Topics: cleanTopics(),
		Scrapes: []Scrape{
			{URL: "http://c0:9464/metrics", First: scrape(t, t0, healthyMetrics), Second: scrape(t, t0.Add(10*time.Second), healthyMetrics)},
			{URL: "http://c1:9464/metrics", First: scrape(t, t0, healthyMetrics), Second: scrape(t, t0.Add(10*time.Second), healthyMetrics)},
		},
	}
	r := Diagnose(Inputs{Stage: st, Interval: 10 * time.Second, Kids: []string{"k1"}}, obs)
	if len(r.Findings) != 0 {
		t.Fatalf("findings on a healthy stage: %+v", r.Findings)
	}
	want := map[string]string{CheckMembers: StatusOK, CheckLag: StatusOK, CheckTransactions: StatusOK, CheckTopics: StatusOK, CheckMetrics: StatusOK,
		CheckRecordSize: StatusOK, CheckInvalid: StatusOK, CheckModule: StatusOK, CheckMQTT: StatusSkipped, CheckBudget: StatusSkipped, CheckKeyring: StatusOK, CheckStandbys: StatusSkipped}
	if got := statuses(r); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("checks\n got %v\nwant %v", got, want)
	}
	if r.ApplicationID != "app" || r.Kind != "transformer" || r.IntervalS != 10 {
		t.Errorf("report head %+v", r)
	}
}

// Everything that can go wrong with a transformer, each with its command.
func TestDiagnoseTransformerFindings(t *testing.T) {
	st := stage(t, countYAML)
	grown := `# TYPE flechtwerk_state_record_max_bytes gauge
flechtwerk_state_record_max_bytes 943718
# TYPE flechtwerk_messages_invalid_total counter
flechtwerk_messages_invalid_total{outcome="skipped",topic="in"} %d
# TYPE flechtwerk_keyring_keys_loaded gauge
flechtwerk_keyring_keys_loaded{kid="k1"} 1
`
	obs := Observations{
		// Nobody owns task 1, and the lag grows from 30 to 1,600.
		First: sample(t0, "Stable", map[string][]int32{"c0": {0}}, [2]int64{70, 0}, [2]int64{100, 0}),
		Second: sample(t0.Add(10*time.Second), "Stable", map[string][]int32{"c0": {0}}, [2]int64{100, 0}, [2]int64{700, 1000},
			status.PendingTransaction{TransactionalID: "app-0", StartedAt: t0.Add(-90 * time.Second), TimeoutMillis: 60000, Partitions: []string{"out/0"}},
			status.PendingTransaction{TransactionalID: "app-1", StartedAt: t0.Add(-25 * time.Second), TimeoutMillis: 60000}),
		Topics: &lint.TopicsReport{Topics: []lint.Topic{{Topic: "in", Roles: []string{"raw", "input"}, Exists: true, Partitions: 2}},
			Problems: []lint.TopicProblem{{Kind: lint.ProblemRawRetention, Topic: "in", Message: "in has retention.ms=604800000 (7d)"}}, Notes: []string{}},
		Scrapes: []Scrape{
			{URL: "http://c0:9464/metrics", First: scrape(t, t0, fmt.Sprintf(grown, 1)), Second: scrape(t, t0.Add(10*time.Second), fmt.Sprintf(grown, 3))},
			{URL: "http://c1:9464/metrics", Err: errors.New("connection refused")},
		},
	}
	r := Diagnose(Inputs{Stage: st, Brokers: "k:9092", Interval: 10 * time.Second, Kids: []string{"k1", "k2"}}, obs)
	type want struct{ check, message, command string }
	for _, w := range []want{
		{CheckMembers, "task(s) [1] of group app are assigned to no member", "flecht status -f stage.yaml"},
		{CheckLag, "lag grew from 30 to 1600 in 10s", "flecht status -f stage.yaml --watch"},
		{CheckTransactions, "app-0 has had a transaction open for 1m40s, past its 1m timeout: it hangs, and every read_committed reader of out/0 stops at it", "restart the instance that owns app-0"},
		{CheckTransactions, "app-1 has had a transaction open for 35s of its 1m timeout", "flecht status -f stage.yaml --watch"},
		{CheckTopics, "in has retention.ms=604800000 (7d)", "flecht topic config in --set retention.ms=-1 --execute"},
		{CheckMetrics, "http://c1:9464/metrics cannot be scraped: connection refused", "curl -s http://c1:9464/readyz"},
		{CheckRecordSize, "wrote a state record of 921.6 KiB, 90% of the 1 MiB record ceiling", "flecht lint state-key -f stage.yaml"},
		{CheckInvalid, "skipped 3 invalid record(s) of in since it started, 2 of them in the last 10s: data lost by policy", "invalid_messages: dlq"},
		{CheckKeyring, `http://c0:9464/metrics has not loaded key "k2" (it holds k1)`, "flecht keys check --kid k2 --metrics-url http://c0:9464/metrics"},
	} {
		found := false
		for _, f := range findings(r, w.check) {
			if strings.Contains(f.Message, w.message) && strings.Contains(f.Command, w.command) {
				found = true
			}
		}
		if !found {
			t.Errorf("no %s finding with %q / %q in %+v", w.check, w.message, w.command, findings(r, w.check))
		}
	}
	if len(r.Findings) != 9 {
		t.Errorf("%d findings, want 9: %+v", len(r.Findings), r.Findings)
	}
}

// A member that commits nothing while lag stands is stuck; a group with no
// member runs nothing; a group rebalancing in both samples churns.
func TestDiagnoseStuckAndAbsent(t *testing.T) {
	st := stage(t, countYAML)
	m := map[string][]int32{"c0": {0, 1}}
	stuck := Diagnose(Inputs{Stage: st}, Observations{
		First: sample(t0, "Stable", m, [2]int64{10, 10}, [2]int64{20, 20}), Second: sample(t0.Add(10*time.Second), "Stable", m, [2]int64{10, 10}, [2]int64{20, 20}),
		Topics: cleanTopics(),
	})
	if f := findings(stuck, CheckLag); len(f) != 1 || !strings.Contains(f[0].Message, "lag 20 and no offset committed in 10s: the stage is stuck") {
		t.Errorf("stuck: %+v", f)
	}
	none := Diagnose(Inputs{Stage: st}, Observations{
		First: sample(t0, "Empty", nil, [2]int64{10, 10}, [2]int64{10, 10}), Second: sample(t0.Add(10*time.Second), "Empty", nil, [2]int64{10, 10}, [2]int64{10, 10}),
		Topics: cleanTopics(),
	})
	if f := findings(none, CheckMembers); len(f) != 1 || !strings.Contains(f[0].Message, "group app has no member") || !strings.Contains(f[0].Command, "flecht run -f stage.yaml") {
		t.Errorf("no member: %+v", f)
	}
	churn := Diagnose(Inputs{Stage: st}, Observations{
		First: sample(t0, "PreparingRebalance", m, [2]int64{10, 10}, [2]int64{10, 10}), Second: sample(t0.Add(10*time.Second), "CompletingRebalance", m, [2]int64{10, 10}, [2]int64{10, 10}),
		Topics: cleanTopics(),
	})
	if f := findings(churn, CheckMembers); len(f) != 1 || !strings.Contains(f[0].Message, "rebalancing in both samples") {
		t.Errorf("churn: %+v", f)
	}
	// Without --metrics-url the metric checks are skipped, not passed.
	for _, c := range []string{CheckMetrics, CheckRecordSize, CheckInvalid, CheckKeyring} {
		if s := statuses(none)[c]; s != StatusSkipped {
			t.Errorf("%s: %s without metrics", c, s)
		}
	}
}

func bridgeMetrics(connects, disconnects, in int, ackCount int, ackSum float64) string {
	return fmt.Sprintf(`# TYPE flechtwerk_mqtt_connects_total counter
flechtwerk_mqtt_connects_total %d
# TYPE flechtwerk_mqtt_disconnects_total counter
flechtwerk_mqtt_disconnects_total %d
# TYPE flechtwerk_mqtt_messages_in_total counter
flechtwerk_mqtt_messages_in_total{topic="s/+"} %d
# TYPE flechtwerk_mqtt_ack_seconds histogram
flechtwerk_mqtt_ack_seconds_bucket{le="+Inf"} %d
flechtwerk_mqtt_ack_seconds_sum %g
flechtwerk_mqtt_ack_seconds_count %d
`, connects, disconnects, in, ackCount, ackSum, ackCount)
}

func bridgeObs(t *testing.T, first, second string) Observations {
	s := &status.Sample{At: t0, Group: kafkax.Group{State: kafkax.GroupStateDead, Members: []kafkax.GroupMember{}}, Transaction: status.Transactions{Supported: true}}
	s2 := *s
	s2.At = t0.Add(10 * time.Second)
	return Observations{First: s, Second: &s2, Topics: cleanTopics(),
		Scrapes: []Scrape{{URL: "http://b0:9464/metrics", First: scrape(t, t0, first), Second: scrape(t, t0.Add(10*time.Second), second)}}}
}

// The bridge: one connect, 1 msg/s against a 1,000-message queue and a
// 1 h session expiry: 16m40s of budget, over the 5m minimum, no finding.
// Reconnects are churn; no connection is a finding; 10 msg/s leaves 1m40s
// of budget; a rate above window / ack latency fills the queue while
// connected.
func TestDiagnoseBridge(t *testing.T) {
	st := stage(t, bridgeYAML)
	in := Inputs{Stage: st, Interval: 10 * time.Second}
	ok := Diagnose(in, bridgeObs(t, bridgeMetrics(1, 0, 100, 10, 0.1), bridgeMetrics(1, 0, 110, 20, 0.2)))
	if len(ok.Findings) != 0 {
		t.Fatalf("a healthy bridge: %+v", ok.Findings)
	}
	if s := statuses(ok); s[CheckMQTT] != StatusOK || s[CheckBudget] != StatusOK || s[CheckMembers] != StatusSkipped || s[CheckLag] != StatusSkipped || s[CheckInvalid] != StatusSkipped {
		t.Errorf("checks %v", s)
	}
	for _, c := range ok.Checks {
		if c.Name == CheckLag && c.Detail != "an MQTT bridge has no input to lag behind" {
			t.Errorf("lag skipped: %q", c.Detail)
		}
	}
	if d := checkDetail(ok, CheckBudget); !strings.Contains(d, "16m40s at 1/s") {
		t.Errorf("budget detail %q", d)
	}

	churn := Diagnose(in, bridgeObs(t, bridgeMetrics(3, 2, 100, 10, 0.1), bridgeMetrics(3, 2, 110, 20, 0.2)))
	if f := findings(churn, CheckMQTT); len(f) != 1 || !strings.Contains(f[0].Message, "connected 3 times since it started") {
		t.Errorf("churn: %+v", f)
	}
	down := Diagnose(in, bridgeObs(t, bridgeMetrics(1, 1, 100, 10, 0.1), bridgeMetrics(1, 1, 100, 10, 0.1)))
	if f := findings(down, CheckMQTT); len(f) != 1 || !strings.Contains(f[0].Message, "is not connected to its MQTT broker") || !strings.Contains(f[0].Command, "http://b0:9464/readyz") {
		t.Errorf("down: %+v", f)
	}
	busy := Diagnose(in, bridgeObs(t, bridgeMetrics(1, 0, 0, 10, 0.1), bridgeMetrics(1, 0, 100, 110, 1.1)))
	if f := findings(busy, CheckBudget); len(f) != 1 || !strings.Contains(f[0].Message, "the outage budget is 1m40s (queue binds") ||
		!strings.Contains(f[0].Command, "flecht budget -f stage.yaml --queue-limit 1000 --rate 10.00/s") {
		t.Errorf("short budget: %+v", f)
	}
	// 100 acks in 10 s took 1 s each: 20 in flight / 1 s = 20/s < 30/s.
	slow := Diagnose(Inputs{Stage: st, Interval: 10 * time.Second, QueueLimit: 1_000_000}, bridgeObs(t, bridgeMetrics(1, 0, 0, 0, 0), bridgeMetrics(1, 0, 300, 100, 100)))
	if f := findings(slow, CheckBudget); len(f) != 1 || !strings.Contains(f[0].Message, "messages arrive at 30/s but the bridge acknowledges at most about 20/s") {
		t.Errorf("over capacity: %+v", f)
	}
}

// Without --keyring the readers must agree: one lacking a kid another
// holds is a finding, and one without a keyring at all too.
func TestDiagnoseKeyringAgreement(t *testing.T) {
	st := stage(t, countYAML)
	m := map[string][]int32{"c0": {0, 1}}
	kids := func(ks ...string) string {
		out := "# TYPE flechtwerk_keyring_keys_loaded gauge\n"
		for _, k := range ks {
			out += fmt.Sprintf("flechtwerk_keyring_keys_loaded{kid=%q} 1\n", k)
		}
		return out
	}
	obs := Observations{
		First: sample(t0, "Stable", m, [2]int64{1, 1}, [2]int64{1, 1}), Second: sample(t0.Add(time.Second), "Stable", m, [2]int64{1, 1}, [2]int64{1, 1}),
		Topics: cleanTopics(),
		Scrapes: []Scrape{
			{URL: "a", First: scrape(t, t0, kids("k1", "k2")), Second: scrape(t, t0, kids("k1", "k2"))},
			{URL: "b", First: scrape(t, t0, kids("k1")), Second: scrape(t, t0, kids("k1"))},
			{URL: "c", First: scrape(t, t0, "# TYPE up gauge\nup 1\n"), Second: scrape(t, t0, "# TYPE up gauge\nup 1\n")},
		},
	}
	r := Diagnose(Inputs{Stage: st}, obs)
	f := findings(r, CheckKeyring)
	if len(f) != 2 || f[0].Subject != "b" || !strings.Contains(f[0].Message, `has not loaded key "k2"`) || f[1].Subject != "c" || !strings.Contains(f[1].Message, "has no keyring loaded") {
		t.Errorf("%+v", f)
	}
}

// Run samples twice, Interval apart, scrapes each instance twice (an
// unreachable one once), asks for the topics once; a failure to reach
// Kafka is an error, not a finding.
func TestRunGathersTwoSamples(t *testing.T) {
	st := stage(t, countYAML)
	var calls []string
	m := map[string][]int32{"c0": {0, 1}}
	src := Sources{
		Status: func(_ context.Context, req status.Request) (*status.Sample, error) {
			calls = append(calls, "status "+req.ApplicationID+" "+strings.Join(req.InputTopics, ","))
			return sample(t0, "Stable", m, [2]int64{1, 1}, [2]int64{1, 1}), nil
		},
		Topics: func(_ context.Context, spec lint.TopicsSpec) (*lint.TopicsReport, error) {
			calls = append(calls, fmt.Sprintf("topics raw=%v changelog=%s min=%s", spec.Raw, spec.Changelog, spec.MinRetention))
			return cleanTopics(), nil
		},
		Scrape: func(_ context.Context, u string) (*promscrape.Sample, error) {
			calls = append(calls, "scrape "+u)
			if u == "down:1" {
				return nil, errors.New("refused")
			}
			return scrape(t, t0, healthyMetrics), nil
		},
		Sleep: func(_ context.Context, d time.Duration) error { calls = append(calls, "sleep "+d.String()); return nil },
	}
	r, err := Run(context.Background(), Inputs{Stage: st, MetricsURLs: []string{"c0:9464", "down:1"}, Interval: 3 * time.Second, MinRetention: time.Hour}, src)
	if err != nil {
		t.Fatal(err)
	}
	want := "status app in|scrape c0:9464|scrape down:1|topics raw=[in] changelog=app-changelog min=1h0m0s|sleep 3s|status app in|scrape c0:9464"
	if got := strings.Join(calls, "|"); got != want {
		t.Errorf("calls\n got %s\nwant %s", got, want)
	}
	if f := findings(r, CheckMetrics); len(f) != 1 || f[0].Subject != "http://down:1/metrics" {
		t.Errorf("%+v", f)
	}
	src.Status = func(context.Context, status.Request) (*status.Sample, error) { return nil, errors.New("no broker") }
	if _, err := Run(context.Background(), Inputs{Stage: st}, src); err == nil || err.Error() != "no broker" {
		t.Errorf("Kafka away: %v", err)
	}
}

// A stage with no group member and no instance answering is sampled once:
// nothing moves between two samples, so the doctor does not wait an
// interval to say so. A member, an instance that answers, or an explicit
// --interval makes it sample twice.
func TestRunSamplesAStoppedStageOnce(t *testing.T) {
	st := stage(t, countYAML)
	run := func(members map[string][]int32, scrapeErr error, given bool) ([]string, *Report) {
		t.Helper()
		var calls []string
		src := Sources{
			Status: func(context.Context, status.Request) (*status.Sample, error) {
				calls = append(calls, "status")
				return sample(t0, "Empty", members, [2]int64{1, 1}, [2]int64{4, 4}), nil
			},
			Topics: func(context.Context, lint.TopicsSpec) (*lint.TopicsReport, error) { return cleanTopics(), nil },
			Scrape: func(context.Context, string) (*promscrape.Sample, error) {
				calls = append(calls, "scrape")
				if scrapeErr != nil {
					return nil, scrapeErr
				}
				return scrape(t, t0, healthyMetrics), nil
			},
			Sleep: func(context.Context, time.Duration) error { calls = append(calls, "sleep"); return nil },
		}
		r, err := Run(context.Background(), Inputs{Stage: st, MetricsURLs: []string{"c0:9464"}, Interval: 10 * time.Second, IntervalGiven: given}, src)
		if err != nil {
			t.Fatal(err)
		}
		return calls, r
	}
	calls, r := run(nil, errors.New("refused"), false)
	if got := strings.Join(calls, "|"); got != "status|scrape" {
		t.Errorf("a stopped stage: calls %s, want one status sample and one scrape", got)
	}
	if r.IntervalS != 0 || !strings.Contains(strings.Join(r.Notes, "\n"), "sampled once") {
		t.Errorf("a stopped stage: interval_s %v, notes %q", r.IntervalS, r.Notes)
	}
	if f := findings(r, CheckMembers); len(f) == 0 {
		t.Errorf("a stopped stage with lag: no members finding (%+v)", r.Findings)
	}
	for name, c := range map[string]struct {
		members   map[string][]int32
		scrapeErr error
		given     bool
	}{
		"a member":             {members: map[string][]int32{"c0": {0, 1}}, scrapeErr: errors.New("refused")},
		"an instance answers":  {},
		"--interval was given": {scrapeErr: errors.New("refused"), given: true},
	} {
		if calls, _ := run(c.members, c.scrapeErr, c.given); !strings.Contains(strings.Join(calls, "|"), "sleep|status") {
			t.Errorf("%s: calls %v, want two samples", name, calls)
		}
	}
}

// A stateful stage that has run without its changelog has lost its state;
// a stateless one has no changelog to lose, and one that never ran creates
// it at its first start.
func TestDiagnoseMissingChangelog(t *testing.T) {
	st := stage(t, countYAML)
	topics := func() *lint.TopicsReport {
		r := cleanTopics()
		r.Topics = append(r.Topics, lint.Topic{Topic: "app-changelog", Roles: []string{lint.RoleChangelog}, OK: true})
		return r
	}
	m := map[string][]int32{"c0": {0, 1}}
	ran := Observations{First: sample(t0, "Stable", m, [2]int64{5, 5}, [2]int64{5, 5}), Second: sample(t0.Add(time.Second), "Stable", m, [2]int64{5, 5}, [2]int64{5, 5}), Topics: topics()}
	r := Diagnose(Inputs{Stage: st}, ran)
	if f := findings(r, CheckTopics); len(f) != 1 || !strings.Contains(f[0].Message, "changelog app-changelog does not exist, but group app has run") ||
		!strings.Contains(f[0].Command, "flecht replay -f stage.yaml --execute") {
		t.Errorf("stateful: %+v", f)
	}
	if f := findings(Diagnose(Inputs{Stage: st, Stateless: true}, ran), CheckTopics); len(f) != 0 {
		t.Errorf("stateless: %+v", f)
	}
	fresh := ran
	fresh.First = &status.Sample{At: t0, Partitions: map[string][]int32{"in": {0, 1}}, Group: kafkax.Group{State: kafkax.GroupStateDead}, Transaction: status.Transactions{Supported: true}}
	s2 := *fresh.First
	fresh.Second = &s2
	if f := findings(Diagnose(Inputs{Stage: st}, fresh), CheckTopics); len(f) != 0 {
		t.Errorf("never ran: %+v", f)
	}
}

// A lag that stands because the input ends in transaction markers (or
// aborted records) is no stuck stage: a read_committed reader has nothing
// left to read there. The stage commits the offset after its last record,
// so every partition written by a transactional producer (an extractor,
// the bridge, another transformer) keeps a lag of at least 1 at rest.
// Records left to read are still a stuck stage, and so is a lag whose
// range could not be read.
func TestDiagnoseStandingLagOfMarkersOnly(t *testing.T) {
	st := stage(t, countYAML)
	m := map[string][]int32{"c0": {0, 1}}
	obs := func(unread *bool, err error) Observations {
		return Observations{
			First:  sample(t0, "Stable", m, [2]int64{10, 7}, [2]int64{11, 8}),
			Second: sample(t0.Add(10*time.Second), "Stable", m, [2]int64{10, 7}, [2]int64{11, 8}),
			Topics: cleanTopics(), Unread: unread, UnreadErr: err,
		}
	}
	no, yes := false, true
	idle := Diagnose(Inputs{Stage: st, Interval: 10 * time.Second}, obs(&no, nil))
	if f := findings(idle, CheckLag); len(f) != 0 {
		t.Errorf("lag of markers only: %+v", f)
	}
	if !strings.Contains(strings.Join(idle.Notes, "\n"), "lag 2 is transaction markers or aborted records") {
		t.Errorf("notes %q", idle.Notes)
	}
	for name, o := range map[string]Observations{"records left": obs(&yes, nil), "unread": obs(nil, errors.New("fetch failed"))} {
		r := Diagnose(Inputs{Stage: st, Interval: 10 * time.Second}, o)
		if f := findings(r, CheckLag); len(f) != 1 || !strings.Contains(f[0].Message, "lag 2 and no offset committed in 10s: the stage is stuck") {
			t.Errorf("%s: %+v", name, f)
		}
	}
}

// Run reads what a standing lag holds, from the committed offsets to the
// ends of the second sample, only when the lag stands; a moving stage is
// not read.
func TestRunReadsAStandingLag(t *testing.T) {
	st := stage(t, countYAML)
	m := map[string][]int32{"c0": {0, 1}}
	var asked []map[status.TP][2]int64
	samples := []*status.Sample{}
	src := Sources{
		Status: func(context.Context, status.Request) (*status.Sample, error) {
			s := samples[0]
			samples = samples[1:]
			return s, nil
		},
		Topics: func(context.Context, lint.TopicsSpec) (*lint.TopicsReport, error) { return cleanTopics(), nil },
		Scrape: func(context.Context, string) (*promscrape.Sample, error) { return nil, errors.New("unused") },
		Sleep:  func(context.Context, time.Duration) error { return nil },
		Unread: func(_ context.Context, ranges map[status.TP][2]int64) (bool, error) {
			asked = append(asked, ranges)
			return false, nil
		},
	}
	samples = []*status.Sample{sample(t0, "Stable", m, [2]int64{10, 7}, [2]int64{11, 7}), sample(t0.Add(time.Second), "Stable", m, [2]int64{10, 7}, [2]int64{11, 7})}
	r, err := Run(context.Background(), Inputs{Stage: st, Interval: time.Second}, src)
	if err != nil {
		t.Fatal(err)
	}
	want := map[status.TP][2]int64{{Topic: "in", Partition: 0}: {10, 11}}
	if len(asked) != 1 || fmt.Sprint(asked[0]) != fmt.Sprint(want) {
		t.Errorf("read %v, want %v", asked, want)
	}
	if f := findings(r, CheckLag); len(f) != 0 {
		t.Errorf("%+v", f)
	}
	asked = nil
	samples = []*status.Sample{sample(t0, "Stable", m, [2]int64{10, 7}, [2]int64{20, 7}), sample(t0.Add(time.Second), "Stable", m, [2]int64{15, 7}, [2]int64{20, 7})}
	if _, err := Run(context.Background(), Inputs{Stage: st, Interval: time.Second}, src); err != nil || len(asked) != 0 {
		t.Errorf("a moving stage: read %v (%v)", asked, err)
	}
}

// The bridge reads no secret (its config records hold none), so it loads
// no keyring and exports no flechtwerk_keyring_keys_loaded: a --keyring
// (or FLECHT_KEYRING, which an operator of rotations has set) makes no
// finding on a bridge, where "run the stage with --keyring" cannot be
// followed. The check says why it was skipped.
func TestDiagnoseBridgeHoldsNoKeyring(t *testing.T) {
	st := stage(t, bridgeYAML)
	r := Diagnose(Inputs{Stage: st, Interval: 10 * time.Second, Kids: []string{"k1"}},
		bridgeObs(t, bridgeMetrics(1, 0, 100, 10, 0.1), bridgeMetrics(1, 0, 110, 20, 0.2)))
	if f := findings(r, CheckKeyring); len(f) != 0 {
		t.Errorf("keyring findings on a bridge: %+v", f)
	}
	for _, c := range r.Checks {
		if c.Name == CheckKeyring && (c.Status != StatusSkipped || !strings.Contains(c.Detail, "reads no secrets")) {
			t.Errorf("keyring check %+v", c)
		}
	}
}

// An invalid record raised (invalid_messages: crash; a Python stage's
// handler that raises) stopped the stage: nothing was lost, and getting
// past it takes skip or dlq. Only skipped and substituted records are data
// lost by policy.
func TestDiagnoseInvalidOutcomes(t *testing.T) {
	st := stage(t, countYAML)
	m := map[string][]int32{"c0": {0, 1}}
	text := `# TYPE flechtwerk_messages_invalid_total counter
flechtwerk_messages_invalid_total{outcome="raised",topic="in"} 1
flechtwerk_messages_invalid_total{outcome="substituted",topic="in"} 2
`
	r := Diagnose(Inputs{Stage: st, Interval: 10 * time.Second}, Observations{
		First: sample(t0, "Stable", m, [2]int64{1, 1}, [2]int64{1, 1}), Second: sample(t0.Add(10*time.Second), "Stable", m, [2]int64{1, 1}, [2]int64{1, 1}),
		Topics:  cleanTopics(),
		Scrapes: []Scrape{{URL: "u", First: scrape(t, t0, text), Second: scrape(t, t0, text)}},
	})
	got := map[string]Finding{}
	for _, f := range findings(r, CheckInvalid) {
		got[strings.Fields(f.Message)[1]] = f
	}
	if f := got["raised"]; strings.Contains(f.Message, "data lost") || !strings.Contains(f.Message, "stopped the stage") || !strings.Contains(f.Command, "invalid_messages: skip or dlq") {
		t.Errorf("raised: %+v", f)
	}
	if f := got["substituted"]; !strings.Contains(f.Message, "substituted 2 invalid record(s) of in since it started: data lost by policy") {
		t.Errorf("substituted: %+v", f)
	}
}

const (
	shaA = "aaaaaaaaaaaa1111111111111111111111111111111111111111111111111111"
	shaB = "bbbbbbbbbbbb2222222222222222222222222222222222222222222222222222"
)

const enrichYAML = "application_id: app\nkind: transformer\ninput_topics: [in]\ntransform: {module: ./enrich.wasm, output_topics: [out]}\n"

// moduleObs is a healthy group whose instances export what texts say.
func moduleObs(t *testing.T, texts ...string) Observations {
	m := map[string][]int32{"c0": {0, 1}}
	obs := Observations{
		First: sample(t0, "Stable", m, [2]int64{1, 1}, [2]int64{1, 1}), Second: sample(t0.Add(10*time.Second), "Stable", m, [2]int64{1, 1}, [2]int64{1, 1}),
		Topics: cleanTopics(),
	}
	for i, text := range texts {
		obs.Scrapes = append(obs.Scrapes, Scrape{URL: fmt.Sprintf("http://c%d:9464/metrics", i), First: scrape(t, t0, text), Second: scrape(t, t0.Add(10*time.Second), text)})
	}
	return obs
}

func runsModule(sha string) string {
	return "# TYPE flechtwerk_module_info gauge\nflechtwerk_module_info{module=\"enrich.wasm\",sha256=\"" + sha + "\",abi=\"1\"} 1\n"
}

func checkDetail(r *Report, name string) string {
	for _, c := range r.Checks {
		if c.Name == name {
			return c.Status + ": " + c.Detail
		}
	}
	return ""
}

// Every instance of a module's group runs the stage file's module, known
// by its sha256; a rollout that stopped half way names each instance that
// runs another, with what it should run and the command.
func TestDiagnoseModule(t *testing.T) {
	st := stage(t, enrichYAML)
	file := &status.ModuleFile{File: "./enrich.wasm", Path: "dir/enrich.wasm", SHA256: shaA}
	in := Inputs{Stage: st, Interval: 10 * time.Second, Module: file}

	ok := Diagnose(in, moduleObs(t, runsModule(shaA), runsModule(shaA)))
	if len(ok.Findings) != 0 || checkDetail(ok, CheckModule) != "ok: 2 instance(s) run enrich.wasm (sha256 aaaaaaaaaaaa, ABI 1)" {
		t.Errorf("agreeing: %q %+v", checkDetail(ok, CheckModule), ok.Findings)
	}

	half := Diagnose(in, moduleObs(t, runsModule(shaA), runsModule(shaB), healthyMetrics))
	f := findings(half, CheckModule)
	if len(f) != 2 || checkDetail(half, CheckModule) != "findings: 2 of 3 instance(s) run other logic" {
		t.Fatalf("half rolled out: %q %+v", checkDetail(half, CheckModule), f)
	}
	for i, want := range []struct{ subject, message string }{
		{"http://c1:9464/metrics", "http://c1:9464/metrics runs enrich.wasm (sha256 bbbbbbbbbbbb, ABI 1), but stage.yaml names ./enrich.wasm (sha256 aaaaaaaaaaaa): the group's instances run different logic: a rollout that stopped half way"},
		{"http://c2:9464/metrics", "http://c2:9464/metrics runs a builtin, but stage.yaml names ./enrich.wasm (sha256 aaaaaaaaaaaa)"},
	} {
		if f[i].Subject != want.subject || !strings.Contains(f[i].Message, want.message) ||
			!strings.Contains(f[i].Command, "finish the rollout (deploy ./enrich.wasm to it and restart it), or roll the stage file back; flecht transform inspect dir/enrich.wasm") {
			t.Errorf("finding %d: %+v", i, f[i])
		}
	}

	// Every instance runs another module: the stage file was not rolled out.
	none := Diagnose(in, moduleObs(t, runsModule(shaB)))
	if f := findings(none, CheckModule); len(f) != 1 || !strings.Contains(f[0].Message, "no instance runs it: the stage file changed and was not rolled out") {
		t.Errorf("not rolled out: %+v", f)
	}

	// The pin is what flecht run starts: a file that is not the pinned
	// one is a finding of its own, and the instances run the pin.
	pinned := in
	pinned.Module = &status.ModuleFile{File: "./enrich.wasm", Path: "dir/enrich.wasm", SHA256: shaB, Pin: shaA}
	r := Diagnose(pinned, moduleObs(t, runsModule(shaA)))
	if f := findings(r, CheckModule); len(f) != 1 || f[0].Subject != "dir/enrich.wasm" || !strings.Contains(f[0].Message, "its sha256 is "+shaB+", but the stage file pins "+shaA+": flecht run refuses it") ||
		!strings.Contains(f[0].Command, "flecht transform inspect dir/enrich.wasm") {
		t.Errorf("pin: %+v", f)
	}

	// A file that cannot be read, without a pin: the instances must agree
	// with each other, the odd one out is the finding.
	unread := in
	unread.Module = &status.ModuleFile{File: "./enrich.wasm", Path: "dir/enrich.wasm", Error: "open dir/enrich.wasm: no such file or directory"}
	r = Diagnose(unread, moduleObs(t, runsModule(shaB), runsModule(shaA), runsModule(shaB)))
	if f := findings(r, CheckModule); len(f) != 1 || f[0].Subject != "http://c1:9464/metrics" ||
		!strings.Contains(f[0].Message, "runs enrich.wasm (sha256 aaaaaaaaaaaa, ABI 1), but 2 other instance(s) run enrich.wasm (sha256 bbbbbbbbbbbb, ABI 1)") ||
		!strings.Contains(f[0].Command, "flecht status -f stage.yaml --metrics-url http://c0:9464/metrics,http://c1:9464/metrics,http://c2:9464/metrics") {
		t.Errorf("unread: %+v", f)
	}
	if !strings.Contains(strings.Join(r.Notes, "\n"), "the module file ./enrich.wasm cannot be read (open dir/enrich.wasm: no such file or directory): the instances are compared with each other only") {
		t.Errorf("notes %q", r.Notes)
	}

	// An instance whose module_info makes no sense is a finding, not a
	// guess.
	r = Diagnose(in, moduleObs(t, runsModule("not-a-digest")))
	if f := findings(r, CheckModule); len(f) != 1 || !strings.Contains(f[0].Message, "exports a flechtwerk_module_info that cannot be read") ||
		!strings.Contains(f[0].Command, "curl -s http://c0:9464/metrics | grep flechtwerk_module_info") {
		t.Errorf("garbage: %+v", f)
	}
}

// A builtin's group: an instance that runs a module is a mixed group. The
// check is skipped without metrics, and for a stage that runs no module.
func TestDiagnoseModuleOfABuiltin(t *testing.T) {
	r := Diagnose(Inputs{Stage: stage(t, countYAML), Interval: 10 * time.Second}, moduleObs(t, healthyMetrics, runsModule(shaA)))
	f := findings(r, CheckModule)
	if len(f) != 1 || f[0].Subject != "http://c1:9464/metrics" ||
		!strings.Contains(f[0].Message, "runs the module enrich.wasm (sha256 aaaaaaaaaaaa, ABI 1), but stage.yaml names the builtin count: the group's instances run different logic") ||
		!strings.Contains(f[0].Command, "deploy the stage file to it and restart it") {
		t.Errorf("%+v", f)
	}
	if d := checkDetail(Diagnose(Inputs{Stage: stage(t, countYAML)}, moduleObs(t, healthyMetrics)), CheckModule); d != "ok: 1 instance(s) run the builtin count" {
		t.Errorf("a builtin: %q", d)
	}
	if d := checkDetail(Diagnose(Inputs{Stage: stage(t, enrichYAML)}, moduleObs(t)), CheckModule); d != "skipped: no --metrics-url: give each instance's metrics endpoint" {
		t.Errorf("no metrics: %q", d)
	}
	bridge := Diagnose(Inputs{Stage: stage(t, bridgeYAML), Interval: 10 * time.Second}, bridgeObs(t, bridgeMetrics(1, 0, 100, 10, 0.1), bridgeMetrics(1, 0, 110, 20, 0.2)))
	if d := checkDetail(bridge, CheckModule); d != "skipped: an MQTT bridge runs no module: only a transformer's transform: names one" {
		t.Errorf("bridge: %q", d)
	}
}

// A static member that stopped without leaving still looks like a member:
// while the other member commits, the partition it holds gains lag and no
// commit. The finding names it as stopped (its session lapsing) or stuck,
// with the command that removes it, not "the stage is stuck".
func TestDiagnoseLapsingStaticMember(t *testing.T) {
	st := stage(t, countYAML)
	members := map[string][]int32{"c0": {0}, "c1": {1}}
	first := sample(t0, "Stable", members, [2]int64{90, 50}, [2]int64{100, 60})
	second := sample(t0.Add(10*time.Second), "Stable", members, [2]int64{180, 50}, [2]int64{185, 75})
	for _, s := range []*status.Sample{first, second} {
		for i := range s.Group.Members {
			s.Group.Members[i].InstanceID, s.Group.Members[i].Host = s.Group.Members[i].ClientID, "10.0.0.1"
		}
	}
	r := Diagnose(Inputs{Stage: st}, Observations{First: first, Second: second, Topics: cleanTopics()})
	f := findings(r, CheckLag)
	if len(f) != 1 || f[0].Subject != "c1" || !strings.Contains(f[0].Message, "member c1 (host 10.0.0.1) held in [1] with lag and committed nothing") ||
		!strings.Contains(f[0].Message, "stopped without leaving the group") || !strings.Contains(f[0].Command, "flecht group leave app --instance c1 --execute") {
		t.Fatalf("findings %+v", f)
	}
}

// Run watches an idle member past flecht's default session: one whose
// session lapses is named as stopped without leaving, with when it left
// and which instance did not answer; one that stays is named as
// heartbeating with stuck tasks. Without an idle member nothing is
// watched.
func TestRunWatchesAnIdleMembersSession(t *testing.T) {
	st := stage(t, countYAML)
	both := map[string][]int32{"c0": {0}, "c1": {1}}
	withIDs := func(s *status.Sample) *status.Sample {
		for i := range s.Group.Members {
			m := &s.Group.Members[i]
			m.MemberID, m.InstanceID, m.Host = m.ClientID+"-id", m.ClientID, "10.0.0.1"
		}
		return s
	}
	run := func(leavesAfter int) (*Report, []string) {
		t.Helper()
		now := t0
		n := 0
		var calls []string
		src := Sources{
			Status: func(context.Context, status.Request) (*status.Sample, error) {
				n++
				calls = append(calls, "status")
				if n == 1 {
					return withIDs(sample(now, "Stable", both, [2]int64{90, 50}, [2]int64{100, 60})), nil
				}
				return withIDs(sample(now, "Stable", both, [2]int64{180, 50}, [2]int64{185, 75})), nil
			},
			// The watch after the samples: the idle member is gone from
			// the leavesAfter-th look on (never with 0).
			Group: func(context.Context, string) (*kafkax.Group, error) {
				n++
				calls = append(calls, "group")
				if leavesAfter == 0 || n < 2+leavesAfter {
					return &withIDs(sample(now, "Stable", both, [2]int64{}, [2]int64{})).Group, nil
				}
				return &withIDs(sample(now, "PreparingRebalance", map[string][]int32{"c0": {0}}, [2]int64{}, [2]int64{})).Group, nil
			},
			Now:    func() time.Time { return now },
			Topics: func(context.Context, lint.TopicsSpec) (*lint.TopicsReport, error) { return cleanTopics(), nil },
			Scrape: func(_ context.Context, u string) (*promscrape.Sample, error) {
				if u == "c1:9464" {
					return nil, errors.New("connection refused")
				}
				return scrape(t, now, healthyMetrics), nil
			},
			Sleep: func(_ context.Context, d time.Duration) error {
				now = now.Add(d)
				calls = append(calls, "sleep "+d.String())
				return nil
			},
		}
		r, err := Run(context.Background(), Inputs{Stage: st, MetricsURLs: []string{"c0:9464", "c1:9464"}, Interval: 10 * time.Second}, src)
		if err != nil {
			t.Fatal(err)
		}
		return r, calls
	}

	r, calls := run(3)
	f := findings(r, CheckLag)
	if len(f) != 1 || f[0].Subject != "c1" || !strings.Contains(f[0].Message, "left the group 3s later when its session lapsed: it had stopped without leaving") ||
		!strings.Contains(f[0].Message, "no answer from http://c1:9464/metrics") {
		t.Fatalf("a member whose session lapses: findings %+v", f)
	}
	if got := strings.Count(strings.Join(calls, "|"), "status"); got != 2 {
		t.Errorf("%d status samples, want 2: %v", got, calls)
	}
	if got := strings.Count(strings.Join(calls, "|"), "group"); got != 3 {
		t.Errorf("watched the group %d times, want 3 until it was gone: %v", got, calls)
	}

	r, calls = run(0)
	f = findings(r, CheckLag)
	if len(f) != 1 || !strings.Contains(f[0].Message, "was still a member 12s later: it heartbeats, so its process runs and its tasks are stuck") ||
		!strings.Contains(f[0].Command, "flecht group leave app --instance c1 --execute") {
		t.Fatalf("a member that stays: findings %+v", f)
	}
	if got := strings.Count(strings.Join(calls, "|"), "group"); got != int(SessionWatch/watchStep) {
		t.Errorf("watched the group %d times, want %d: %v", got, SessionWatch/watchStep, calls)
	}
}

// Right after a member stopped the group prepares a rebalance: the tasks
// are between owners, not abandoned. The doctor says a rebalance is in
// progress, not "nothing reads them", and finds nothing about it.
func TestDiagnoseRebalanceInProgressIsNoOrphan(t *testing.T) {
	st := stage(t, countYAML)
	stable := map[string][]int32{"c0": {0}, "c1": {1}}
	preparing := map[string][]int32{"c0": nil}
	r := Diagnose(Inputs{Stage: st}, Observations{
		First:  sample(t0, "Stable", stable, [2]int64{10, 10}, [2]int64{10, 10}),
		Second: sample(t0.Add(3*time.Second), "PreparingRebalance", preparing, [2]int64{10, 10}, [2]int64{10, 10}),
		Topics: cleanTopics(),
	})
	if f := findings(r, CheckMembers); len(f) != 0 {
		t.Fatalf("a rebalance in progress called a finding: %+v", f)
	}
	if notes := strings.Join(r.Notes, "\n"); !strings.Contains(notes, "group app is rebalancing (PreparingRebalance): task(s) [0 1] are being handed out again") ||
		strings.Contains(notes, "nothing reads them") {
		t.Fatalf("notes %q", r.Notes)
	}
	// Stable with a task on no member is an orphan still.
	r = Diagnose(Inputs{Stage: st}, Observations{
		First:  sample(t0, "Stable", preparing, [2]int64{10, 10}, [2]int64{10, 10}),
		Second: sample(t0.Add(3*time.Second), "Stable", preparing, [2]int64{10, 10}, [2]int64{10, 10}),
		Topics: cleanTopics(),
	})
	if f := findings(r, CheckMembers); len(f) != 1 || !strings.Contains(f[0].Message, "assigned to no member: nothing reads them") {
		t.Fatalf("an orphan in a stable group: %+v", f)
	}
}

// A lag that did not move while nothing consumed it (the group has no
// member) is no health: a finding, not "lag 1 (was 1)" ✓.
func TestDiagnoseStandingLagWithoutMembers(t *testing.T) {
	st := stage(t, countYAML)
	for name, obs := range map[string]Observations{
		"two samples": {First: sample(t0, "Empty", nil, [2]int64{9, 10}, [2]int64{10, 10}),
			Second: sample(t0.Add(10*time.Second), "Empty", nil, [2]int64{9, 10}, [2]int64{10, 10}), Topics: cleanTopics()},
		"sampled once": {First: sample(t0, "Empty", nil, [2]int64{9, 10}, [2]int64{10, 10}),
			Second: sample(t0, "Empty", nil, [2]int64{9, 10}, [2]int64{10, 10}), Topics: cleanTopics(), OneSample: true},
	} {
		r := Diagnose(Inputs{Stage: st}, obs)
		if s := statuses(r)[CheckLag]; s != StatusFindings {
			t.Errorf("%s: lag %s: %+v", name, s, r.Checks)
		}
		if f := findings(r, CheckLag); len(f) != 1 || !strings.Contains(f[0].Message, "lag 1 and group app has no member: nothing consumes the input") {
			t.Errorf("%s: %+v", name, f)
		}
	}
}

// An instance that wrote or read no record since it started (a restarted
// extractor whose feeds had nothing new) has no largest record to report:
// the check says so instead of "largest record 0 B".
func TestDiagnoseRecordSizeWithNothingWritten(t *testing.T) {
	st := stage(t, countYAML)
	m := map[string][]int32{"c0": {0, 1}}
	none := "# TYPE flechtwerk_state_record_max_bytes gauge\nflechtwerk_state_record_max_bytes 0\n"
	r := Diagnose(Inputs{Stage: st}, Observations{
		First: sample(t0, "Stable", m, [2]int64{10, 10}, [2]int64{10, 10}), Second: sample(t0.Add(10*time.Second), "Stable", m, [2]int64{10, 10}, [2]int64{10, 10}),
		Topics:  cleanTopics(),
		Scrapes: []Scrape{{URL: "http://c0:9464/metrics", First: scrape(t, t0, none), Second: scrape(t, t0.Add(10*time.Second), none)}},
	})
	for _, c := range r.Checks {
		if c.Name == CheckRecordSize && (c.Status != StatusOK || c.Detail != "no record written or read since the instance(s) started: the *_max_bytes gauges count from a start") {
			t.Fatalf("record_size %+v", c)
		}
	}
}

// A dead-letter finding can be acknowledged: with --dlq-since, dead
// letters that the instances counted since they started but that all
// came before that time are a note, not a finding (it stayed ✗, exit 4,
// until the instances restarted); one written since keeps the finding.
func TestDiagnoseDeadLettersAcknowledged(t *testing.T) {
	st := stage(t, countYAML)
	m := map[string][]int32{"c0": {0, 1}}
	text := "# TYPE flechtwerk_messages_invalid_total counter\nflechtwerk_messages_invalid_total{outcome=\"dead_lettered\",topic=\"in\"} 3\n"
	since := t0.Add(-time.Hour)
	diagnose := func(in Inputs, counted map[string]int) *Report {
		return Diagnose(in, Observations{
			First: sample(t0, "Stable", m, [2]int64{1, 1}, [2]int64{1, 1}), Second: sample(t0.Add(10*time.Second), "Stable", m, [2]int64{1, 1}, [2]int64{1, 1}),
			Topics:       cleanTopics(),
			Scrapes:      []Scrape{{URL: "u", First: scrape(t, t0, text), Second: scrape(t, t0, text)}},
			DeadLettered: counted,
		})
	}
	if r := diagnose(Inputs{Stage: st}, nil); len(findings(r, CheckInvalid)) != 1 {
		t.Fatalf("without --dlq-since: %+v", r.Findings)
	}
	r := diagnose(Inputs{Stage: st, DLQSince: since}, map[string]int{"in.dlq": 0})
	if f := findings(r, CheckInvalid); len(f) != 0 || statuses(r)[CheckInvalid] != StatusOK {
		t.Fatalf("acknowledged: %+v", r.Findings)
	}
	if notes := strings.Join(r.Notes, "\n"); !strings.Contains(notes, "u sent 3 invalid record(s) of in to in.dlq since it started, none since "+since.UTC().Format(time.RFC3339)+": acknowledged (--dlq-since)") {
		t.Fatalf("notes %q", r.Notes)
	}
	r = diagnose(Inputs{Stage: st, DLQSince: since}, map[string]int{"in.dlq": 2})
	if f := findings(r, CheckInvalid); len(f) != 1 || !strings.Contains(strings.Join(r.Notes, "\n"), "in.dlq holds 2 record(s) written since") {
		t.Fatalf("newer dead letters: %+v %q", r.Findings, r.Notes)
	}
}

// Run counts each dead-letter topic since --dlq-since, and only then.
func TestRunCountsDeadLettersSince(t *testing.T) {
	st := stage(t, countYAML)
	m := map[string][]int32{"c0": {0, 1}}
	var asked []string
	src := Sources{
		Status: func(context.Context, status.Request) (*status.Sample, error) {
			return sample(t0, "Stable", m, [2]int64{1, 1}, [2]int64{1, 1}), nil
		},
		Topics: func(context.Context, lint.TopicsSpec) (*lint.TopicsReport, error) { return cleanTopics(), nil },
		Scrape: func(context.Context, string) (*promscrape.Sample, error) { return scrape(t, t0, healthyMetrics), nil },
		Sleep:  func(context.Context, time.Duration) error { return nil },
		DeadLettered: func(_ context.Context, topic string, since time.Time) (int, error) {
			asked = append(asked, topic+"@"+since.UTC().Format(time.RFC3339))
			return 0, nil
		},
	}
	if _, err := Run(context.Background(), Inputs{Stage: st, Interval: time.Second}, src); err != nil || len(asked) != 0 {
		t.Fatalf("without --dlq-since: asked %v (%v)", asked, err)
	}
	in, err := NewInputs(Flags{StageFile: writeStage(t, countYAML), Interval: "1s", QueueLimit: 1, MinBudget: "5m", DLQSince: "30m",
		Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Run(context.Background(), in, src); err != nil || strings.Join(asked, ",") != "in.dlq@"+t0.Add(-30*time.Minute).UTC().Format(time.RFC3339) {
		t.Fatalf("asked %v (%v)", asked, err)
	}
	for _, bad := range []string{"soon", "-5m", "0s"} {
		if _, err := NewInputs(Flags{StageFile: writeStage(t, countYAML), Interval: "1s", QueueLimit: 1, MinBudget: "5m", DLQSince: bad}); exitcode.Code(err) != exitcode.Usage {
			t.Errorf("--dlq-since %s: %v", bad, err)
		}
	}
}

// A transformer asking for one standby replica: every task must have one
// caught up on another instance; a task without, or with one too far
// behind, is a finding naming it; an instance not scraped makes the check
// unknown (skipped), never ok.
func TestDiagnoseStandbys(t *testing.T) {
	st := stage(t, countYAML+"standby_replicas: 1\n")
	members := map[string][]int32{"c0": {0}, "c1": {1}}
	lag := func(p, behind int) string {
		return fmt.Sprintf("# TYPE flechtwerk_standby_lag_records gauge\nflechtwerk_standby_lag_records{partition=\"%d\"} %d\n", p, behind)
	}
	diagnose := func(c0, c1 string, c1Err error) *Report {
		s := func(text string) *promscrape.Sample { return scrape(t, t0, healthyMetrics+text) }
		obs := Observations{
			First:  sample(t0, "Stable", members, [2]int64{90, 50}, [2]int64{100, 60}),
			Second: sample(t0.Add(10*time.Second), "Stable", members, [2]int64{180, 100}, [2]int64{185, 100}),
			Topics: cleanTopics(),
			Scrapes: []Scrape{
				{URL: "http://c0:9464/metrics", First: s(c0), Second: s(c0)},
				{URL: "http://c1:9464/metrics", First: s(c1), Second: s(c1), Err: c1Err},
			},
		}
		if c1Err != nil {
			obs.Scrapes[1].First, obs.Scrapes[1].Second = nil, nil
		}
		return Diagnose(Inputs{Stage: st, Interval: 10 * time.Second, Kids: []string{"k1"}}, obs)
	}
	if r := diagnose(lag(1, 0), lag(0, 120), nil); statuses(r)[CheckStandbys] != StatusOK {
		t.Errorf("each task with a caught-up standby: %s (%s)", statuses(r)[CheckStandbys], checkDetail(r, CheckStandbys))
	}
	r := diagnose(lag(1, 0), lag(0, 250_000), nil)
	f := findings(r, CheckStandbys)
	if len(f) != 1 || !strings.Contains(f[0].Message, "1 task of 2 lack caught-up standbys (at most 10,000 changelog offsets behind at their latest poll; standby_replicas: 1): task 0 has 0.") ||
		!strings.Contains(f[0].Command, "flecht status app -f stage.yaml --metrics-url http://c0:9464/metrics,http://c1:9464/metrics") {
		t.Errorf("a standby 250,000 behind: %+v", f)
	}
	if f := findings(diagnose(lag(1, 0), "", nil), CheckStandbys); len(f) != 1 || !strings.Contains(f[0].Message, "task 0 has 0") {
		t.Errorf("a task without a standby: %+v", f)
	}
	r = diagnose(lag(1, 0), "", fmt.Errorf("connection refused"))
	if statuses(r)[CheckStandbys] != StatusSkipped || !strings.Contains(checkDetail(r, CheckStandbys), "1 of 2 instance(s) could not be scraped") {
		t.Errorf("an instance not scraped: %s (%s)", statuses(r)[CheckStandbys], checkDetail(r, CheckStandbys))
	}
}
