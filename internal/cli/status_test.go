package cli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/devenv/devenvtest"
	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/status"
	"github.com/flecht-dev/flecht/internal/ui"
)

func TestStatusUsageErrors(t *testing.T) {
	env := map[string]string{"FLECHT_BROKERS": "127.0.0.1:1"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"status"}, "give the application id"},
		{[]string{"status", "app", "--interval", "often"}, "--interval"},
		{[]string{"status", "app", "--interval", "0", "--watch"}, "--watch needs"},
		{[]string{"status", "bad app"}, `application id "bad app": use letters`},
		{[]string{"status", "app", "--input-topics", "bad topic"}, `topic "bad topic" is not a valid Kafka topic name`},
		{[]string{"status", "app", "--input-topics", ".."}, "not a valid Kafka topic name"},
	} {
		r := run(t, env, "", tc.args...)
		if r.code != exitcode.Usage || !strings.Contains(r.err, tc.want) {
			t.Errorf("%v: exit %d, stderr %q", tc.args, r.code, r.err)
		}
	}
}

func TestStatusCommand(t *testing.T) {
	env := devenvtest.Start(t)
	cl := devenvtest.KafkaClient(t, env)
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := kafkax.CreateTopic(ctx, adm, "raw", 2, nil); err != nil {
		t.Fatal(err)
	}
	for range 6 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "raw", Value: []byte("{}")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	e := map[string]string{"FLECHT_BROKERS": env.KafkaAddr()}
	r := run(t, e, "", "status", "--new-app", "app", "--input-topics", "raw", "--interval", "0", "-o", "json")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	var rep status.Report
	if err := json.Unmarshal([]byte(r.out), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.ApplicationID != "app" || rep.Lag != 6 || len(rep.Inputs) != 2 || rep.Throughput != nil || rep.GroupState != "Dead" {
		t.Errorf("report %+v", rep)
	}

	// An MQTT bridge's IDs are APP-<client_id>: unknown without
	// --client-id, so every APP-* ID counts, and the report says so.
	mqtt := replayFile(t, "mqtt.yaml", "application_id: bridge\nkind: mqtt\nconfig_topics: [c]\nextract: {builtin: mqtt-relay}\n")
	for args, note := range map[string]bool{"": true, "pod-1": false} {
		argv := []string{"status", "--new-app", "-f", mqtt, "--interval", "0", "-o", "json"}
		if args != "" {
			argv = append(argv, "--client-id", args)
		}
		r = run(t, e, "", argv...)
		var rep status.Report
		if err := json.Unmarshal([]byte(r.out), &rep); r.code != 0 || err != nil {
			t.Fatalf("mqtt stage: exit %d %v %s", r.code, err, r.err)
		}
		if got := strings.Contains(strings.Join(rep.Notes, "\n"), "every bridge-* ID is listed"); got != note {
			t.Errorf("--client-id %q: note %v, want %v: %q", args, got, note, rep.Notes)
		}
	}

	r = run(t, e, "", "status", "--new-app", "app", "--input-topics", "raw", "--interval", "50ms")
	for _, want := range []string{"stage:", "lag:", "6", "throughput:", "does not exist", "Members", "Inputs", "Open transactions"} {
		if !strings.Contains(r.out, want) {
			t.Errorf("human output lacks %q:\n%s", want, r.out)
		}
	}
}

// --watch draws a frame per interval; on a terminal it homes the cursor
// and clears the screen first, elsewhere frames follow each other.
func TestStatusWatch(t *testing.T) {
	env := devenvtest.Start(t)
	cl := devenvtest.KafkaClient(t, env)
	ctx := context.Background()
	if err := kafkax.CreateTopic(ctx, kadm.NewClient(cl), "raw", 1, nil); err != nil {
		t.Fatal(err)
	}
	for _, tty := range []bool{false, true} {
		io, _, out, _ := ui.Test()
		io.SetTTY(false, tty, false)
		if err := runStatus(ctx, watchOptions(io, env.KafkaAddr(), ui.FormatTable)); err != nil {
			t.Fatal(err)
		}
		frames := strings.Count(out.String(), "stage:")
		clears := strings.Count(out.String(), "\x1b[H\x1b[2J")
		if frames != 3 || (tty && clears != 3) || (!tty && clears != 0) {
			t.Errorf("tty=%v: %d frames, %d clears:\n%q", tty, frames, clears, out.String())
		}
		if !strings.Contains(out.String(), "throughput:") {
			t.Errorf("later frames show throughput:\n%s", out.String())
		}
	}

	// -o json: one compact document per line and refresh, for scripts.
	io, _, out, _ := ui.Test()
	if err := runStatus(ctx, watchOptions(io, env.KafkaAddr(), ui.FormatJSON)); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3 (one per frame):\n%s", len(lines), out.String())
	}
	for i, line := range lines {
		var rep status.Report
		if err := json.Unmarshal([]byte(line), &rep); err != nil || rep.ApplicationID != "app" {
			t.Errorf("line %d is not a report: %v\n%s", i+1, err, line)
		}
		if (rep.Throughput != nil) != (i > 0) {
			t.Errorf("line %d: throughput %+v (only after the first frame)", i+1, rep.Throughput)
		}
	}
}

// watchOptions are status --watch of app's input raw for three frames,
// 10ms apart.
func watchOptions(io *ui.IOStreams, addr string, format ui.Format) *StatusOptions {
	return &StatusOptions{
		IO: io, Printer: func() *ui.Printer { return ui.NewPrinter(io, format) },
		Flags: status.Flags{ApplicationID: "app", InputTopics: []string{"raw"}, Interval: "10ms", Watch: true}, Frames: 3, NewApp: true,
		Kafka: func(context.Context) (*kgo.Client, error) { return kgo.NewClient(kgo.SeedBrokers(addr)) },
		Sleep: status.Sleep,
	}
}

// fakeInstance serves text as a stage's metrics; it returns host:port.
func fakeInstance(t *testing.T, text string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(text))
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

func moduleInfoText(name, sha string) string {
	return fmt.Sprintf("# TYPE flechtwerk_module_info gauge\nflechtwerk_module_info{application_id=\"enrich\",module=%q,sha256=%q,abi=\"1\"} 1\n", name, sha)
}

// A module file for the stage file to name: status and doctor only hash
// it.
func writeModule(t *testing.T, dir, name, content string) string {
	t.Helper()
	writeAt(t, dir, name, "\x00asm\x01\x00\x00\x00"+content)
	sum := sha256.Sum256([]byte("\x00asm\x01\x00\x00\x00" + content))
	return hex.EncodeToString(sum[:])
}

func TestStatusMetricsURLUsage(t *testing.T) {
	env := map[string]string{"FLECHT_BROKERS": "127.0.0.1:1"}
	for _, bad := range []string{"c0:9464,", "ftp://c0/metrics", "http://[::1"} {
		r := run(t, env, "", "status", "app", "--metrics-url", bad)
		if r.code != exitcode.Usage || !strings.Contains(r.err, "--metrics-url: metrics URL") {
			t.Errorf("%q: exit %d, stderr %q", bad, r.code, r.err)
		}
	}
}

// With --metrics-url, status shows which module each instance runs and
// warns of a half-rolled-out group and of instances that do not run the
// stage file's module; without it, the report is as before.
func TestStatusModules(t *testing.T) {
	env := devenvtest.Start(t)
	ctx := context.Background()
	if err := kafkax.CreateTopic(ctx, kadm.NewClient(devenvtest.KafkaClient(t, env)), "raw", 1, nil); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	want := writeModule(t, dir, "enrich.wasm", "v2")
	stage := writeAt(t, dir, "enrich.yaml", "application_id: enrich\nkind: transformer\ninput_topics: [raw]\ntransform: {module: ./enrich.wasm, output_topics: [out]}\n")
	old := strings.Repeat("0", 64)
	a, b, c := fakeInstance(t, moduleInfoText("enrich.wasm", want)), fakeInstance(t, moduleInfoText("enrich.wasm", old)), fakeInstance(t, "# TYPE up gauge\nup 1\n")
	e := map[string]string{"FLECHT_BROKERS": env.KafkaAddr()}

	r := run(t, e, "", "status", "--new-app", "-f", stage, "--interval", "0", "-o", "json")
	if r.code != 0 || strings.Contains(r.out, `"modules"`) {
		t.Fatalf("no --metrics-url: exit %d %s\n%s", r.code, r.err, r.out)
	}

	r = run(t, e, "", "status", "--new-app", "-f", stage, "--metrics-url", a+","+b, "--metrics-url", c, "--metrics-url", "http://"+a+"/metrics", "--interval", "0", "-o", "json")
	var rep status.Report
	if err := json.Unmarshal([]byte(r.out), &rep); r.code != 0 || err != nil {
		t.Fatalf("exit %d %v %s\n%s", r.code, err, r.err, r.out)
	}
	m := rep.Modules
	if m == nil || len(m.Instances) != 3 || !m.Mixed || m.StageFile == nil || m.StageFile.SHA256 != want || m.StageFile.Path != filepath.Join(dir, "enrich.wasm") {
		t.Fatalf("modules %+v", m)
	}
	if in := m.Instances[0]; in.URL != "http://"+a+"/metrics" || in.Runs != status.RunsModule || in.SHA256 != want || in.ABI != "1" || in.Module != "enrich.wasm" {
		t.Errorf("instance a %+v", in)
	}
	if m.Instances[2].Runs != status.RunsBuiltin {
		t.Errorf("instance c %+v", m.Instances[2])
	}
	var kinds []string
	for _, w := range m.Warnings {
		kinds = append(kinds, w.Kind)
	}
	if strings.Join(kinds, ",") != status.WarnMixedModules+","+status.WarnNotStageFileModule {
		t.Errorf("warnings %+v", m.Warnings)
	}

	r = run(t, e, "", "status", "--new-app", "-f", stage, "--metrics-url", a+","+b+",127.0.0.1:1", "--interval", "0")
	for _, w := range []string{
		"INSTANCE", "the stage file names ./enrich.wasm (sha256 " + want[:12] + ")",
		"http://" + a + "/metrics", want[:12], "unknown: ",
		"warning: the instances run different modules", "a rollout stopped half way; finish it or roll it back (flecht doctor -f " + stage,
		"warning: 1 instance(s) do not run what " + stage + " names",
	} {
		if !strings.Contains(r.out, w) {
			t.Errorf("human output lacks %q:\n%s", w, r.out)
		}
	}
}

// An application id the cluster knows nothing of (no group, no committed
// offset, no changelog) is refused as the typo it most likely is, naming
// the known ids nearest to it; --new-app shows it anyway. So is a replay
// of it, which would otherwise create the group and commit offsets.
func TestUnknownApplicationRefused(t *testing.T) {
	env := devenvtest.Start(t)
	cl := devenvtest.KafkaClient(t, env)
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for topic, n := range map[string]int32{"raw": 1, "sensors-dedupe-changelog": 1} {
		if err := kafkax.CreateTopic(ctx, adm, topic, n, nil); err != nil {
			t.Fatal(err)
		}
	}
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: "raw", Partition: 0, At: 0, LeaderEpoch: -1})
	if err := adm.CommitAllOffsets(ctx, "sensors-count", offs); err != nil {
		t.Fatal(err)
	}
	e := map[string]string{"FLECHT_BROKERS": env.KafkaAddr()}
	for _, argv := range [][]string{
		{"status", "sensors-cuont", "--input-topics", "raw", "--interval", "0"},
		{"replay", "sensors-cuont", "--input-topics", "raw", "--keep-outputs", "--execute"},
	} {
		r := run(t, e, "", argv...)
		if r.code != exitcode.Refused || !strings.Contains(r.err, `no application "sensors-cuont"`) || !strings.Contains(r.err, "did you mean sensors-count?") {
			t.Errorf("%v: exit %d, %s", argv, r.code, r.err)
		}
	}
	if g, err := adm.FetchOffsets(ctx, "sensors-cuont"); err == nil && len(g) > 0 {
		t.Errorf("the refused replay committed offsets: %v", g)
	}
	r := run(t, e, "", "status", "sensors-dedup", "--input-topics", "raw", "--interval", "0")
	if r.code != exitcode.Refused || !strings.Contains(r.err, "did you mean sensors-dedupe?") {
		t.Errorf("a changelog names an application too: exit %d, %s", r.code, r.err)
	}
	for _, argv := range [][]string{
		{"status", "sensors-count", "--input-topics", "raw", "--interval", "0"},
		{"status", "brand-new", "--new-app", "--input-topics", "raw", "--interval", "0"},
		{"replay", "brand-new", "--new-app", "--input-topics", "raw", "--keep-outputs", "--execute"},
	} {
		if r := run(t, e, "", argv...); r.code != 0 {
			t.Errorf("%v: exit %d, %s", argv, r.code, r.err)
		}
	}
}

// A group without members has nothing moving to measure: without
// --interval, status samples it once instead of waiting 5 s for a second
// sample; an explicit --interval still takes two.
func TestStatusSamplesAMemberlessGroupOnce(t *testing.T) {
	env := devenvtest.Start(t)
	cl := devenvtest.KafkaClient(t, env)
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := kafkax.CreateTopic(ctx, adm, "raw", 1, nil); err != nil {
		t.Fatal(err)
	}
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: "raw", Partition: 0, At: 0, LeaderEpoch: -1})
	if err := adm.CommitAllOffsets(ctx, "stopped", offs); err != nil {
		t.Fatal(err)
	}
	for _, given := range []bool{false, true} {
		io, _, _, _ := ui.Test()
		slept := 0
		opts := &StatusOptions{
			IO: io, Printer: func() *ui.Printer { return ui.NewPrinter(io, ui.FormatJSON) },
			Flags: status.Flags{ApplicationID: "stopped", InputTopics: []string{"raw"}, Interval: "5s"}, IntervalGiven: given,
			Kafka: func(context.Context) (*kgo.Client, error) { return kgo.NewClient(kgo.SeedBrokers(env.KafkaAddr())) },
			Sleep: func(context.Context, time.Duration) error { slept++; return nil },
		}
		if err := runStatus(ctx, opts); err != nil {
			t.Fatal(err)
		}
		if want := map[bool]int{false: 0, true: 1}[given]; slept != want {
			t.Errorf("--interval given %v: slept %d times, want %d", given, slept, want)
		}
	}
}
