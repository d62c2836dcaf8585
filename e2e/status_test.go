//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/status"
)

func rpStatus(t *testing.T, args ...string) status.Report {
	t.Helper()
	out, errOut, code := runFlecht(t, "", append(append([]string{"status"}, args...), "-o", "json")...)
	if code != 0 {
		t.Fatalf("status %v: exit %d\n%s", args, code, errOut)
	}
	var r status.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return r
}

// flecht status through a stage's life on the real broker: running (group,
// members and their partitions, lag 0, the changelog's size), stopped with
// a zombie's transaction open on one of its IDs (listed as pending), and
// as the progress view of a replay (the lag falls from everything to 0
// while the throughput shows the rebuild).
func TestStatusThroughAReplay(t *testing.T) {
	const records = 6000
	app := topicName(t, "app")
	raw, out := topicName(t, "raw"), topicName(t, "out")
	rpCreate(t, raw, 3, map[string]string{"retention.ms": "-1"})
	rpCreate(t, out, 3, nil)
	rpProduce(t, raw, records, 60)
	stage := rpStage(t, app, raw, out)
	adm := kadm.NewClient(rpClient(t))

	run := rpRunStage(t, stage, "count-s1", t.TempDir())
	rpWaitCaughtUp(t, adm, app, raw, 2*time.Minute)
	rpWaitMembers(t, adm, app, 1, 30*time.Second)
	r := rpStatus(t, "-f", stage, "--interval", "1s")
	if r.GroupState != "Stable" || r.Protocol != "classic" || len(r.Members) != 1 || r.Members[0].ClientID != "count-s1" {
		t.Fatalf("group %s/%s members %+v", r.GroupState, r.Protocol, r.Members)
	}
	if h := r.Members[0].Host; h == "" || strings.HasPrefix(h, "/") {
		t.Errorf("member host %q: Kafka's leading / belongs to Java's address printing, not to the host", h)
	}
	if a := r.Members[0].Assigned; len(a) != 1 || a[0].Topic != raw || len(a[0].Partitions) != 3 {
		t.Errorf("assignment %+v", a)
	}
	if r.Lag != 0 || len(r.Inputs) != 3 || r.Inputs[0].Member != "count-s1" || r.Inputs[0].Committed == nil {
		t.Errorf("inputs %+v lag %d", r.Inputs, r.Lag)
	}
	if c := r.Changelog; !c.Exists || c.Partitions != 3 || c.Records < 60 || c.Bytes == nil || *c.Bytes <= 0 {
		t.Errorf("changelog %+v", c)
	}
	if r.Throughput == nil || r.Throughput.IntervalSeconds < 0.9 {
		t.Errorf("throughput %+v", r.Throughput)
	}
	if !r.Transactions.Supported {
		t.Errorf("Kafka 4 lists transactions: %+v", r.Transactions)
	}
	run.stop()
	// A stopped transformer's static member stays until its session
	// (10 s) times out.
	rpWaitMembers(t, adm, app, 0, 30*time.Second)

	// A zombie holds a transaction open on APP-1.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	zombie := rpClient(t, kgo.TransactionalID(app+"-1"), kgo.DefaultProduceTopic(out))
	if err := zombie.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := zombie.ProduceSync(ctx, &kgo.Record{Key: []byte("z"), Value: []byte(`{"i":-1}`)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	r = rpStatus(t, app, "--input-topics", raw, "--interval", "0")
	if r.GroupState != "Empty" || len(r.Members) != 0 || len(r.Transactions.Pending) != 1 {
		t.Fatalf("stopped stage: %s %+v", r.GroupState, r.Transactions)
	}
	if p := r.Transactions.Pending[0]; p.TransactionalID != app+"-1" || p.State != "Ongoing" || len(p.Partitions) != 1 || !strings.HasPrefix(p.Partitions[0], out+"/") {
		t.Errorf("pending %+v", p)
	}
	human, _, _ := runFlecht(t, "", "status", app, "--input-topics", raw, "--interval", "0")
	if !strings.Contains(human, app+"-1") || !strings.Contains(human, "Ongoing") {
		t.Errorf("human output lacks the open transaction:\n%s", human)
	}

	// The replay fences it; status is then the progress view.
	if plan, errOut, code := rpReplay(t, "-f", stage, "--keep-outputs", "--execute"); code != 0 || !plan.Executed {
		t.Fatalf("replay: exit %d %s", code, errOut)
	}
	r = rpStatus(t, "-f", stage, "--interval", "0")
	if r.Lag != records || len(r.Transactions.Pending) != 0 || r.Changelog.Exists {
		t.Fatalf("after the replay: lag %d pending %+v changelog %+v", r.Lag, r.Transactions.Pending, r.Changelog)
	}
	// One --watch process samples without gaps from before the restart
	// to lag 0, so the committed offsets' climb from 0 to the end falls
	// in its intervals: some refresh must show a consumption rate.
	watch := rpStart(t, "status", "-f", stage, "--watch", "--interval", "500ms", "-o", "json")
	sawRate := false
	frames := 0
	// next reads the refreshes printed since the last call, one compact
	// JSON report per complete line, into r.
	next := func() {
		lines := strings.Split(watch.out.String(), "\n")
		for _, line := range lines[frames : len(lines)-1] {
			frames++
			var fr status.Report
			if err := json.Unmarshal([]byte(line), &fr); err != nil {
				t.Fatalf("refresh %d is not one JSON report per line: %v\n%s", frames, err, line)
			}
			r = fr
			if r.Throughput != nil && r.Throughput.ConsumedPerSecond > 0 {
				sawRate = true
			}
		}
	}
	deadline := time.Now().Add(3 * time.Minute)
	for frames == 0 { // the first sample comes before the stage starts
		if time.Now().After(deadline) || watch.exited() {
			t.Fatalf("no refresh from status --watch:\n%s", watch.errs.String())
		}
		time.Sleep(50 * time.Millisecond)
		next()
	}
	if r.Lag != records {
		t.Fatalf("first refresh: lag %d, want %d", r.Lag, records)
	}
	run = rpRunStage(t, stage, "count-s2", t.TempDir())
	for r.Lag != 0 || r.GroupState != "Stable" {
		if time.Now().After(deadline) {
			t.Fatalf("lag still %d after %d refreshes", r.Lag, frames)
		}
		time.Sleep(100 * time.Millisecond)
		next()
	}
	watch.stop()
	run.stop()
	if !r.Changelog.Exists {
		t.Error("the rebuild did not recreate the changelog")
	}
	if !sawRate {
		t.Errorf("no refresh of %d showed the rebuild consuming", frames)
	}
}
