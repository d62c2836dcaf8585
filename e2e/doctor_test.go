//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/doctor"
	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/status"
)

// flecht doctor on a real Kafka against a running count stage: clean (exit
// 0, every Kafka and metrics check ok), then, with the raw topic's
// retention cut to a day behind the stage's back, one finding (exit 4)
// naming the topic and the flecht topic config command that restores it,
// which, run as printed, makes doctor clean again.
func TestDoctorOnRealKafka(t *testing.T) {
	in, out := topicName(t, "raw"), topicName(t, "counted")
	createTopic(t, in, 3, map[string]string{"retention.ms": "-1"})
	createTopic(t, out, 3, nil)
	app := "doctor-" + strings.TrimPrefix(in, "e2e-testdoctoronrealkafka-raw-")
	stage := countStage(t, app, in, out, "skip", 500)
	p := startRun(t, stage, "doctor-0", t.TempDir())
	metrics := p.metricsURL()

	cl := client(t)
	var recs []*kgo.Record
	for i := range 300 {
		recs = append(recs, &kgo.Record{Topic: in, Key: []byte(fmt.Sprintf("k%d", i%7)), Value: []byte(fmt.Sprintf(`{"n":%d}`, i))})
	}
	if err := cl.ProduceSync(testCtx(t, 30*time.Second), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	adm := admin(t)
	waitUntil(t, 2*time.Minute, "every record committed", func() bool {
		p.alive()
		offs, err := adm.FetchOffsets(testCtx(t, 10*time.Second), app)
		if err != nil {
			return false
		}
		var n int64
		offs.Each(func(o kadm.OffsetResponse) { n += o.At })
		return n >= 300
	})

	doc := func() (doctor.Report, int, string) {
		t.Helper()
		stdout, stderr, code := runFlecht(t, "", "doctor", app, "-b", brokers, "-f", stage, "--metrics-url", metrics, "--interval", "2s", "-o", "json")
		var rep doctor.Report
		if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
			t.Fatalf("doctor: exit %d %v\n%s%s", code, err, stdout, stderr)
		}
		return rep, code, stdout
	}
	rep, code, stdout := doc()
	if code != 0 || len(rep.Findings) != 0 {
		t.Fatalf("a healthy stage: exit %d\n%s", code, stdout)
	}
	checkClean(t, rep)

	day := "86400000"
	res, err := adm.AlterTopicConfigs(testCtx(t, 30*time.Second), []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: &day}}, in)
	if err == nil {
		_, err = res.On(in, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	rep, code, stdout = doc()
	if code != 4 || len(rep.Findings) != 1 {
		t.Fatalf("after the retention change: exit %d, want 4 with one finding\n%s", code, stdout)
	}
	f := rep.Findings[0]
	if f.Check != doctor.CheckTopics || f.Subject != in || !strings.Contains(f.Message, "retention.ms=86400000") ||
		f.Command != "flecht topic config "+in+" --set retention.ms=-1 --execute" {
		t.Fatalf("finding %+v", f)
	}
	// The fix works as printed: run it, and doctor is clean again.
	if _, errOut, code := runFlecht(t, "", strings.Fields(f.Command)[1:]...); code != 0 {
		t.Fatalf("%s: exit %d %s", f.Command, code, errOut)
	}
	if rep, code, stdout = doc(); code != 0 {
		t.Fatalf("after %s: exit %d\n%s", f.Command, code, stdout)
	}
	p.stop()
}

func checkClean(t *testing.T, rep doctor.Report) {
	t.Helper()
	for _, c := range rep.Checks {
		if c.Status == doctor.StatusFindings {
			t.Errorf("check %s: %s", c.Name, c.Detail)
		}
	}
}

// A count stage idle on an input written transactionally, as an
// extractor or the bridge writes its raw topic: it commits the offset
// after its last record, so each partition keeps a lag of the markers
// after it (and of an aborted transaction's records) on the real broker.
// status counts what a read_committed reader would read there (nothing:
// lag 0), and the doctor calls the stage clean (it called it stuck
// before).
func TestDoctorOnAnIdleStageOfTransactionalInput(t *testing.T) {
	in, out := topicName(t, "raw"), topicName(t, "counted")
	createTopic(t, in, 3, map[string]string{"retention.ms": "-1"})
	createTopic(t, out, 3, nil)
	app := "doctor-txn-" + strings.TrimPrefix(in, "e2e-testdoctoronanidlestageoftransactionalinput-raw-")
	stage := countStage(t, app, in, out, "crash", 500)
	p := startRun(t, stage, "doctor-txn-0", t.TempDir())

	w := client(t, kgo.TransactionalID(app+"-upstream"), kgo.DefaultProduceTopic(in))
	ctx := testCtx(t, time.Minute)
	for i, end := range []kgo.TransactionEndTry{kgo.TryCommit, kgo.TryCommit, kgo.TryAbort, kgo.TryCommit} {
		if err := w.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for k := range 9 {
			if err := w.ProduceSync(ctx, &kgo.Record{Key: []byte(fmt.Sprintf("k%d", k)), Value: []byte(fmt.Sprintf(`{"n":%d}`, i))}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.EndTransaction(ctx, end); err != nil {
			t.Fatal(err)
		}
	}
	// The outputs and the offsets commit in one transaction: once the 27
	// committed records are counted, the offsets after them are committed,
	// and the markers (and the 9 aborted records) are the lag left.
	waitUntil(t, 2*time.Minute, "every committed record counted", func() bool {
		p.alive()
		recs, err := kafkax.ReadToEnd(testCtx(t, time.Minute), client(t), out)
		return err == nil && len(recs) == 27
	})
	lag, err := admin(t).Lag(testCtx(t, 30*time.Second), app)
	if err != nil || lag[app].Lag.Total() < 3 {
		t.Fatalf("the lag of markers: %v %v", lag[app].Lag.Total(), err)
	}
	stdout, stderr, code := runFlecht(t, "", "doctor", app, "-b", brokers, "-f", stage, "--metrics-url", p.metricsURL(), "--interval", "2s", "-o", "json")
	var rep doctor.Report
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("doctor: exit %d %v\n%s%s", code, err, stdout, stderr)
	}
	if code != 0 || len(rep.Findings) != 0 {
		t.Fatalf("an idle stage: exit %d\n%s", code, stdout)
	}
	checkClean(t, rep)
	for _, c := range rep.Checks {
		if c.Name == doctor.CheckLag && !strings.HasPrefix(c.Detail, "lag 0 (was 0)") {
			t.Errorf("the doctor's lag check: %s; want lag 0, the markers not counted", c.Detail)
		}
	}
	stdout, stderr, code = runFlecht(t, "", "status", app, "-b", brokers, "-f", stage, "-o", "json")
	var st status.Report
	if err := json.Unmarshal([]byte(stdout), &st); err != nil || code != 0 {
		t.Fatalf("status: exit %d %v\n%s%s", code, err, stdout, stderr)
	}
	if st.Lag != 0 || !st.LagCounted {
		t.Errorf("status: lag %d (counted %v), want 0 counted where the offsets say %d", st.Lag, st.LagCounted, lag[app].Lag.Total())
	}
	p.stop()
}

// The runbook of a scale-down gone wrong on the real broker: two static
// members share the input, one is stopped with SIGTERM and no
// --leave-group, and input keeps coming. It stays listed as a member,
// owning its partitions, until its session (6 s here) lapses. The doctor,
// run at once, names it: committing nothing while the other does, its
// metrics endpoint not answering, and (watching the group past the
// session) dropped when its session lapsed — stopped without leaving,
// not "the stage is stuck".
func TestDoctorNamesAStoppedStaticMember(t *testing.T) {
	const partitions = 4
	app, in, out := runnerTopics(t, partitions)
	stage := countStage(t, app, in, out, "crash", 500)
	stream := streamInputs(t, inputProducer(t), in, partitions, 100, 40, 100*time.Millisecond)
	a := startRun(t, stage, "stopped-a", t.TempDir())
	b := startRun(t, stage, "stopped-b", t.TempDir())
	tasks := func(p *proc) float64 {
		v, err := p.tryMetric("flechtwerk_tasks_assigned")
		if err != nil {
			return -1
		}
		return v
	}
	waitUntil(t, 2*time.Minute, "the tasks split between A and B, both committing", func() bool {
		a.alive()
		b.alive()
		ca, errA := a.tryMetric("flechtwerk_transactions_committed_total")
		cb, errB := b.tryMetric("flechtwerk_transactions_committed_total")
		return tasks(a) > 0 && tasks(b) > 0 && tasks(a)+tasks(b) == partitions && errA == nil && errB == nil && ca > 0 && cb > 0
	})
	aURL, bURL := a.metricsURL(), b.metricsURL()
	b.stop()
	if !hasInstance(groupMembers(t, app), "stopped-b") {
		t.Fatal("B left the group on SIGTERM without --leave-group")
	}
	stdout, stderr, code := runFlecht(t, "", "doctor", app, "-b", brokers, "-f", stage, "--metrics-url", aURL+","+bURL, "--interval", "2s", "-o", "json")
	var rep doctor.Report
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("doctor: exit %d %v\n%s%s", code, err, stdout, stderr)
	}
	var found *doctor.Finding
	for i, f := range rep.Findings {
		if f.Check == doctor.CheckLag && f.Subject == "stopped-b" {
			found = &rep.Findings[i]
		}
	}
	if code != 4 || found == nil || !strings.Contains(found.Message, "when its session lapsed: it had stopped without leaving") ||
		!strings.Contains(found.Message, "no answer from "+bURL) {
		t.Fatalf("doctor on a stopped static member: exit %d, findings %+v", code, rep.Findings)
	}
	t.Logf("the doctor's finding: %s", found.Message)
	stream.end(t)
	a.stop()
}
