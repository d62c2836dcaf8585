package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/boundedread/hostile"
	"github.com/flecht-dev/flecht/internal/devenv/devenvtest"
	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/replay"
)

func replayFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Every bad input is a usage error (exit 2) found before any connection:
// the broker address here does not answer.
func TestReplayUsageErrors(t *testing.T) {
	mqtt := replayFile(t, "mqtt.yaml", "application_id: bridge\nkind: mqtt\nconfig_topics: [c]\nextract: {builtin: x}\n")
	count := replayFile(t, "count.yaml", "application_id: counter\nkind: transformer\ninput_topics: [raw]\ntransform: {builtin: count, output_topic: out}\n")
	badCSV := replayFile(t, "bad.csv", "raw,0,-1\n")
	env := map[string]string{"FLECHT_BROKERS": "127.0.0.1:1"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"replay"}, "give the application id"},
		{[]string{"replay", "app"}, "give the input topics"},
		{[]string{"replay", "a b", "--input-topics", "raw"}, "application id"},
		{[]string{"replay", "app", "--input-topics", "bad topic"}, `topic "bad topic" is not a valid Kafka topic name`},
		{[]string{"replay", "app", "--input-topics", "raw", "--intermediate-topics", ".."}, `topic ".." is not a valid Kafka topic name`},
		{[]string{"replay", "app", "--input-topics", "raw", "--to-offset", "5", "--to-earliest"}, "give one target"},
		{[]string{"replay", "app", "--input-topics", "raw", "--to-offset", "-5"}, "--to-offset"},
		{[]string{"replay", "app", "--input-topics", "raw", "--to-datetime", "yesterday"}, "RFC 3339"},
		{[]string{"replay", "app", "--input-topics", "raw", "--by-duration", "soon"}, "--by-duration"},
		{[]string{"replay", "app", "--input-topics", "raw", "--wait", "forever"}, "--wait"},
		{[]string{"replay", "app", "--input-topics", "raw", "--from-file", "/nonexistent.csv"}, "--from-file"},
		{[]string{"replay", "app", "--input-topics", "raw", "--from-file", badCSV}, "line 1: offset"},
		{[]string{"replay", "app", "--input-topics", "raw", "--intermediate-topics", "raw"}, "both an input and an intermediate"},
		{[]string{"replay", "-f", count, "--intermediate-topics", "raw"}, "every input topic is an intermediate topic"},
		{[]string{"replay", "-f", mqtt}, "nothing to replay"},
		{[]string{"replay", "other", "-f", count}, "differs from"},
		{[]string{"replay", "a", "b"}, "accepts at most 1 arg"},
	} {
		r := run(t, env, "", tc.args...)
		if r.code != exitcode.Usage || !strings.Contains(r.err, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, r.code, r.err, tc.want)
		}
	}
}

func replayJSON(t *testing.T, out string) replay.Plan {
	t.Helper()
	var p replay.Plan
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return p
}

// Dry run, execute and a refusal through the command on the in-process
// broker.
func TestReplayCommand(t *testing.T) {
	env := devenvtest.Start(t)
	cl := devenvtest.KafkaClient(t, env)
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for topic, n := range map[string]int32{"raw": 2, "counter-changelog": 2} {
		if err := kafkax.CreateTopic(ctx, adm, topic, n, map[string]string{"retention.ms": "-1"}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 20 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "raw", Key: []byte{byte('a' + i)}, Value: []byte("{}")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	stage := replayFile(t, "count.yaml", "application_id: counter\nkind: transformer\ninput_topics: [raw]\ntransform: {builtin: count, output_topic: out}\n")
	stateDir := t.TempDir()
	if err := os.Mkdir(filepath.Join(stateDir, "1"), 0o700); err != nil {
		t.Fatal(err)
	}
	e := map[string]string{"FLECHT_BROKERS": env.KafkaAddr()}

	// Dry run: a plan, nothing changed.
	r := run(t, e, "", "replay", "-f", stage, "--state-dir", stateDir, "-o", "json")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	p := replayJSON(t, r.out)
	if p.Executed || p.ApplicationID != "counter" || len(p.DeleteTopics) != 1 || len(p.Offsets) != 2 || p.Records != 20 || len(p.StateDirs) != 1 {
		t.Fatalf("plan %+v", p)
	}
	if _, err := kafkax.DescribeTopics(ctx, adm, "counter-changelog"); err != nil {
		t.Fatalf("a dry run deleted the changelog: %v", err)
	}

	// The human form names every part.
	r = run(t, e, "", "replay", "-f", stage, "--state-dir", stateDir)
	for _, want := range []string{"dry run", "Dead; members: none", "counter-0, counter-1", "counter-changelog", filepath.Join(stateDir, "1"), "20 offsets (at most as many records)", "TO READ (OFFSETS)", "--execute"} {
		if !strings.Contains(r.out, want) {
			t.Errorf("human output lacks %q:\n%s", want, r.out)
		}
	}

	// From a file: every input partition listed.
	csv := replayFile(t, "o.csv", "topic,partition,offset\nraw,0,1\nraw,1,2\n")
	r = run(t, e, "", "replay", "-f", stage, "--from-file", csv, "-o", "json")
	if p := replayJSON(t, r.out); r.code != 0 || p.Offsets[0].Target != 1 || p.Offsets[1].Target != 2 {
		t.Errorf("from file: exit %d %s", r.code, r.out)
	}
	csv = replayFile(t, "short.csv", "raw,0,1\n")
	if r = run(t, e, "", "replay", "-f", stage, "--from-file", csv); r.code != exitcode.Usage || !strings.Contains(r.err, "lacks raw/1") {
		t.Errorf("short file: exit %d %s", r.code, r.err)
	}

	// Before 1970 is the log start, never the broker's "latest" (-1) or
	// an UNSUPPORTED_VERSION.
	for _, target := range [][]string{{"--to-datetime", "1969-12-31T23:59:59.999Z"}, {"--by-duration", "100000d"}} {
		r = run(t, e, "", append([]string{"replay", "-f", stage, "-o", "json"}, target...)...)
		if r.code != 0 {
			t.Fatalf("%v: exit %d %s", target, r.code, r.err)
		}
		p := replayJSON(t, r.out)
		if p.Offsets[0].Target != 0 || p.Offsets[1].Target != 0 || p.Records != 20 || !strings.Contains(strings.Join(p.Notes, "\n"), "before 1970") {
			t.Errorf("%v: plan %+v", target, p)
		}
	}

	// Execute.
	r = run(t, e, "", "replay", "-f", stage, "--state-dir", stateDir, "--execute", "-o", "json")
	if r.code != 0 {
		t.Fatalf("execute: exit %d: %s", r.code, r.err)
	}
	p = replayJSON(t, r.out)
	if !p.Executed || len(p.Steps) != 4 {
		t.Fatalf("executed %+v", p)
	}
	if p.GroupState != "Dead" || p.GroupStateAfter != "Empty" {
		t.Errorf("group state %q before, %q after executing", p.GroupState, p.GroupStateAfter)
	}
	fetched, err := adm.FetchOffsets(ctx, "counter")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range p.Offsets {
		if got, _ := fetched.Lookup(o.Topic, o.Partition); got.At != o.Target {
			t.Errorf("%s/%d: committed %d, plan %d", o.Topic, o.Partition, got.At, o.Target)
		}
	}

	// The human result labels the state from before executing.
	r = run(t, e, "", "replay", "-f", stage, "--state-dir", stateDir, "--execute")
	if r.code != 0 || !strings.Contains(r.out, "Empty before executing (members: none), Empty after") {
		t.Errorf("human execute: exit %d\n%s%s", r.code, r.out, r.err)
	}

	// A live member refuses with exit 3 and names it; --wait gives up
	// after its duration with the same code.
	member := devenvtest.KafkaClient(t, env, kgo.ClientID("count-7"), kgo.ConsumerGroup("counter"), kgo.ConsumeTopics("raw"))
	go func() {
		for ctx.Err() == nil {
			if member.PollFetches(ctx).IsClientClosed() {
				return
			}
		}
	}()
	for deadline := time.Now().Add(20 * time.Second); ; {
		g, err := kafkax.DescribeGroup(ctx, adm, "counter")
		if err != nil {
			t.Fatal(err)
		}
		if len(g.Members) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("member never joined")
		}
		time.Sleep(50 * time.Millisecond)
	}
	r = run(t, e, "", "replay", "-f", stage, "--execute", "-o", "json")
	if p = replayJSON(t, r.out); r.code != exitcode.Refused || !strings.Contains(p.Refused, "count-7 on ") || r.err != "" {
		t.Fatalf("live member: exit %d, refusal %q, stderr %q (the plan says it; stderr stays empty)", r.code, p.Refused, r.err)
	}
	if p.Executed || len(p.Members) != 1 || p.Members[0].ClientID != "count-7" {
		t.Errorf("refused plan %+v", p)
	}
	// A refusal is printed once: in the plan, not again on stderr.
	r = run(t, e, "", "replay", "-f", stage, "--wait", "300ms")
	if r.code != exitcode.Refused || strings.Count(r.out+r.err, "still there after waiting") != 1 || r.err != "waiting up to 300ms for group counter to empty (count-7 on "+p.Members[0].Host+")\n" {
		t.Errorf("--wait timeout: exit %d, stdout %q, stderr %q", r.code, r.out, r.err)
	}
}

// An extractor's replay fences its tokens (one per config partition),
// deletes its changelog (its cursors) and warns that the sources are asked
// again; it has no input offsets.
func TestReplayExtractor(t *testing.T) {
	env := devenvtest.Start(t)
	adm := kadm.NewClient(devenvtest.KafkaClient(t, env))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for topic, n := range map[string]int32{"cfg": 4, "poller-changelog": 4} {
		if err := kafkax.CreateTopic(ctx, adm, topic, n, map[string]string{"cleanup.policy": "compact"}); err != nil {
			t.Fatal(err)
		}
	}
	stage := replayFile(t, "poller.yaml", "application_id: poller\nkind: extractor\nconfig_topics: [cfg]\nextract: {builtin: http-poll}\n")
	// An extractor's outputs are named by its configs, not its stage
	// file: --execute needs them named or --keep-outputs.
	r := run(t, map[string]string{"FLECHT_BROKERS": env.KafkaAddr()}, "", "replay", "-f", stage, "--state-dir", t.TempDir(), "--execute", "-o", "json")
	if r.code != exitcode.Refused || !strings.Contains(replayJSON(t, r.out).Refused, "--keep-outputs") || r.err != "" {
		t.Fatalf("unknown outputs: exit %d: %s%s", r.code, r.out, r.err)
	}
	r = run(t, map[string]string{"FLECHT_BROKERS": env.KafkaAddr()}, "", "replay", "-f", stage, "--state-dir", t.TempDir(), "--keep-outputs", "--execute", "-o", "json")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	p := replayJSON(t, r.out)
	if p.Kind != replay.KindExtractor || len(p.Fence) != 4 || p.Fence[3] != "poller-3" || len(p.Offsets) != 0 || !p.Executed {
		t.Errorf("plan %+v", p)
	}
	if len(p.Warnings) != 1 || p.Warnings[0].Kind != replay.WarnExtractor {
		t.Errorf("warnings %+v", p.Warnings)
	}
	if len(p.DeleteTopics) != 1 || p.DeleteTopics[0] != "poller-changelog" {
		t.Errorf("delete %v", p.DeleteTopics)
	}
}

// The plan names the module the restart runs. One that flecht run would
// refuse (here: not there yet) is a warning in the dry run and refuses
// --execute with exit 2 before anything changes; once it is there, the
// plan names its sha256 and the replay runs.
func TestReplayNamesTheModule(t *testing.T) {
	env := devenvtest.Start(t)
	adm := kadm.NewClient(devenvtest.KafkaClient(t, env))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for topic, n := range map[string]int32{"raw": 1, "enrich-changelog": 1} {
		if err := kafkax.CreateTopic(ctx, adm, topic, n, map[string]string{"retention.ms": "-1"}); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	stage := writeAt(t, dir, "enrich.yaml", "application_id: enrich\nkind: transformer\ninput_topics: [raw]\ntransform: {module: ./enrich.wasm, output_topics: [out]}\n")
	e := map[string]string{"FLECHT_BROKERS": env.KafkaAddr()}
	resolved := filepath.Join(dir, "enrich.wasm")

	r := run(t, e, "", "replay", "-f", stage, "--state-dir", t.TempDir(), "-o", "json")
	p := replayJSON(t, r.out)
	if r.code != 0 || p.Module == nil || p.Module.File != "./enrich.wasm" || p.Module.Path != resolved || !strings.Contains(p.Module.Error, "no such file") {
		t.Fatalf("dry run, no module file: exit %d %s\n%+v", r.code, r.err, p.Module)
	}
	if len(p.Warnings) != 1 || p.Warnings[0].Kind != replay.WarnModule || p.Refused != "" {
		t.Errorf("warnings %+v refused %q", p.Warnings, p.Refused)
	}
	r = run(t, e, "", "replay", "-f", stage, "--state-dir", t.TempDir())
	for _, want := range []string{"module:", "./enrich.wasm (" + resolved + "): cannot run: module " + resolved + ": no such file or directory", "warning: the module ./enrich.wasm", "dry run: nothing changed; --execute is refused until the module can run"} {
		if !strings.Contains(r.out, want) {
			t.Errorf("human dry run lacks %q:\n%s", want, r.out)
		}
	}

	r = run(t, e, "", "replay", "-f", stage, "--state-dir", t.TempDir(), "--execute", "-o", "json")
	if p := replayJSON(t, r.out); r.code != exitcode.Usage || !strings.Contains(p.Refused, "the module ./enrich.wasm ("+resolved+") that the stage file names cannot run") || r.err != "" {
		t.Fatalf("execute, no module file: exit %d, refusal %q, stderr %q", r.code, p.Refused, r.err)
	}
	if p := replayJSON(t, r.out); p.Executed || !strings.Contains(p.Refused, "flecht run refuses it") {
		t.Errorf("refused plan %+v", p)
	}
	if _, err := kafkax.DescribeTopics(ctx, adm, "enrich-changelog"); err != nil {
		t.Fatalf("a refused replay deleted the changelog: %v", err)
	}

	sha := writeModule(t, dir, "enrich.wasm", "fixed")
	r = run(t, e, "", "replay", "-f", stage, "--state-dir", t.TempDir())
	if r.code != 0 || !strings.Contains(r.out, "./enrich.wasm ("+resolved+"), sha256 "+sha) {
		t.Errorf("human plan with the module: exit %d\n%s", r.code, r.out)
	}
	r = run(t, e, "", "replay", "-f", stage, "--state-dir", t.TempDir(), "--execute", "-o", "json")
	if p := replayJSON(t, r.out); r.code != 0 || !p.Executed || p.Module.SHA256 != sha || len(p.Warnings) != 0 {
		t.Errorf("execute with the module: exit %d %s\n%+v", r.code, r.err, p)
	}
}

// A --from-file that names something else (/dev/zero, a huge file, a
// directory) is refused after a bounded read, exit 2, naming the file and
// its limit, before anything connects.
func TestReplayFromFileHostilePaths(t *testing.T) {
	env := map[string]string{"FLECHT_BROKERS": "127.0.0.1:1"}
	for _, p := range hostile.Paths(t) {
		r := run(t, env, "", "replay", "app", "--input-topics", "t", "--from-file", p.Path)
		if r.code != exitcode.Usage || !strings.Contains(r.err, "offsets file "+p.Path) {
			t.Errorf("%s: exit %d %q", p.Name, r.code, r.err)
		}
		if !p.Missing && p.Name != "directory" && !strings.Contains(r.err, "larger than 16 MiB") {
			t.Errorf("%s: the limit is not named: %q", p.Name, r.err)
		}
	}
}

// The plan names the topics a stage file writes with the records each
// holds; while one holds records, --execute refuses (exit 3, changing
// nothing) until --truncate-outputs or --keep-outputs says what happens to
// them; the two together are a usage error.
func TestReplayOutputsChoice(t *testing.T) {
	env := devenvtest.Start(t)
	cl := devenvtest.KafkaClient(t, env)
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for topic, n := range map[string]int32{"raw": 1, "refined": 1, "dedup-changelog": 1} {
		if err := kafkax.CreateTopic(ctx, adm, topic, n, map[string]string{"retention.ms": "-1"}); err != nil {
			t.Fatal(err)
		}
	}
	for _, topic := range []string{"raw", "raw", "refined", "refined", "refined"} {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte("k"), Value: []byte("{}")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	stage := replayFile(t, "dedup.yaml", "application_id: dedup\nkind: transformer\ninput_topics: [raw]\ninvalid_messages: dlq\ntransform: {builtin: passthrough, output_topic: refined}\n")
	e := map[string]string{"FLECHT_BROKERS": env.KafkaAddr()}

	r := run(t, e, "", "replay", "-f", stage, "--state-dir", t.TempDir(), "-o", "json")
	p := replayJSON(t, r.out)
	if r.code != 0 || !p.OutputsKnown || len(p.Outputs) != 2 {
		t.Fatalf("dry run: exit %d %s; outputs %+v", r.code, r.err, p.Outputs)
	}
	if o := p.Outputs[0]; o.Topic != "refined" || o.Records != 3 || o.Action != replay.ActionChoose {
		t.Errorf("refined: %+v", o)
	}
	if o := p.Outputs[1]; o.Topic != "raw.dlq" || o.Role != replay.RoleDeadLetter || o.Exists || o.Action != replay.ActionNone {
		t.Errorf("the dead-letter topic: %+v", o)
	}
	r = run(t, e, "", "replay", "-f", stage, "--state-dir", t.TempDir())
	for _, want := range []string{"refined: 3 offsets", "choose: --truncate-outputs or --keep-outputs", "raw.dlq (dead letters): missing", "--execute is refused until you choose"} {
		if !strings.Contains(r.out, want) {
			t.Errorf("the human plan lacks %q:\n%s", want, r.out)
		}
	}

	r = run(t, e, "", "replay", "-f", stage, "--state-dir", t.TempDir(), "--execute")
	if r.code != exitcode.Refused || strings.Count(r.out, "refined (3 offsets)") != 1 || !strings.Contains(r.out, "refined.v2") || r.err != "" {
		t.Fatalf("execute without a choice: exit %d, stdout %s, stderr %q (want the refusal once, on stdout)", r.code, r.out, r.err)
	}
	if _, err := kafkax.DescribeTopics(ctx, adm, "dedup-changelog"); err != nil {
		t.Fatalf("a refused replay deleted the changelog: %v", err)
	}
	r = run(t, e, "", "replay", "-f", stage, "--keep-outputs", "--truncate-outputs")
	if r.code != exitcode.Usage || !strings.Contains(r.err, "one of --keep-outputs and --truncate-outputs") {
		t.Errorf("both: exit %d, %s", r.code, r.err)
	}
	r = run(t, e, "", "replay", "dedup", "--input-topics", "raw", "--truncate-outputs")
	if r.code != exitcode.Usage || !strings.Contains(r.err, "--truncate-outputs needs the output topics") {
		t.Errorf("truncate without outputs: exit %d, %s", r.code, r.err)
	}

	r = run(t, e, "", "replay", "-f", stage, "--state-dir", t.TempDir(), "--truncate-outputs", "--execute", "-o", "json")
	if p = replayJSON(t, r.out); r.code != 0 || !p.Executed || p.Outputs[0].Action != replay.ActionTruncate {
		t.Fatalf("truncate: exit %d %s; %+v", r.code, r.err, p)
	}
	res, err := kafkax.ReadToEndFunc(ctx, cl, []string{"refined"}, func(*kgo.Record) error { return nil })
	if err != nil || res.Records != 0 {
		t.Errorf("refined holds %v records after --truncate-outputs (%v)", res, err)
	}
}

// The case: an output that is the stage's own input. The dry run
// shows the refusal; --execute refuses it (exit 3) before any change,
// printed once, and the raw topic keeps every record.
func TestReplayTruncateRefusesItsOwnInput(t *testing.T) {
	env := devenvtest.Start(t)
	cl := devenvtest.KafkaClient(t, env)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := kafkax.CreateTopic(ctx, kadm.NewClient(cl), "rawx", 1, map[string]string{"retention.ms": "-1"}); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "rawx", Value: []byte("{}")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	e := map[string]string{"FLECHT_BROKERS": env.KafkaAddr()}
	args := []string{"replay", "appx", "--input-topics", "rawx", "--output-topics", "rawx", "--truncate-outputs", "--new-app"}

	r := run(t, e, "", args...)
	for _, want := range []string{"rawx: 10 offsets (truncation refused: see below)", "outputs: --truncate-outputs deletes only what this stage alone owns, and rawx: it is an input topic of the stage", "--execute is refused (exit 3)"} {
		if r.code != 0 || !strings.Contains(r.out, want) {
			t.Errorf("dry run: exit %d, lacks %q:\n%s", r.code, want, r.out)
		}
	}
	r = run(t, e, "", append(args, "--execute")...)
	if r.code != exitcode.Refused || strings.Count(r.out+r.err, "rawx: it is an input topic of the stage") != 1 || r.err != "" || strings.Contains(r.out, "✓") {
		t.Errorf("execute: exit %d, want 3 and the refusal once on stdout:\n%s\nstderr: %s", r.code, r.out, r.err)
	}
	res, err := kafkax.ReadToEndFunc(ctx, cl, []string{"rawx"}, func(*kgo.Record) error { return nil })
	if err != nil || res.Records != 10 {
		t.Errorf("rawx holds %+v records after a refused replay (%v), want all 10", res, err)
	}
}
