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
)

// flecht doctor on a real Kafka against a running count stage: clean (exit
// 0, every Kafka and metrics check ok), then, with the raw topic's
// retention cut to a day behind the stage's back, one finding (exit 4)
// naming the topic and the kafka-configs command that restores it.
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
	for _, c := range rep.Checks {
		if c.Status == doctor.StatusFindings {
			t.Errorf("check %s: %s", c.Name, c.Detail)
		}
	}

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
		f.Command != "kafka-configs.sh --bootstrap-server "+brokers+" --alter --entity-type topics --entity-name "+in+" --add-config retention.ms=-1" {
		t.Fatalf("finding %+v", f)
	}
	p.stop()
}
