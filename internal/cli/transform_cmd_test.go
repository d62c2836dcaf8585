package cli

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/flecht-dev/flecht/internal/module/moduletest"
)

// moduleEnv keeps compiled modules out of the developer's own cache, in
// the test binary's shared one: a module compiles once, not in every
// command that loads it.
func moduleEnv(t *testing.T) map[string]string {
	return map[string]string{"FLECHT_CACHE_DIR": moduletest.CacheDir(t)}
}

func TestTransformInspect(t *testing.T) {
	count := moduletest.Example(t, "count")
	r := run(t, moduleEnv(t), "", "transform", "inspect", count)
	if r.code != 0 || !strings.Contains(r.out, "flecht run accepts this module") || !strings.Contains(r.out, "flecht_abi_v1") {
		t.Fatalf("exit %d\n%s%s", r.code, r.out, r.err)
	}
	r = run(t, moduleEnv(t), "", "transform", "inspect", count, "-o", "json")
	var info struct {
		SHA256   string `json:"sha256"`
		Accepted bool   `json:"accepted"`
		ABI      []int  `json:"abi_versions"`
	}
	if err := json.Unmarshal([]byte(r.out), &info); err != nil || r.code != 0 || len(info.SHA256) != 64 || !info.Accepted || len(info.ABI) != 1 {
		t.Fatalf("json: %v %+v\n%s", err, info, r.out)
	}
	bad := moduletest.Build(t, filepath.Join("..", "module", "testdata", "modules"), "./readsfile")
	r = run(t, moduleEnv(t), "", "transform", "inspect", bad)
	if r.code != 2 || !strings.Contains(r.out, "flecht run refuses this module") || !strings.Contains(r.out, "fd_filestat_get") {
		t.Fatalf("a module that reads files: exit %d\n%s%s", r.code, r.out, r.err)
	}
	text := filepath.Join(t.TempDir(), "x.wasm")
	if err := os.WriteFile(text, []byte("#!/bin/sh\necho hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r = run(t, moduleEnv(t), "", "transform", "inspect", text)
	if r.code != 2 || !strings.Contains(r.err, "is not a WebAssembly module") {
		t.Fatalf("a shell script: exit %d\n%s%s", r.code, r.out, r.err)
	}
}

// Each example module's expected results hold, through a stage file as an
// SRE would run them.
func TestTransformTestExamples(t *testing.T) {
	for _, tc := range []struct{ name, config, stateless, extra string }{
		{"count", "", "", ""},
		{"enrich", "{lookup: device, into: meta, missing: reject}", "true", "--configs=testdata/configs.json"},
		{"alarm", "{field: temperature, high: 30, low: 25}", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(moduletest.Root(), "examples", "modules", tc.name)
			stage := filepath.Join(t.TempDir(), "stage.yaml")
			// The example's own stage file, pointed at the module built here.
			raw, err := os.ReadFile(filepath.Join(dir, "stage.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			yaml := strings.Replace(string(raw), "../../../bin/modules/"+tc.name+".wasm", moduletest.Example(t, tc.name), 1)
			if err := os.WriteFile(stage, []byte(yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			args := []string{"transform", "test", "-f", stage, "--input", filepath.Join(dir, "testdata", "records.jsonl"),
				"--expect", filepath.Join(dir, "testdata", "expected.jsonl")}
			if tc.extra != "" {
				args = append(args, strings.Replace(tc.extra, "testdata/", filepath.Join(dir, "testdata")+"/", 1))
			}
			r := run(t, moduleEnv(t), "", args...)
			if r.code != 0 || !strings.Contains(r.out, "as "+filepath.Join(dir, "testdata", "expected.jsonl")+" expects") {
				t.Fatalf("exit %d\n%s%s", r.code, r.out, r.err)
			}
		})
	}
}

func TestTransformTestDiffExits4(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	if err := os.WriteFile(in, []byte(`{"key":"a","value":{"t":1}}`+"\n"+`{"key":"a","value":{"t":2}}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	count := moduletest.Example(t, "count")
	r := run(t, moduleEnv(t), "", "transform", "test", "-m", count, "--output-topics", "out", "--input", in, "-o", "json")
	if r.code != 0 || strings.Count(r.out, "\n") != 2 {
		t.Fatalf("exit %d\n%s%s", r.code, r.out, r.err)
	}
	expect := filepath.Join(dir, "expect.jsonl")
	if err := os.WriteFile(expect, []byte(r.out), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := run(t, moduleEnv(t), "", "transform", "test", "-m", count, "--output-topics", "out", "--input", in, "--expect", expect); r.code != 0 {
		t.Fatalf("its own output as expected: exit %d\n%s%s", r.code, r.out, r.err)
	}
	wrong := strings.Replace(r.out, `"seq":2`, `"seq":3`, 1)
	if err := os.WriteFile(expect, []byte(wrong), 0o644); err != nil {
		t.Fatal(err)
	}
	r = run(t, moduleEnv(t), "", "transform", "test", "-m", count, "--output-topics", "out", "--input", in, "--expect", expect)
	if r.code != 4 || !strings.Contains(r.err, "record 2 (input/0@1)") || !strings.Contains(r.err, `"seq":3`) {
		t.Fatalf("a wrong expectation: exit %d\n%s%s", r.code, r.out, r.err)
	}
}

func TestTransformTestRefusals(t *testing.T) {
	count := moduletest.Example(t, "count")
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	if err := os.WriteFile(in, []byte(`{"key":"a","valu":{"t":1}}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--input", in}, "give the module with -m"},
		{[]string{"-m", count}, "give the records with --input"},
		{[]string{"-m", count, "--input", in}, `line 1: not a record`},
		{[]string{"-m", count, "--input", in, "-f", "x.yaml"}, "-f takes the module"},
		{[]string{"-m", count, "--input", in, "--config", "[1]"}, "--config: want a JSON object"},
		{[]string{"-m", count, "--input", in, "--state-key", "{value.x}{"}, "--state-key"},
	} {
		r := run(t, moduleEnv(t), "", append([]string{"transform", "test"}, tc.args...)...)
		if r.code != 2 || !strings.Contains(r.err, tc.want) {
			t.Errorf("%v: exit %d, want 2 with %q\n%s", tc.args, r.code, tc.want, r.err)
		}
	}
}

// A module failing on a record exits 1 naming the module and the record.
func TestTransformTestModuleFailureExits1(t *testing.T) {
	in := filepath.Join(t.TempDir(), "in.jsonl")
	if err := os.WriteFile(in, []byte(`{"key":"a","value":{"do":"panic"},"topic":"raw","partition":3,"offset":41}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bad := moduletest.Build(t, filepath.Join("..", "module", "testdata", "modules"), "./misbehave")
	r := run(t, moduleEnv(t), "", "transform", "test", "-m", bad, "--output-topics", "out", "--input", in)
	if r.code != 1 || !strings.Contains(r.err, "module misbehave.wasm (sha256 ") || !strings.Contains(r.err, "failed on raw/3@41: panic: asked to panic") {
		t.Fatalf("exit %d\n%s%s", r.code, r.out, r.err)
	}
}

// transform new makes a project that builds and passes its own tests as
// written: go test, the WebAssembly build, and flecht transform test over
// its sample records.
func TestTransformNewBuildsAndPasses(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "payments-total")
	r := run(t, moduleEnv(t), "", "transform", "new", "--lang", "go", dir)
	if r.code != 0 || !strings.Contains(r.out, "make test") {
		t.Fatalf("exit %d\n%s%s", r.code, r.out, r.err)
	}
	for _, args := range [][]string{{"test", "./..."}, {"vet", "./..."}} {
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %v in the new project: %v\n%s", args, err, out)
		}
	}
	wasm := moduletest.Build(t, dir, ".")
	r = run(t, moduleEnv(t), "", "transform", "test", "-m", wasm, "--output-topics", "totals",
		"--input", filepath.Join(dir, "testdata", "records.jsonl"), "--expect", filepath.Join(dir, "testdata", "expected.jsonl"))
	if r.code != 0 {
		t.Fatalf("transform test over its sample: exit %d\n%s%s", r.code, r.out, r.err)
	}
	// The native test expects what the module writes: each record it
	// expects is one that flecht transform test found above.
	nativeTest, err := os.ReadFile(filepath.Join(dir, "main_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	expected, err := os.ReadFile(filepath.Join(dir, "testdata", "expected.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	wants := regexp.MustCompile("`(\\{[^`]*\"total\"[^`]*\\})`").FindAllStringSubmatch(string(nativeTest), -1)
	if len(wants) == 0 {
		t.Fatalf("the native test expects no record with a total:\n%s", nativeTest)
	}
	for _, w := range wants {
		if !strings.Contains(string(expected), `"value":`+w[1]) && !strings.Contains(string(expected), `"after":`+w[1]) {
			t.Errorf("the native test expects %s, which the module does not write (testdata/expected.jsonl)", w[1])
		}
	}
	// A second new into the same directory refuses, and so does a name
	// that cannot name a module.
	if r := run(t, moduleEnv(t), "", "transform", "new", dir); r.code != 2 || !strings.Contains(r.err, "is not empty") {
		t.Errorf("into a project: exit %d %s", r.code, r.err)
	}
	if r := run(t, moduleEnv(t), "", "transform", "new", filepath.Join(t.TempDir(), "9lives")); r.code != 2 || !strings.Contains(r.err, "cannot name a module") {
		t.Errorf("a bad name: exit %d %s", r.code, r.err)
	}
	if r := run(t, moduleEnv(t), "", "transform", "new", "--lang", "rust", filepath.Join(t.TempDir(), "x")); r.code != 2 || !strings.Contains(r.err, "--lang") {
		t.Errorf("rust: exit %d %s", r.code, r.err)
	}
	// Onto a file: a usage error that says so, not the open error.
	file := filepath.Join(t.TempDir(), "p4")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if r := run(t, moduleEnv(t), "", "transform", "new", file); r.code != 2 || !strings.Contains(r.err, "exists and is not a directory") {
		t.Errorf("onto a file: exit %d %s", r.code, r.err)
	}
}

// A stage file whose module cannot run exits 2 before it connects: no
// broker is needed to find out.
func TestRunRefusesABadModuleBeforeConnecting(t *testing.T) {
	dir := t.TempDir()
	bad := moduletest.Build(t, filepath.Join("..", "module", "testdata", "modules"), "./abiv2")
	stage := filepath.Join(dir, "stage.yaml")
	yaml := "application_id: m\nkind: transformer\ninput_topics: [in]\ntransform:\n  module: " + bad + "\n  output_topics: [out]\n"
	if err := os.WriteFile(stage, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	r := run(t, moduleEnv(t), "", "run", "-f", stage, "-b", "127.0.0.1:1", "--client-id", "c")
	if r.code != 2 || !strings.Contains(r.err, "declares ABI v2, and this flecht runs ABI v1") || strings.Contains(r.err, "127.0.0.1:1") {
		t.Fatalf("exit %d\n%s", r.code, r.err)
	}
	pinned := strings.Replace(yaml, bad, moduletest.Example(t, "count"), 1) + "  sha256: " + strings.Repeat("0", 64) + "\n"
	if err := os.WriteFile(stage, []byte(pinned), 0o644); err != nil {
		t.Fatal(err)
	}
	r = run(t, moduleEnv(t), "", "run", "-f", stage, "-b", "127.0.0.1:1", "--client-id", "c")
	if r.code != 2 || !strings.Contains(r.err, "but the stage file pins "+strings.Repeat("0", 64)) {
		t.Fatalf("a pin mismatch: exit %d\n%s", r.code, r.err)
	}
}

// An expectation file without a result would check nothing and pass
// whatever the module answers: it is refused (exit 2), empty or blank.
func TestTransformTestEmptyExpectationIsRefused(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	if err := os.WriteFile(in, []byte(`{"key":"a","value":{"t":1}}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	count := moduletest.Example(t, "count")
	for name, body := range map[string]string{"empty": "", "blank lines": "\n  \n\t\n", "comments": "# nothing yet\n\n"} {
		expect := filepath.Join(dir, "expect.jsonl")
		if err := os.WriteFile(expect, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		r := run(t, moduleEnv(t), "", "transform", "test", "-m", count, "--output-topics", "out", "--input", in, "--expect", expect)
		if r.code != 2 || !strings.Contains(r.err, "holds no expected result") {
			t.Errorf("%s expectation: exit %d\n%s%s", name, r.code, r.out, r.err)
		}
	}
}

// transform test takes a record's key as flecht run does: bytes that are
// not UTF-8 make it an invalid message (run dead-letters it), not U+FFFD.
// With -f, a record that names no topic is from the stage's input topic.
func TestTransformTestKeysAndTopicAsRun(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	lines := "{\"key\":\"a\xffb\",\"value\":{\"t\":1}}\n" +
		"{\"key\":\"\\u00e9\\ud83d\\ude00\xfe\",\"value\":{\"t\":1}}\n" +
		`{"key":"ok","value":{"t":2}}` + "\n"
	if err := os.WriteFile(in, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	count := moduletest.Example(t, "count")
	stage := filepath.Join(dir, "stage.yaml")
	yaml := "application_id: c\nkind: transformer\ninput_topics: [sensors.raw]\ntransform: {module: " + count + ", output_topics: [out]}\n"
	if err := os.WriteFile(stage, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	r := run(t, moduleEnv(t), "", "transform", "test", "-f", stage, "--input", in, "-o", "json")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s%s", r.code, r.out, r.err)
	}
	var cases []struct {
		Topic   string `json:"topic"`
		Verdict string `json:"verdict"`
		Reason  string `json:"reason"`
	}
	for _, l := range strings.Split(strings.TrimSpace(r.out), "\n") {
		var c struct {
			Topic   string `json:"topic"`
			Verdict string `json:"verdict"`
			Reason  string `json:"reason"`
		}
		if err := json.Unmarshal([]byte(l), &c); err != nil {
			t.Fatalf("%v: %q", err, l)
		}
		cases = append(cases, c)
	}
	if r.code != 0 || len(cases) != 3 {
		t.Fatalf("exit %d, %d results\n%s%s", r.code, len(cases), r.out, r.err)
	}
	for i, want := range []string{"invalid", "invalid", "ok"} {
		if cases[i].Verdict != want || cases[i].Topic != "sensors.raw" {
			t.Errorf("record %d: %+v, want verdict %s on topic sensors.raw", i+1, cases[i], want)
		}
	}
	if !strings.Contains(cases[0].Reason, "UTF-8") {
		t.Errorf("the reason does not say why: %q", cases[0].Reason)
	}
}
