//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/module/moduletest"
)

// The proofs of transform modules on the real broker: a team's own logic
// as WebAssembly, run exactly once through SIGKILLs, replayed after a fix,
// and failing cleanly.

// moduleStageFile writes a stage file running a module from in to out.
func moduleStageFile(t testing.TB, app, in, out, wasm, extra string) string {
	t.Helper()
	yaml := fmt.Sprintf(`application_id: %s
kind: transformer
input_topics: [%s]
max_poll_records: 500
transform:
  module: %s
  output_topics: [%s]
%s`, app, in, wasm, out, extra)
	path := filepath.Join(t.TempDir(), "stage.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// e2eModule builds a module of e2e/testdata/modules.
func e2eModule(t testing.TB, name string) string {
	t.Helper()
	return moduletest.Build(t, filepath.Join(repoRoot, "e2e", "testdata", "modules"), "./"+name)
}

// misbehaving builds the host tests' module that fails on demand.
func misbehaving(t testing.TB) string {
	t.Helper()
	return moduletest.Build(t, filepath.Join(repoRoot, "internal", "module", "testdata", "modules"), "./misbehave")
}

// cacheEnv shares one compilation cache among a test's processes, as the
// restarts of one deployment do.
func cacheEnv(t testing.TB) []string { return []string{"FLECHT_CACHE_DIR=" + t.TempDir()} }

// The count module through SIGKILLs at random points, as the count
// builtin's chaos proof: 0 duplicates, 0 gaps, per-key seq exact.
func TestModuleChaosKill(t *testing.T) {
	const (
		total      = 400_000
		keys       = 500
		partitions = 6
	)
	app, in, out := runnerTopics(t, partitions)
	want := produceInputs(t, inputProducer(t), in, partitions, 0, total, keys, 60)
	stage := moduleStageFile(t, app, in, out, moduletest.Example(t, "count"), "")
	stateDir := t.TempDir()
	env := cacheEnv(t)
	var last *proc
	atKill := chaosKill(t, app, in, total, func() *proc {
		last = startProc(t, "module-chaos", false, env, "run", "-f", stage, "--client-id", "module-chaos-0", "--state-dir", stateDir,
			"-b", brokers, "--metrics-listen", "127.0.0.1:0", "--session-timeout", testSessionTimeout)
		return last
	}, nil)
	if !strings.Contains(last.logs(), "module loaded") {
		t.Errorf("no start line names the module:\n%s", tail(last.logs(), 20))
	}
	rep := checkExactlyOnce(t, out, want)
	t.Logf("module chaos: %d SIGKILLs at %v committed inputs; %s", len(atKill), atKill, rep)
}

// celsiusRecord is one output of the celsius modules, with where it sits.
type celsiusRecord struct {
	partition int32
	key       string
	value     string
	timestamp int64
}

// readOutputFrom reads n records of topic from the given offsets (nil: the
// start), in partition and offset order. A stage's last transaction is
// committed before its group's offsets say so, but its markers reach the
// output partitions a moment later: until then a read_committed reader
// stops short of it, so this reads again until n are there.
func readOutputFrom(t *testing.T, topic string, from map[int32]int64, n int) []celsiusRecord {
	t.Helper()
	var got []celsiusRecord
	deadline := time.Now().Add(30 * time.Second)
	for {
		got = readOutputOnce(t, topic, from)
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			adm := admin(t)
			ends, _ := adm.ListEndOffsets(testCtx(t, 10*time.Second), topic)
			lso, _ := adm.ListCommittedOffsets(testCtx(t, 10*time.Second), topic)
			t.Fatalf("%d of %d records readable in %s after 30 s; end offsets %v, last stable offsets %v", len(got), n, topic, ends, lso)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func readOutputOnce(t *testing.T, topic string, from map[int32]int64) []celsiusRecord {
	t.Helper()
	start := kafkax.FromLogStart
	if from != nil {
		starts := map[kafkax.TopicPartition]int64{}
		for p, o := range from {
			starts[kafkax.TopicPartition{Topic: topic, Partition: p}] = o
		}
		start = kafkax.FromOffsets(starts)
	}
	type at struct {
		r   celsiusRecord
		off int64
	}
	var recs []at
	_, err := kafkax.ReadFrom(testCtx(t, 2*time.Minute), client(t), []string{topic}, start, nil, func(r *kgo.Record) error {
		recs = append(recs, at{celsiusRecord{r.Partition, string(r.Key), string(r.Value), r.Timestamp.UnixMilli()}, r.Offset})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(recs, func(i, j int) bool {
		if recs[i].r.partition != recs[j].r.partition {
			return recs[i].r.partition < recs[j].r.partition
		}
		return recs[i].off < recs[j].off
	})
	out := make([]celsiusRecord, len(recs))
	for i, r := range recs {
		out[i] = r.r
	}
	return out
}

// The runbook the project exists for: a bug in the transform, fixed and
// replayed from the raw topic. Module v1 refines a raw topic; v2 fixes
// its bug; flecht replay --execute, then flecht run with v2: the records
// written after the replay equal, byte for byte, what v2 writes over the
// whole raw topic under a fresh application id.
func TestModuleFixAndReplay(t *testing.T) {
	const records, keys = 20_000, 200
	app, fresh := topicName(t, "app"), topicName(t, "fresh")
	raw, out, freshOut := topicName(t, "raw"), topicName(t, "out"), topicName(t, "fresh-out")
	// The records carry event times from January, which outputs keep: a
	// topic with the default 7-day retention would delete them at once.
	forever := map[string]string{"retention.ms": "-1"}
	rpCreate(t, raw, 3, forever)
	rpCreate(t, out, 3, forever)
	rpCreate(t, freshOut, 3, forever)
	cl := rpClient(t, kgo.DefaultProduceTopic(raw), kgo.ProducerLinger(5*time.Millisecond))
	var recs []*kgo.Record
	for i := range records {
		recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, "sensor-%03d", i%keys), Value: fmt.Appendf(nil, `{"id":%d,"f":%d.%d}`, i, 20+i%90, i%10),
			Timestamp: time.UnixMilli(1_767_225_600_000 + int64(i)*1000)})
	}
	if err := cl.ProduceSync(testCtx(t, 2*time.Minute), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	v1, v2 := e2eModule(t, "celsius-v1"), e2eModule(t, "celsius-v2")
	stage := moduleStageFile(t, app, raw, out, v1, "")
	stateDir := t.TempDir()
	env := cacheEnv(t)
	adm := kadm.NewClient(rpClient(t))
	runStage := func(stage, clientID, stateDir string) *proc {
		return startProc(t, clientID, false, append(env, "FLECHT_BROKERS="+brokers), "run", "-f", stage, "--client-id", clientID, "--state-dir", stateDir)
	}

	run1 := runStage(stage, "celsius-a", stateDir)
	rpWaitCaughtUp(t, adm, app, raw, 3*time.Minute)
	run1.stop()
	buggy := readOutputFrom(t, out, nil, records)
	outEnd := rpEnds(t, adm, out)

	// The fix ships: the stage file now names v2.
	fixed := moduleStageFile(t, app, raw, out, v2, "")
	dry, _, code := rpReplay(t, "-f", fixed, "--state-dir", stateDir, "--wait", "30s")
	if code != 0 || dry.Refused != "" {
		t.Fatalf("dry run: exit %d %+v", code, dry)
	}
	plan, errOut, code := rpReplay(t, "-f", fixed, "--state-dir", stateDir, "--keep-outputs", "--execute")
	if code != 0 || !plan.Executed {
		t.Fatalf("replay --execute: exit %d %s %+v", code, errOut, plan)
	}
	run2 := runStage(fixed, "celsius-b", stateDir)
	rpWaitCaughtUp(t, adm, app, raw, 3*time.Minute)
	run2.stop()
	rebuilt := readOutputFrom(t, out, outEnd, records)

	// The reference: v2 over the whole raw topic under a new application.
	ref := runStage(moduleStageFile(t, fresh, raw, freshOut, v2, ""), "celsius-ref", t.TempDir())
	rpWaitCaughtUp(t, adm, fresh, raw, 3*time.Minute)
	ref.stop()
	reference := readOutputFrom(t, freshOut, nil, records)

	if len(rebuilt) != records || len(reference) != records || len(buggy) != records {
		t.Fatalf("outputs: v1 %d, rebuilt %d, reference %d; want %d each", len(buggy), len(rebuilt), len(reference), records)
	}
	if !reflect.DeepEqual(rebuilt, reference) {
		for i := range rebuilt {
			if rebuilt[i] != reference[i] {
				t.Fatalf("record %d differs: rebuilt %+v, reference %+v", i, rebuilt[i], reference[i])
			}
		}
	}
	differ := 0
	for i := range buggy {
		if buggy[i].value != rebuilt[i].value {
			differ++
		}
	}
	if differ == 0 {
		t.Fatal("v1 and v2 wrote the same records: the proof has no bug to fix")
	}
	t.Logf("fix and replay: %d records rebuilt byte for byte as v2 writes them from scratch (%d of them differ from v1's); first: %+v",
		len(rebuilt), differ, rebuilt[0])
}

// Each way a module can fail on a record, on the real broker: the stage
// exits 1 naming the module, its sha256 prefix and the record, nothing of
// the open transaction commits, and a restart with a fixed module (count)
// takes every record exactly once.
func TestModuleFailuresCommitNothingAndResume(t *testing.T) {
	for _, tc := range []struct {
		do, extra, want string
	}{
		{"panic", "", "panic: asked to panic"},
		{"loop", "  time_limit: 200ms\n", "ran over its time limit (time_limit 200ms per record"},
		{"hog", "  memory_limit: 16MiB\n", "MiB of its memory_limit 16 MiB in use"},
		{"big", "", "over the limit of 1048576 (1 MiB)"},
		{"exit", "", "it exited with code 3"},
	} {
		t.Run(tc.do, func(t *testing.T) {
			app, in, out := runnerTopics(t, 1)
			var recs []*kgo.Record
			for i := range 40 {
				v := fmt.Sprintf(`{"id":"%d"}`, i)
				if i == 30 {
					v = fmt.Sprintf(`{"id":"%d","do":"%s"}`, i, tc.do)
				}
				recs = append(recs, &kgo.Record{Topic: in, Key: fmt.Appendf(nil, "k%d", i%4), Value: []byte(v)})
			}
			if err := client(t).ProduceSync(testCtx(t, time.Minute), recs...).FirstErr(); err != nil {
				t.Fatal(err)
			}
			bad := misbehaving(t)
			info := inspect(t, bad)
			env := cacheEnv(t)
			stateDir := t.TempDir()
			// One open transaction holds every record: the failure must
			// take the 30 good ones before it down too.
			stage := moduleStageFile(t, app, in, out, bad, tc.extra+"commit_interval: 20s\n")
			p := startProc(t, "misbehave", false, env, "run", "-f", stage, "--client-id", "m0", "--state-dir", stateDir, "-b", brokers)
			select {
			case <-p.done:
			case <-time.After(2 * time.Minute):
				t.Fatalf("the stage did not stop on the failing record:\n%s", tail(p.logs(), 30))
			}
			logs := p.logs()
			for _, w := range []string{"module misbehave.wasm (sha256 " + info.SHA256[:12] + ")", in + "/0@30", tc.want} {
				if !strings.Contains(logs, w) {
					t.Errorf("the stage's last words lack %q:\n%s", w, tail(logs, 15))
				}
			}
			if p.code != 1 {
				t.Errorf("exit %d, want 1", p.code)
			}
			if n := len(readAll(t, out)); n != 0 {
				t.Errorf("%d outputs committed despite the failure", n)
			}
			if c, _ := committed(testCtx(t, 30*time.Second), admin(t), app, in); c > 0 {
				t.Errorf("%d input offsets committed despite the failure", c)
			}
			// The fix: the stage file names count, which takes the record
			// the other one failed on.
			fixed := moduleStageFile(t, app, in, out, moduletest.Example(t, "count"), "")
			p = startProc(t, "fixed", false, env, "run", "-f", fixed, "--client-id", "m0", "--state-dir", stateDir, "-b", brokers)
			waitCommitted(t, admin(t), app, in, 40, 2*time.Minute, p)
			p.stop()
			got := readAll(t, out)
			seqs := map[string][]string{}
			for _, r := range got {
				seqs[string(r.Key)] = append(seqs[string(r.Key)], string(r.Value))
			}
			if len(got) != 40 {
				t.Fatalf("%d outputs after the fix, want 40: %v", len(got), seqs)
			}
			for k, vs := range seqs {
				for i, v := range vs {
					if !strings.Contains(v, fmt.Sprintf(`"seq":%d`, i+1)) {
						t.Fatalf("key %s: output %d is %s, want seq %d", k, i, v, i+1)
					}
				}
			}
		})
	}
}

// inspect runs flecht transform inspect -o json.
func inspect(t *testing.T, wasm string) struct{ SHA256 string } {
	t.Helper()
	out, errOut, code := runFlecht(t, "", "transform", "inspect", wasm, "-o", "json")
	var info struct{ SHA256 string }
	if code != 0 || json.Unmarshal([]byte(out), &info) != nil || len(info.SHA256) != 64 {
		t.Fatalf("transform inspect %s: exit %d\n%s%s", wasm, code, out, errOut)
	}
	return info
}

// The ABI is not Go's: the AssemblyScript example (built with the pinned
// asc from npm) runs exactly once beside the Go modules, its outputs the
// inputs' bytes and its state per key counted.
func TestModuleAssemblyScript(t *testing.T) {
	if _, err := exec.LookPath("npm"); err != nil {
		t.Fatal("npm is needed to build the AssemblyScript example (.ci/run installs Node.js): ", err)
	}
	wasm := filepath.Join(t.TempDir(), "tally-as.wasm")
	build := exec.Command(filepath.Join(repoRoot, "examples", "modules", "tally-as", "build.sh"), wasm)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building tally-as: %v\n%s", err, out)
	}
	if out, errOut, code := runFlecht(t, "", "transform", "inspect", wasm); code != 0 || !strings.Contains(out, "flecht run accepts this module") {
		t.Fatalf("inspect: exit %d\n%s%s", code, out, errOut)
	}
	dir := filepath.Join(repoRoot, "examples", "modules", "tally-as", "testdata")
	if out, errOut, code := runFlecht(t, "", "transform", "test", "-m", wasm, "--output-topics", "tallied",
		"--input", filepath.Join(dir, "records.jsonl"), "--expect", filepath.Join(dir, "expected.jsonl")); code != 0 {
		t.Fatalf("transform test: exit %d\n%s%s", code, out, errOut)
	}
	app, in, out := runnerTopics(t, 3)
	var recs []*kgo.Record
	values := map[string]string{}
	for i := range 3000 {
		key := fmt.Sprintf("k%d", i%30)
		v := fmt.Sprintf(`{"n":%d, "ü":"x"}`, i)
		values[v] = key
		recs = append(recs, &kgo.Record{Topic: in, Key: []byte(key), Value: []byte(v), Partition: kafkax.Partition([]byte(key), 3)})
	}
	if err := inputProducer(t).ProduceSync(testCtx(t, time.Minute), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	p := startProc(t, "tally-as", false, cacheEnv(t), "run", "-f", moduleStageFile(t, app, in, out, wasm, ""),
		"--client-id", "as-0", "--state-dir", t.TempDir(), "-b", brokers)
	waitCommitted(t, admin(t), app, in, 3000, 2*time.Minute, p)
	p.stop()
	got := readAll(t, out)
	if len(got) != 3000 {
		t.Fatalf("%d outputs, want 3000", len(got))
	}
	for _, r := range got {
		if key, ok := values[string(r.Value)]; !ok || key != string(r.Key) {
			t.Fatalf("output %s under %s is not an input's bytes under its key", r.Value, r.Key)
		}
		delete(values, string(r.Value))
	}
	counts := map[string]string{}
	for _, r := range readAll(t, app+"-changelog") {
		counts[string(r.Key)] = string(r.Value)
	}
	if len(counts) != 30 || counts["k7"] != `{"records":100}` {
		t.Fatalf("changelog: %d keys, k7 = %s", len(counts), counts["k7"])
	}
}

// A rollout stopped half way: two instances of one group run two modules.
// status --metrics-url and doctor say which runs which, on the real broker.
func TestModuleHalfRolledOut(t *testing.T) {
	app, in, out := runnerTopics(t, 2)
	if err := client(t).ProduceSync(testCtx(t, time.Minute), &kgo.Record{Topic: in, Key: []byte("k"), Value: []byte(`{"i":1}`)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	v1, v2 := moduletest.Example(t, "count"), misbehaving(t) // misbehave counts like count
	env := cacheEnv(t)
	old := moduleStageFile(t, app, in, out, v1, "")
	updated := moduleStageFile(t, app, in, out, v2, "")
	a := startProc(t, "half-a", false, env, "run", "-f", old, "--client-id", "half-a", "--state-dir", t.TempDir(),
		"-b", brokers, "--metrics-listen", "127.0.0.1:0", "--session-timeout", testSessionTimeout)
	b := startProc(t, "half-b", false, env, "run", "-f", updated, "--client-id", "half-b", "--state-dir", t.TempDir(),
		"-b", brokers, "--metrics-listen", "127.0.0.1:0", "--session-timeout", testSessionTimeout)
	urls := a.metricsURL() + "," + b.metricsURL()
	waitUntil(t, time.Minute, "both instances to export their module", func() bool {
		for _, p := range []*proc{a, b} {
			body, err := p.tryScrape()
			if err != nil || !strings.Contains(body, "flechtwerk_module_info") {
				return false
			}
		}
		return true
	})
	out1, errOut, code := runFlecht(t, "", "status", "-f", updated, "--metrics-url", urls, "--interval", "0", "-b", brokers)
	if code != 0 || !strings.Contains(out1, "misbehave.wasm") || !strings.Contains(out1, "count.wasm") || !strings.Contains(out1, "different modules") {
		t.Fatalf("status: exit %d\n%s%s", code, out1, errOut)
	}
	out2, errOut, code := runFlecht(t, "", "doctor", "-f", updated, "--metrics-url", urls, "--interval", "1s", "-b", brokers, "-o", "json")
	var rep struct {
		Findings []struct{ Check, Subject, Message string }
	}
	if err := json.Unmarshal([]byte(out2), &rep); err != nil || code != 4 {
		t.Fatalf("doctor: exit %d (%v)\n%s%s", code, err, out2, errOut)
	}
	found := false
	for _, f := range rep.Findings {
		if f.Check == "module" && f.Subject == a.metricsURL() {
			found = true
		}
	}
	if !found {
		t.Fatalf("doctor names no module finding for %s, which runs the old module: %+v", a.metricsURL(), rep.Findings)
	}
}
