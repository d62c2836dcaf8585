package module_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/module"
	"github.com/flecht-dev/flecht/internal/module/moduletest"
	"github.com/flecht-dev/flecht/internal/statekey"
)

func TestMain(m *testing.M) { moduletest.Main(m) }

// testModule builds one of testdata/modules.
func testModule(t *testing.T, name string) string {
	t.Helper()
	return moduletest.Build(t, filepath.Join("testdata", "modules"), "./"+name)
}

func load(t *testing.T, spec module.Spec) *module.Module {
	t.Helper()
	if spec.OutputTopics == nil {
		spec.OutputTopics = []string{"out"}
	}
	m, err := module.Load(context.Background(), spec, module.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	return m
}

func loadErr(t *testing.T, spec module.Spec) error {
	t.Helper()
	if spec.OutputTopics == nil {
		spec.OutputTopics = []string{"out"}
	}
	m, err := module.Load(context.Background(), spec, module.Options{})
	if err == nil {
		m.Close(context.Background())
		t.Fatalf("%s loaded", spec.Path)
	}
	var le *module.LoadError
	if !errors.As(err, &le) {
		t.Fatalf("%s: %v is not a LoadError (run would not exit 2)", spec.Path, err)
	}
	return err
}

func TestLoadRefusesWhatCannotRun(t *testing.T) {
	dir := t.TempDir()
	text := filepath.Join(dir, "notes.wasm")
	if err := os.WriteFile(text, []byte("this is not WebAssembly at all"), 0o644); err != nil {
		t.Fatal(err)
	}
	count := moduletest.Example(t, "count")
	for _, tc := range []struct {
		name string
		spec module.Spec
		want []string
	}{
		{"not WebAssembly", module.Spec{Path: text}, []string{"is not a WebAssembly module"}},
		{"missing file", module.Spec{Path: filepath.Join(dir, "nope.wasm")}, []string{"no such file"}},
		{"no ABI exports", module.Spec{Path: testModule(t, "noexports")},
			[]string{"declares no ABI version", "flecht_abi_v1", "does not export the function flecht_buffer", "does not export the function flecht_transform"}},
		{"unknown ABI version", module.Spec{Path: testModule(t, "abiv2")}, []string{"declares ABI v2", "this flecht runs ABI v1"}},
		{"reads files", module.Spec{Path: testModule(t, "readsfile")},
			[]string{"may not use", "wasi_snapshot_preview1.path_filestat_get", "wasi_snapshot_preview1.fd_filestat_get"}},
		{"sha256 pinned to another file", module.Spec{Path: count, SHA256: strings.Repeat("ab", 32)},
			[]string{"but the stage file pins " + strings.Repeat("ab", 32)}},
		{"refused setup", module.Spec{Path: testModule(t, "misbehave"), Config: []byte(`{"refuse":true}`)},
			[]string{"refuses its setup", "config.refuse is set"}},
		{"setup wants one output topic", module.Spec{Path: count, OutputTopics: []string{"a", "b"}},
			[]string{"count writes to one topic"}},
		{"memory below the module's own minimum", module.Spec{Path: count, MemoryLimit: 1 << 20}, []string{"count.wasm"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := loadErr(t, tc.spec)
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestLoadAcceptsAPinnedModule(t *testing.T) {
	count := moduletest.Example(t, "count")
	info, err := module.Inspect(context.Background(), count)
	if err != nil {
		t.Fatal(err)
	}
	m := load(t, module.Spec{Path: count, SHA256: strings.ToUpper(info.SHA256)})
	if m.SHA256() != info.SHA256 || m.ABI() != 1 || m.Name() != filepath.Base(count) {
		t.Fatalf("loaded %s sha256 %s abi %d", m.Name(), m.SHA256(), m.ABI())
	}
}

func TestInspect(t *testing.T) {
	info, err := module.Inspect(context.Background(), moduletest.Example(t, "count"))
	if err != nil {
		t.Fatal(err)
	}
	if !info.Accepted || len(info.Problems) > 0 || len(info.SHA256) != 64 || info.Size == 0 || len(info.ABIVersions) != 1 || info.ABIVersions[0] != 1 {
		t.Fatalf("count: %+v", info)
	}
	var sawWASI, sawHost bool
	for _, im := range info.Imports {
		if !im.Allowed {
			t.Errorf("count imports %s.%s, refused", im.Module, im.Name)
		}
		sawWASI = sawWASI || (im.Module == "wasi_snapshot_preview1" && im.StandIn != "")
		sawHost = sawHost || im.Module == "flecht"
	}
	if !sawWASI || !sawHost {
		t.Errorf("imports %+v: want WASI stand-ins and the flecht host functions", info.Imports)
	}
	bad, err := module.Inspect(context.Background(), testModule(t, "readsfile"))
	if err != nil {
		t.Fatal(err)
	}
	if bad.Accepted || len(bad.Problems) != 1 || !strings.Contains(bad.Problems[0], "fd_filestat_get") {
		t.Fatalf("readsfile: %+v", bad)
	}
}

// offline runs records through a fresh instance of path.
func offline(t *testing.T, spec module.Spec, recs ...*kgo.Record) ([]module.OfflineResult, error) {
	t.Helper()
	m := load(t, spec)
	o, err := module.NewOffline(context.Background(), m, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close(context.Background())
	return o.Run(context.Background(), recs)
}

func rec(key, value string, offset int64) *kgo.Record {
	r := &kgo.Record{Topic: "in", Partition: 2, Offset: offset, Key: []byte(key), Timestamp: time.UnixMilli(1_700_000_000_000 + offset)}
	if value != "" {
		r.Value = []byte(value)
	}
	return r
}

// Every way a module can fail on a record stops the stage with an error
// that names the module, its sha256 prefix and the record.
func TestFailuresNameTheModuleAndTheRecord(t *testing.T) {
	path := testModule(t, "misbehave")
	info, err := module.Inspect(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	for do, want := range map[string]string{
		"panic":      "panic: asked to panic (in main.handle at ",
		"fail":       "failed on in/2@7: asked to fail",
		"exit":       `it exited with code 3; it wrote to standard error: "exiting as asked"`,
		"busy":       "ran over its time limit (time_limit 200ms) on in/2@7",
		"hog":        "MiB of its memory_limit 16 MiB in use",
		"big":        "over the limit of 1048576 (1 MiB)",
		"undeclared": `it sent to topic "elsewhere", which is not among the stage's output_topics ["out"]`,
		"badjson":    "has a value that is not a JSON object",
		"badstate":   "its new state is not a JSON object",
		"badkey":     "has a key that is not valid UTF-8",
	} {
		t.Run(do, func(t *testing.T) {
			// Only the busy loop gets a short time limit: the rest must fail on
			// their own, however loaded the machine.
			spec := module.Spec{Path: path, TimeLimit: 10 * time.Second, MemoryLimit: 16 << 20}
			if do == "busy" {
				spec.TimeLimit = 200 * time.Millisecond
			}
			res, err := offline(t, spec, rec("a", `{"i":1}`, 6), rec("k", `{"do":"`+do+`"}`, 7))
			if err == nil {
				t.Fatalf("no error; results %+v", res)
			}
			for _, w := range []string{"module misbehave.wasm (sha256 " + info.SHA256[:12] + ")", "in/2@7", want} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if len(res) != 0 {
				t.Errorf("%d results returned with the failure of their batch", len(res))
			}
		})
	}
}

func TestRejectionsAndState(t *testing.T) {
	res, err := offline(t, module.Spec{Path: moduletest.Example(t, "count")},
		rec("a", `{"i":1}`, 0), rec("a", `[1]`, 1), rec("b", `{"i":2}`, 2), rec("a", `{"i":3}`, 3), rec("a", "", 4))
	if err != nil {
		t.Fatal(err)
	}
	wantValues := []string{`{"i":1,"seq":1}`, "", `{"i":2,"seq":1}`, `{"i":3,"seq":2}`, ""}
	for i, r := range res {
		got := ""
		if len(r.Messages) == 1 {
			got = string(r.Messages[0].RawValue)
		}
		if got != wantValues[i] {
			t.Errorf("record %d: output %q, want %q", i, got, wantValues[i])
		}
	}
	if res[1].Rejected == "" || res[1].StateChanged || string(res[1].StateAfter) != `{"seq":1}` {
		t.Errorf("the array value: %+v, want a rejection that leaves the state", res[1])
	}
	if !res[4].StateChanged && string(res[4].StateAfter) != `{"seq":2}` {
		t.Errorf("tombstone: %+v", res[4])
	}
}

// A module reads no clock and no randomness but the record's: two runs
// over one input write the same bytes, however the records are batched.
func TestDeterministic(t *testing.T) {
	path := testModule(t, "misbehave")
	var recs []*kgo.Record
	for i := range 20 {
		// Repeating keys cut batches at different places than distinct ones.
		recs = append(recs, rec(string(rune('a'+i%3)), `{"do":"time"}`, int64(i)))
	}
	first, err := offline(t, module.Spec{Path: path}, recs...)
	if err != nil {
		t.Fatal(err)
	}
	var distinct []*kgo.Record
	for i, r := range recs {
		c := *r
		c.Key = []byte{byte('A' + i)}
		distinct = append(distinct, &c)
	}
	second, err := offline(t, module.Spec{Path: path}, distinct...)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for i := range first {
		a, b := string(first[i].Messages[0].RawValue), string(second[i].Messages[0].RawValue)
		if a != b {
			t.Fatalf("record %d: %s, then %s", i, a, b)
		}
		if !strings.Contains(a, `"now":`+itoa(1_700_000_000_000+int64(i))) {
			t.Errorf("record %d: %s does not read its event time as the clock", i, a)
		}
		seen[a] = true
	}
	if len(seen) != len(first) {
		t.Errorf("%d distinct outputs of %d: random bytes repeat across records", len(seen), len(first))
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func slogTo(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func TestStateKeyTemplateAndTombstones(t *testing.T) {
	m := load(t, module.Spec{Path: testModule(t, "misbehave")})
	tmpl, err := statekey.Parse("{key}/{value.d}")
	if err != nil {
		t.Fatal(err)
	}
	o, err := module.NewOffline(context.Background(), m, tmpl)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close(context.Background())
	res, err := o.Run(context.Background(), []*kgo.Record{
		rec("a", `{"d":"x"}`, 0), rec("a", `{"d":"y"}`, 1), rec("a", `{"d":"x"}`, 2), rec("a/b", `{"d":"x"}`, 3), rec("a", "", 4),
	})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].StateKey != "a/x" || res[1].StateKey != "a/y" || string(res[2].StateAfter) != `{"seq":2}` {
		t.Errorf("state keys: %+v", res[:3])
	}
	if !strings.Contains(res[3].Invalid, `contains "/"`) {
		t.Errorf("a key holding the separator: %+v", res[3])
	}
	if !res[4].NoStateKey || res[4].StateChanged {
		t.Errorf("a tombstone under a value template: %+v", res[4])
	}
	// Setting state for such a tombstone is an error, as for a builtin.
	_, err = o.Run(context.Background(), []*kgo.Record{rec("settomb", "", 5)})
	if err == nil || !strings.Contains(err.Error(), "no state key") {
		t.Fatalf("state set for a tombstone without a state key: %v", err)
	}
}

func TestConfigLookupsAndLogs(t *testing.T) {
	var logged strings.Builder
	m, err := module.Load(context.Background(), module.Spec{Path: testModule(t, "misbehave"), OutputTopics: []string{"out"}}, module.Options{
		Configs: func(key string) ([]byte, bool) {
			if key == "dev-1" {
				return []byte(`{"site":"north"}`), true
			}
			return nil, false
		},
		Log: slogTo(&logged),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(context.Background())
	o, err := module.NewOffline(context.Background(), m, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close(context.Background())
	res, err := o.Run(context.Background(), []*kgo.Record{
		rec("dev-1", `{"do":"lookup"}`, 0), rec("dev-2", `{"do":"lookup"}`, 1), rec("x", `{"do":"log"}`, 2),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res[0].Messages) != 1 || string(res[0].Messages[0].RawValue) != `{"site":"north"}` {
		t.Errorf("lookup: %+v", res[0])
	}
	if !strings.Contains(res[1].Rejected, `no config "dev-2"`) {
		t.Errorf("missing config: %+v", res[1])
	}
	out := logged.String()
	lines := strings.Count(out, `msg="module log"`)
	if !strings.Contains(out, `line="line 0"`) || !strings.Contains(out, "module=misbehave.wasm") || lines >= 200 || lines < 10 {
		t.Errorf("the module's 201 lines became %d log lines (want the burst, not all):\n%.2000s", lines, out)
	}
}

// A restart does not compile the module again: the second load finds it
// in the cache directory the first one filled, and writes nothing there.
func TestCompilationCacheSurvivesRestarts(t *testing.T) {
	dir := t.TempDir()
	path := moduletest.Example(t, "count")
	snapshot := func() map[string]time.Time {
		files := map[string]time.Time{}
		err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				info, err := d.Info()
				if err != nil {
					return err
				}
				files[p] = info.ModTime()
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return files
	}
	for i := range 2 {
		m, err := module.Load(context.Background(), module.Spec{Path: path, OutputTopics: []string{"out"}}, module.Options{CacheDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		m.Close(context.Background())
		if i == 0 {
			first := snapshot()
			if len(first) == 0 {
				t.Fatal("the first load left nothing in the cache directory")
			}
			t.Cleanup(func() {
				if second := snapshot(); fmt.Sprint(second) != fmt.Sprint(first) {
					t.Errorf("the second load wrote the cache again (compiled anew):\n%v\nthen\n%v", first, second)
				}
			})
		}
	}
}
