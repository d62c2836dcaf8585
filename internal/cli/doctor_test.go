package cli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/devenv"
	"github.com/flecht-dev/flecht/internal/devenv/devenvtest"
	"github.com/flecht-dev/flecht/internal/doctor"
	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/health"
	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/logx/logxtest"
	"github.com/flecht-dev/flecht/internal/module/moduletest"
	"github.com/flecht-dev/flecht/internal/status"
	"github.com/flecht-dev/flecht/internal/ui"
)

// What the doctor refuses before it connects, and a cluster it cannot
// reach (exit 1: it could not check).
func TestDoctorUsage(t *testing.T) {
	dir := t.TempDir()
	st := writeAt(t, dir, "count.yaml", fmt.Sprintf(countStageFmt, "refine"))
	pw := writeAt(t, dir, "pw", "a-keyring-password\n")
	protected := filepath.Join(dir, "protected.json")
	mustRun(t, nil, "", "keys", "init", "--keyring", protected, "--kid", "k1", "--protect", "--password-file", pw)
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"doctor", "refine"}, exitcode.Usage, "-f stage.yaml"},
		{[]string{"doctor", "other", "-f", st}, exitcode.Usage, `differs from`},
		{[]string{"doctor", "-f", st, "--interval", "0"}, exitcode.Usage, "--interval"},
		{[]string{"doctor", "-f", st, "--queue-limit", "0"}, exitcode.Usage, "--queue-limit"},
		{[]string{"doctor", "-f", st, "--keyring", filepath.Join(dir, "none.json")}, exitcode.Usage, "--keyring"},
		{[]string{"doctor", "-b", "127.0.0.1:1", "-f", st, "--interval", "1s"}, exitcode.Failure, "127.0.0.1:1"},
		// A protected keyring opens with its password, and without one
		// the refusal says what to give.
		{[]string{"doctor", "-b", "127.0.0.1:1", "-f", st, "--interval", "1s", "--keyring", protected}, exitcode.Usage, "give --password-file FILE"},
		{[]string{"doctor", "-b", "127.0.0.1:1", "-f", st, "--interval", "1s", "--keyring", protected, "--password-file", pw}, exitcode.Failure, "127.0.0.1:1"},
	} {
		r := run(t, nil, "", tc.args...)
		if r.code != tc.code || !strings.Contains(r.err, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d naming %q", tc.args, r.code, r.err, tc.code, tc.want)
		}
	}
	// A bridge loads no keyring, so FLECHT_KEYRING naming a protected one
	// (as an operator of rotations has it set) asks for no password: the
	// doctor goes on to Kafka.
	bridge := writeAt(t, dir, "bridge.yaml", fmt.Sprintf(mqttStageFmt, "relay"))
	r := run(t, map[string]string{EnvKeyring: protected}, "", "doctor", "-b", "127.0.0.1:1", "-f", bridge, "--interval", "1s")
	if r.code != exitcode.Failure || !strings.Contains(r.err, "127.0.0.1:1") {
		t.Errorf("a bridge with FLECHT_KEYRING protected: exit %d, stderr %q", r.code, r.err)
	}
}

// The doctor against a real stage on the embedded Kafka: clean while the
// stage runs well (exit 0); a poison record under skip is a finding (exit
// 4, JSON naming the check and the command); the stage stopped leaves a
// group without members and an instance that cannot be scraped.
func TestDoctorOnARunningStage(t *testing.T) {
	env := devenvtest.Start(t)
	cl := devenvtest.KafkaClient(t, env)
	adm := kadm.NewClient(cl)
	ctx := context.Background()
	if err := kafkax.CreateTopic(ctx, adm, "items.raw", 2, map[string]string{"retention.ms": "-1"}); err != nil {
		t.Fatal(err)
	}
	if err := kafkax.CreateTopic(ctx, adm, "items.counted", 2, nil); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	stagePath := writeAt(t, dir, "count.yaml", fmt.Sprintf(countStageFmt, "refine")+"invalid_messages: skip\nmetrics: {listen: \"127.0.0.1:0\"}\n")
	var recs []*kgo.Record
	for i := range 20 {
		recs = append(recs, &kgo.Record{Topic: "items.raw", Key: []byte(fmt.Sprintf("k%d", i%3)), Value: []byte(`{}`)})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	st := startInProcess(t, env, stagePath, dir)
	logs, base, waitFor := st.logs, st.base, st.waitFor
	waitFor("ready, and every record counted", func() bool {
		rep, err := get(base + health.ReadinessPath)
		if err != nil || !strings.Contains(rep, `"status":"ready"`) {
			return false
		}
		out, _ := kafkax.ReadToEnd(ctx, cl, "items.counted")
		return len(out) == 20
	})

	doc := func() (doctor.Report, result) {
		t.Helper()
		r := run(t, nil, "", "doctor", "refine", "-b", env.KafkaAddr(), "-f", stagePath, "--metrics-url", base, "--interval", "1s", "-o", "json")
		var rep doctor.Report
		if err := json.Unmarshal([]byte(r.out), &rep); err != nil {
			t.Fatalf("doctor: exit %d %v\n%s%s", r.code, err, r.out, r.err)
		}
		return rep, r
	}
	rep, r := doc()
	if r.code != 0 || len(rep.Findings) != 0 {
		t.Fatalf("a healthy stage: exit %d, findings %+v, checks %+v", r.code, rep.Findings, rep.Checks)
	}
	for _, c := range rep.Checks {
		want := doctor.StatusOK
		if c.Name == doctor.CheckMQTT || c.Name == doctor.CheckBudget || c.Name == doctor.CheckKeyring || c.Name == doctor.CheckStandbys {
			want = doctor.StatusSkipped
		}
		if c.Status != want {
			t.Errorf("check %s: %s (%s), want %s", c.Name, c.Status, c.Detail, want)
		}
	}

	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "items.raw", Key: []byte("bad"), Value: []byte("\xff not json")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	waitFor("the poison record skipped", func() bool { return strings.Contains(logs.String(), "invalid message skipped") })
	rep, r = doc()
	if r.code != exitcode.Findings || len(rep.Findings) != 1 || rep.Findings[0].Check != doctor.CheckInvalid ||
		!strings.Contains(rep.Findings[0].Message, "skipped 1 invalid record(s) of items.raw") || rep.Findings[0].Command == "" {
		t.Fatalf("after a poison record: exit %d, findings %+v", r.code, rep.Findings)
	}
	// Without --metrics-url the doctor scrapes where the stage file's
	// metrics.listen says the instance serves (here a copy naming the
	// port the stage bound), and finds the same; a listener that does not
	// answer from here skips the metric checks instead of failing them.
	listening := writeAt(t, t.TempDir(), "count.yaml", fmt.Sprintf(countStageFmt, "refine")+"invalid_messages: skip\nmetrics: {listen: \""+strings.TrimPrefix(base, "http://")+"\"}\n")
	r = run(t, nil, "", "doctor", "-b", env.KafkaAddr(), "-f", listening, "--interval", "1s", "-o", "json")
	var fromStage doctor.Report
	if err := json.Unmarshal([]byte(r.out), &fromStage); err != nil || r.code != exitcode.Findings || len(fromStage.Findings) != 1 || fromStage.Findings[0].Check != doctor.CheckInvalid {
		t.Fatalf("doctor with the stage file's metrics.listen: exit %d %v, findings %+v", r.code, err, fromStage.Findings)
	}
	deaf := writeAt(t, t.TempDir(), "count.yaml", fmt.Sprintf(countStageFmt, "refine")+"invalid_messages: skip\nmetrics: {listen: \"0.0.0.0:1\"}\n")
	r = run(t, nil, "", "doctor", "-b", env.KafkaAddr(), "-f", deaf, "--interval", "1s", "-o", "json")
	var unreachable doctor.Report
	if err := json.Unmarshal([]byte(r.out), &unreachable); err != nil || r.code != 0 {
		t.Fatalf("doctor with an unreachable metrics.listen: exit %d %v\n%s", r.code, err, r.out)
	}
	for _, c := range unreachable.Checks {
		if c.Name == doctor.CheckMetrics && (c.Status != doctor.StatusSkipped || !strings.Contains(c.Detail, "metrics.listen (http://127.0.0.1:1/metrics) does not answer from here")) {
			t.Errorf("unreachable listener: %+v", c)
		}
	}

	// The table says the same, with the command under the finding.
	table := run(t, nil, "", "doctor", "-b", env.KafkaAddr(), "-f", stagePath, "--metrics-url", base, "--interval", "1s")
	for _, want := range []string{"invalid_messages", "skipped 1 invalid record(s)", "→ the stage's log names each", "1 problem found"} {
		if !strings.Contains(table.out, want) {
			t.Errorf("table lacks %q:\n%s", want, table.out)
		}
	}

	if code := st.stop(); code != 0 {
		t.Fatalf("the stage exited %d", code)
	}
	if !strings.Contains(st.logs.String(), `msg="stopped cleanly" stages=refine`) {
		t.Errorf("a clean stop left no last line saying so:\n%s", st.logs.String())
	}
	waitFor("the group empty", func() bool {
		g, err := kafkax.DescribeGroup(ctx, adm, "refine")
		return err == nil && len(g.Members) == 0
	})
	rep, r = doc()
	var checks []string
	for _, fd := range rep.Findings {
		checks = append(checks, fd.Check)
	}
	if r.code != exitcode.Findings || !strings.Contains(strings.Join(checks, ","), doctor.CheckMembers) || !strings.Contains(strings.Join(checks, ","), doctor.CheckMetrics) {
		t.Fatalf("stopped: exit %d, findings %+v", r.code, rep.Findings)
	}
}

// inProcess is one stage run by `flecht run` in this process on the
// embedded brokers, serving its metrics at base.
type inProcess struct {
	t      *testing.T
	logs   *logxtest.Buffer
	base   string
	cancel context.CancelFunc
	done   chan int
	code   *int
}

// startInProcess runs the stage file at stagePath as client c0 until the
// test ends (or stop), and waits for its metrics address.
func startInProcess(t *testing.T, env *devenv.Env, stagePath, dir string) *inProcess {
	t.Helper()
	p := &inProcess{t: t, logs: &logxtest.Buffer{}, done: make(chan int, 1)}
	var runCtx context.Context
	runCtx, p.cancel = context.WithCancel(context.Background())
	f := &Factory{IO: &ui.IOStreams{In: strings.NewReader(""), Out: io.Discard, ErrOut: p.logs}, Getenv: func(k string) string { return map[string]string{"HOME": dir}[k] }}
	go func() {
		p.done <- Main(runCtx, f, []string{"run", "-b", env.KafkaAddr(), "--client-id", "c0", "--session-timeout", "6s", "--state-dir", filepath.Join(dir, "state"), "-f", stagePath})
	}()
	t.Cleanup(func() { p.stop() })
	p.waitFor("the metrics address", func() bool {
		if m := regexp.MustCompile(`url=(http://[0-9.:]+)/metrics`).FindStringSubmatch(p.logs.String()); m != nil {
			p.base = m[1]
		}
		return p.base != ""
	})
	return p
}

// waitFor waits up to 45 s for cond, failing the test with the stage's
// log when it does not come.
func (p *inProcess) waitFor(what string, cond func() bool) {
	p.t.Helper()
	deadline := time.Now().Add(45 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			p.t.Fatalf("timed out waiting for %s:\n%s", what, p.logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop stops the stage (once) and returns its exit code.
func (p *inProcess) stop() int {
	if p.code == nil {
		p.cancel()
		code := <-p.done
		p.code = &code
	}
	return *p.code
}

// A stage idle on an input written by a transactional producer, as every
// raw topic of an extractor or the bridge is, is healthy: the stage
// commits the offset after its last record, so each partition keeps an
// offset lag of transaction markers (and, after an aborted transaction,
// its records) that no read_committed reader can consume. status counts
// what such a reader would read and shows lag 0, where it showed the
// markers for ever; the doctor finds the stage clean (exit 0), where it
// called it stuck before.
func TestIdleStageOfTransactionalInputHasNoLag(t *testing.T) {
	env := devenvtest.Start(t)
	cl := devenvtest.KafkaClient(t, env)
	adm := kadm.NewClient(cl)
	ctx := context.Background()
	if err := kafkax.CreateTopic(ctx, adm, "items.raw", 2, map[string]string{"retention.ms": "-1"}); err != nil {
		t.Fatal(err)
	}
	if err := kafkax.CreateTopic(ctx, adm, "items.counted", 2, nil); err != nil {
		t.Fatal(err)
	}
	txn, err := kgo.NewClient(kgo.SeedBrokers(env.KafkaAddr()), kgo.TransactionalID("upstream-extractor"), kgo.DefaultProduceTopic("items.raw"))
	if err != nil {
		t.Fatal(err)
	}
	defer txn.Close()
	transaction := func(commit kgo.TransactionEndTry, keys ...string) {
		t.Helper()
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			if err := txn.ProduceSync(ctx, &kgo.Record{Key: []byte(k), Value: []byte(`{}`)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if err := txn.EndTransaction(ctx, commit); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 4 {
		transaction(kgo.TryCommit, fmt.Sprintf("a%d", i), fmt.Sprintf("b%d", i), fmt.Sprintf("c%d", i))
	}
	transaction(kgo.TryAbort, "a9", "b9", "c9")

	dir := t.TempDir()
	stagePath := writeAt(t, dir, "count.yaml", fmt.Sprintf(countStageFmt, "refine")+"metrics: {listen: \"127.0.0.1:0\"}\n")
	p := startInProcess(t, env, stagePath, dir)
	p.waitFor("every committed record counted, and the lag standing", func() bool {
		out, _ := kafkax.ReadToEnd(ctx, cl, "items.counted")
		if len(out) != 12 {
			return false
		}
		g, err := adm.Lag(ctx, "refine")
		return err == nil && g["refine"].Lag.Total() > 0
	})
	r := run(t, nil, "", "status", "-b", env.KafkaAddr(), "-f", stagePath, "-o", "json")
	var st status.Report
	if err := json.Unmarshal([]byte(r.out), &st); err != nil {
		t.Fatalf("status: exit %d %v\n%s%s", r.code, err, r.out, r.err)
	}
	if st.Lag != 0 || !st.LagCounted || len(st.Inputs) != 2 {
		t.Errorf("status of an idle stage: lag %d (counted %v), want 0 counted on 2 inputs: %+v", st.Lag, st.LagCounted, st.Inputs)
	}
	for _, in := range st.Inputs {
		if in.Committed == nil || *in.Committed >= in.End || in.Lag != 0 || !in.LagCounted {
			t.Errorf("input %s/%d: committed %v, end %d, lag %d (counted %v): want markers past the commit and lag 0", in.Topic, in.Partition, in.Committed, in.End, in.Lag, in.LagCounted)
		}
	}

	r = run(t, nil, "", "doctor", "-b", env.KafkaAddr(), "-f", stagePath, "--metrics-url", p.base, "--interval", "1s", "-o", "json")
	var rep doctor.Report
	if err := json.Unmarshal([]byte(r.out), &rep); err != nil {
		t.Fatalf("doctor: exit %d %v\n%s%s", r.code, err, r.out, r.err)
	}
	if r.code != 0 || len(rep.Findings) != 0 {
		t.Fatalf("an idle stage: exit %d, findings %+v, checks %+v", r.code, rep.Findings, rep.Checks)
	}
}

// Records a read_committed reader has yet to read are counted as such:
// two committed transactions of three records past the group's offset
// are lag 6, whatever the markers and an aborted transaction between
// them add to the offsets.
func TestStatusCountsCommittedRecordsOnly(t *testing.T) {
	env := devenvtest.Start(t)
	cl := devenvtest.KafkaClient(t, env)
	adm := kadm.NewClient(cl)
	ctx := context.Background()
	if err := kafkax.CreateTopic(ctx, adm, "items.raw", 1, nil); err != nil {
		t.Fatal(err)
	}
	txn, err := kgo.NewClient(kgo.SeedBrokers(env.KafkaAddr()), kgo.TransactionalID("upstream-extractor"), kgo.DefaultProduceTopic("items.raw"))
	if err != nil {
		t.Fatal(err)
	}
	defer txn.Close()
	for _, commit := range []kgo.TransactionEndTry{kgo.TryCommit, kgo.TryAbort, kgo.TryCommit} {
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			if err := txn.ProduceSync(ctx, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: []byte(`{}`)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if err := txn.EndTransaction(ctx, commit); err != nil {
			t.Fatal(err)
		}
	}
	r := run(t, nil, "", "status", "refine", "-b", env.KafkaAddr(), "--input-topics", "items.raw", "--new-app", "-o", "json")
	var st status.Report
	if err := json.Unmarshal([]byte(r.out), &st); err != nil {
		t.Fatalf("status: exit %d %v\n%s%s", r.code, err, r.out, r.err)
	}
	if len(st.Inputs) != 1 || st.Inputs[0].End != 12 {
		t.Fatalf("inputs %+v, want one partition ending at 12 (9 records, 3 markers)", st.Inputs)
	}
	if st.Lag != 6 || !st.LagCounted {
		t.Errorf("lag %d (counted %v), want 6 counted: the committed records, not the 12 offsets", st.Lag, st.LagCounted)
	}
}

// get returns the body of GET url.
func get(url string) (string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// A stage that runs a module exports which one; status and doctor read it
// and compare it with the stage file's module by sha256: the same file is
// clean, another file (a stage file changed but not rolled out) is a
// finding naming the instance, and a warning in status.
func TestModuleStageSeenByStatusAndDoctor(t *testing.T) {
	count := moduletest.Example(t, "count")
	env := devenvtest.Start(t)
	adm := kadm.NewClient(devenvtest.KafkaClient(t, env))
	ctx := context.Background()
	if err := kafkax.CreateTopic(ctx, adm, "items.raw", 1, map[string]string{"retention.ms": "-1"}); err != nil {
		t.Fatal(err)
	}
	if err := kafkax.CreateTopic(ctx, adm, "items.counted", 1, nil); err != nil {
		t.Fatal(err)
	}
	code, err := os.ReadFile(count)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(code)
	sha := hex.EncodeToString(sum[:])
	dir := t.TempDir()
	writeAt(t, dir, "count.wasm", string(code))
	const stageFmt = "application_id: modcount\nkind: transformer\ninput_topics: [items.raw]\ntransform: {module: ./%s, output_topics: [items.counted]}\nmetrics: {listen: \"127.0.0.1:0\"}\n"
	stagePath := writeAt(t, dir, "count.yaml", fmt.Sprintf(stageFmt, "count.wasm"))
	p := startInProcess(t, env, stagePath, dir)
	p.waitFor("the module exported", func() bool {
		m, err := get(p.base + "/metrics")
		return err == nil && strings.Contains(m, "flechtwerk_module_info")
	})
	e := map[string]string{"FLECHT_BROKERS": env.KafkaAddr()}
	doctorModule := func(stage string) (doctor.Check, []doctor.Finding, int) {
		t.Helper()
		r := run(t, e, "", "doctor", "-f", stage, "--metrics-url", strings.TrimPrefix(p.base, "http://"), "--interval", "1s", "-o", "json")
		var rep doctor.Report
		if err := json.Unmarshal([]byte(r.out), &rep); err != nil {
			t.Fatalf("doctor: exit %d %v\n%s%s", r.code, err, r.out, r.err)
		}
		var check doctor.Check
		for _, c := range rep.Checks {
			if c.Name == doctor.CheckModule {
				check = c
			}
		}
		var found []doctor.Finding
		for _, f := range rep.Findings {
			if f.Check == doctor.CheckModule {
				found = append(found, f)
			}
		}
		return check, found, r.code
	}
	statusModules := func(stage string) *status.Modules {
		t.Helper()
		r := run(t, e, "", "status", "-f", stage, "--metrics-url", p.base, "--interval", "0", "-o", "json")
		var rep status.Report
		if err := json.Unmarshal([]byte(r.out), &rep); r.code != 0 || err != nil || rep.Modules == nil {
			t.Fatalf("status: exit %d %v\n%s%s", r.code, err, r.out, r.err)
		}
		return rep.Modules
	}

	check, found, _ := doctorModule(stagePath)
	if check.Status != doctor.StatusOK || check.Detail != "1 instance(s) run count.wasm (sha256 "+sha[:12]+", ABI 1)" || len(found) != 0 {
		t.Errorf("the stage file's module: %+v %+v", check, found)
	}
	m := statusModules(stagePath)
	if in := m.Instances[0]; in.Runs != status.RunsModule || in.Module != "count.wasm" || in.SHA256 != sha || in.ABI != "1" || in.URL != p.base+"/metrics" || len(m.Warnings) != 0 {
		t.Errorf("status %+v", m)
	}

	// The stage file now names another build: the instance runs the old.
	writeAt(t, dir, "count-v2.wasm", string(code)+"\x00")
	next := writeAt(t, dir, "next.yaml", fmt.Sprintf(stageFmt, "count-v2.wasm"))
	check, found, exit := doctorModule(next)
	if exit != exitcode.Findings || check.Status != doctor.StatusFindings || len(found) != 1 || found[0].Subject != p.base+"/metrics" ||
		!strings.Contains(found[0].Message, "runs count.wasm (sha256 "+sha[:12]+", ABI 1), but "+next+" names ./count-v2.wasm") ||
		!strings.Contains(found[0].Command, "flecht transform inspect "+filepath.Join(dir, "count-v2.wasm")) {
		t.Errorf("another module: exit %d %+v %+v", exit, check, found)
	}
	if m := statusModules(next); len(m.Warnings) != 1 || m.Warnings[0].Kind != status.WarnNotStageFileModule || m.Mixed {
		t.Errorf("status, another module: %+v", m.Warnings)
	}
}
