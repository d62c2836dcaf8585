package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/module/moduletest"
)

// historyModule writes how many records its instance has seen and the
// partition its instance was set up with.
func historyModule(t *testing.T) string {
	return moduletest.Build(t, filepath.Join("..", "module", "testdata", "modules"), "./history")
}

// historyCase is a result line of the history module.
type historyCase struct {
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	Key       string `json:"key"`
	Outputs   []struct {
		Value struct {
			Seen           int   `json:"seen"`
			SetupPartition int32 `json:"setup_partition"`
			Partition      int32 `json:"partition"`
		} `json:"value"`
	} `json:"outputs"`
	line string
}

func transformTestCases(t *testing.T, args ...string) []historyCase {
	t.Helper()
	r := run(t, moduleEnv(t), "", append([]string{"transform", "test", "-o", "json"}, args...)...)
	if r.code != 0 {
		t.Fatalf("%v: exit %d\n%s%s", args, r.code, r.out, r.err)
	}
	var cases []historyCase
	for _, l := range strings.Split(strings.TrimSpace(r.out), "\n") {
		var c historyCase
		if err := json.Unmarshal([]byte(l), &c); err != nil || len(c.Outputs) != 1 {
			t.Fatalf("%v: %q", err, l)
		}
		c.line = l
		cases = append(cases, c)
	}
	return cases
}

func writeLines(t *testing.T, name string, lines []string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// transform test runs an instance per partition, set up with it, as
// flecht run's tasks do: each partition's records get what a run over
// that partition alone gives them, whatever the other partitions' records
// between them.
func TestTransformTestRunsAnInstancePerPartition(t *testing.T) {
	history := historyModule(t)
	var mixed []string
	perPartition := map[int32][]string{}
	for i := range 12 {
		p := int32(i*7) % 3
		l := fmt.Sprintf(`{"key":"k%d","value":{},"partition":%d}`, i, p)
		mixed = append(mixed, l)
		perPartition[p] = append(perPartition[p], l)
	}
	got := transformTestCases(t, "-m", history, "--input", writeLines(t, "mixed.jsonl", mixed))
	if len(got) != len(mixed) {
		t.Fatalf("%d results for %d records", len(got), len(mixed))
	}
	alone := map[int32][]historyCase{}
	for p, lines := range perPartition {
		alone[p] = transformTestCases(t, "-m", history, "--input", writeLines(t, fmt.Sprintf("p%d.jsonl", p), lines))
	}
	for i, c := range got {
		v := c.Outputs[0].Value
		if v.SetupPartition != c.Partition || v.Partition != c.Partition {
			t.Errorf("record %d of partition %d ran on an instance set up as partition %d: %s", i+1, c.Partition, v.SetupPartition, c.line)
		}
		want := alone[c.Partition][0]
		alone[c.Partition] = alone[c.Partition][1:]
		if want.Outputs[0].Value.Seen != v.Seen || want.Offset != c.Offset || want.Key != c.Key {
			t.Errorf("record %d differs from the run of partition %d alone:\n  mixed %s\n  alone %s", i+1, c.Partition, c.line, want.line)
		}
	}
}

// A record that names no partition goes where Kafka's default
// partitioner puts its key among --partitions (a null key on 0), and its
// offset counts within that partition; without --partitions the count is
// the input's largest partition + 1.
func TestTransformTestPlacesKeysAsKafka(t *testing.T) {
	history := historyModule(t)
	var lines []string
	for i := range 16 {
		lines = append(lines, fmt.Sprintf(`{"key":"dev-%d","value":{}}`, i))
	}
	lines = append(lines, `{"key":null,"value":{}}`)
	in := writeLines(t, "in.jsonl", lines)
	for _, tc := range []struct {
		args       []string
		partitions int
	}{
		{[]string{"--partitions", "4"}, 4},
		{nil, 1},
	} {
		cases := transformTestCases(t, append([]string{"-m", history, "--input", in}, tc.args...)...)
		next := map[int32]int64{}
		used := map[int32]bool{}
		for i, c := range cases {
			want := int32(0)
			if i < 16 {
				want = kafkax.Partition([]byte(c.Key), tc.partitions)
			}
			if c.Partition != want || c.Offset != next[want] || c.Outputs[0].Value.SetupPartition != want {
				t.Errorf("%d partitions: %s, want partition %d offset %d", tc.partitions, c.line, want, next[want])
			}
			next[want]++
			used[want] = true
		}
		if len(used) != tc.partitions {
			t.Errorf("%d partitions: the keys landed on %d of them", tc.partitions, len(used))
		}
	}
	// A named partition sets the count: keys are placed over 3 here.
	withNamed := append([]string{`{"key":"x","value":{},"partition":2}`}, lines[:8]...)
	for _, c := range transformTestCases(t, "-m", history, "--input", writeLines(t, "named.jsonl", withNamed))[1:] {
		if want := kafkax.Partition([]byte(c.Key), 3); c.Partition != want {
			t.Errorf("over the input's 3 partitions: %s, want partition %d", c.line, want)
		}
	}
	// A named partition beyond --partitions is refused, naming its line
	// in the file (comments count).
	bad := writeLines(t, "bad.jsonl", []string{"# first", `{"key":"x","value":{}}`, `{"key":"x","value":{},"partition":4}`})
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--input", bad, "--partitions", "4"}, "line 3: partition 4, but the input topics have 4 partitions"},
		{[]string{"--input", in, "--partitions", "-1"}, "--partitions -1"},
	} {
		r := run(t, moduleEnv(t), "", append([]string{"transform", "test", "-m", history}, tc.args...)...)
		if r.code != 2 || !strings.Contains(r.err, tc.want) {
			t.Errorf("%v: exit %d, want 2 saying %q\n%s", tc.args, r.code, tc.want, r.err)
		}
	}
}

// --determinism names every field a module takes from its instance's
// history or its partition, by record and JSON path, and exits 4; the
// count example, which takes neither, passes.
func TestTransformTestDeterminism(t *testing.T) {
	in := writeLines(t, "in.jsonl", []string{
		`{"key":"a","value":{"t":1},"partition":0}`,
		"# the second record of partition 0 is the fourth line",
		`{"key":"b","value":{"t":2},"partition":1}`,
		`{"key":"a","value":{"t":3},"partition":0}`,
	})
	// Under isolation: task the history module's count of records seen
	// carries from record to record; under record (below) it cannot.
	r := run(t, moduleEnv(t), "", "transform", "test", "-m", historyModule(t), "--isolation", "task", "--input", in, "--determinism", "-o", "json")
	var rep struct {
		Records     int `json:"records"`
		Differences []struct {
			Line              int             `json:"line"`
			Partition         int32           `json:"partition"`
			Offset            int64           `json:"offset"`
			Check             string          `json:"check"`
			Path              string          `json:"path"`
			TestRun           json.RawMessage `json:"test_run"`
			FreshInstance     json.RawMessage `json:"fresh_instance"`
			OtherPartition    json.RawMessage `json:"other_partition"`
			InstancePartition *int32          `json:"instance_partition"`
		} `json:"differences"`
	}
	if err := json.Unmarshal([]byte(r.out), &rep); err != nil || r.code != 4 || rep.Records != 3 {
		t.Fatalf("exit %d, %v\n%s%s", r.code, err, r.out, r.err)
	}
	found := map[string]bool{}
	for _, d := range rep.Differences {
		switch {
		case d.Check == "fresh_instance" && d.Path == "outputs[0].value.seen" && d.Line == 4 && d.Partition == 0 && d.Offset == 1 &&
			string(d.TestRun) == "2" && string(d.FreshInstance) == "1":
			found["seen"] = true
		case d.Check == "other_partition" && d.Path == "outputs[0].value.setup_partition" && d.InstancePartition != nil &&
			string(d.FreshInstance) == fmt.Sprint(d.Partition) && string(d.OtherPartition) == fmt.Sprint(*d.InstancePartition) &&
			*d.InstancePartition != d.Partition:
			found[fmt.Sprint("setup_partition@", d.Line)] = true
		default:
			t.Errorf("an unexpected difference: %+v", d)
		}
	}
	for _, want := range []string{"seen", "setup_partition@1", "setup_partition@3", "setup_partition@4"} {
		if !found[want] {
			t.Errorf("%s not reported\n%s", want, r.out)
		}
	}
	r = run(t, moduleEnv(t), "", "transform", "test", "-m", historyModule(t), "--isolation", "task", "--input", in, "--determinism")
	if r.code != 4 || !strings.Contains(r.out, "line 4 (input/0@1) outputs[0].value.seen: 2 in the test's run, 1 on a fresh instance") {
		t.Errorf("the human report: exit %d\n%s%s", r.code, r.out, r.err)
	}
	// Under record isolation only what the module takes from its setup's
	// partition differs: its history reaches no record.
	r = run(t, moduleEnv(t), "", "transform", "test", "-m", historyModule(t), "--input", in, "--determinism", "-o", "json")
	rep.Differences = nil
	if err := json.Unmarshal([]byte(r.out), &rep); err != nil || r.code != 4 {
		t.Fatalf("record isolation: exit %d, %v\n%s%s", r.code, err, r.out, r.err)
	}
	for _, d := range rep.Differences {
		if d.Check != "other_partition" {
			t.Errorf("under record isolation: %+v", d)
		}
	}

	count := moduletest.Example(t, "count")
	r = run(t, moduleEnv(t), "", "transform", "test", "-m", count, "--output-topics", "out", "--input", in, "--determinism", "-o", "json")
	if err := json.Unmarshal([]byte(r.out), &rep); err != nil || r.code != 0 || rep.Records != 3 || len(rep.Differences) != 0 {
		t.Errorf("count: exit %d %v\n%s%s", r.code, err, r.out, r.err)
	}
	r = run(t, moduleEnv(t), "", "transform", "test", "-m", count, "--output-topics", "out", "--input", in, "--determinism")
	if r.code != 0 || !strings.Contains(r.out, "3 records") || !strings.Contains(r.out, "all agree") {
		t.Errorf("count, human: exit %d\n%s%s", r.code, r.out, r.err)
	}
}
