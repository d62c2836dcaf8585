package launch

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/logx/logxtest"
	"github.com/flecht-dev/flecht/internal/module/moduletest"
)

func writeStage(t *testing.T, dir, name, body string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

const (
	countStage = "application_id: %s\nkind: transformer\ninput_topics: [items.raw]\ntransform: {builtin: count, output_topic: items.counted}\n"
	mqttStage  = "application_id: %s\nkind: mqtt\nconfig_topics: [mqtt.config]\nextract: {builtin: mqtt-relay}\n"
)

func stageFile(format, app string) string { return strings.Replace(format, "%s", app, 1) }

// What cannot run is refused as a usage error by Load and LoadAll, before
// anything connects (no cluster is given): a state key that coarsens the
// message key, two stages of one application id, two MQTT stages in one
// process. A state key Load cannot prove refining starts, with a warning.
func TestLoadRefusesWhatCannotRun(t *testing.T) {
	dir := t.TempDir()
	var logs logxtest.Buffer
	l := New(Options{Log: slog.New(slog.NewTextHandler(&logs, nil)), Getenv: func(string) string { return "" }})

	coarse := writeStage(t, dir, "coarse.yaml", stageFile(countStage, "c")+"state_key: \"{value.d}\"\n")
	if _, err := l.Load(coarse); exitcode.Code(err) != exitcode.Usage || !strings.Contains(err.Error(), "coarsens") {
		t.Errorf("a coarsening state key: %v", err)
	}
	unproven := writeStage(t, dir, "unproven.yaml", stageFile(countStage, "u")+"state_key: \"{key}-{value.d}\"\n")
	if _, err := l.Load(unproven); err != nil {
		t.Errorf("an unproven state key is refused: %v", err)
	} else if !strings.Contains(logs.String(), "silent split") {
		t.Errorf("no warning for an unproven state key: %q", logs.String())
	}

	d1 := writeStage(t, dir, "d1/stage.yaml", stageFile(countStage, "refine"))
	d2 := writeStage(t, dir, "d2/stage.yaml", stageFile(countStage, "refine"))
	if _, err := l.LoadAll([]string{d1, d2}); exitcode.Code(err) != exitcode.Usage || !strings.Contains(err.Error(), `share application_id "refine"`) {
		t.Errorf("one application id twice: %v", err)
	}
	m1 := writeStage(t, dir, "m1.yaml", stageFile(mqttStage, "bridge-a"))
	m2 := writeStage(t, dir, "m2.yaml", stageFile(mqttStage, "bridge-b"))
	if _, err := l.LoadAll([]string{m1, m2}); exitcode.Code(err) != exitcode.Usage || !strings.Contains(err.Error(), "both mqtt stages") {
		t.Errorf("two mqtt stages: %v", err)
	}
	stages, err := l.LoadAll([]string{d1, m1})
	if err != nil || len(stages) != 2 || stages[0].ApplicationID != "refine" || stages[1].ApplicationID != "bridge-a" {
		t.Errorf("a transformer and a bridge: %v %v", stages, err)
	}
}

// RunMany refuses one metrics address for several stages: each stage file
// names its own.
func TestRunManyRefusesOneMetricsAddress(t *testing.T) {
	l := New(Options{MetricsListen: "127.0.0.1:0", Log: slog.New(slog.DiscardHandler)})
	if err := l.RunMany(t.Context(), []string{"a.yaml", "b.yaml"}); exitcode.Code(err) != exitcode.Usage {
		t.Errorf("got %v", err)
	}
}

// A stage that writes one of its own inputs would read every record it
// writes again: Load refuses it as a usage error before anything connects,
// unless the stage file declares the topic intermediate_topics; an
// intermediate topic the stage does not write is refused too (a replay
// would skip it).
func TestLoadRefusesAStageThatReadsWhatItWrites(t *testing.T) {
	dir := t.TempDir()
	l := New(Options{Log: slog.New(slog.DiscardHandler), Getenv: func(string) string { return "" }})
	cases := []struct {
		name, body, want string
	}{
		{"output is an input", "application_id: loop\nkind: transformer\ninput_topics: [rawx]\ntransform: {builtin: passthrough, output_topic: rawx}\n",
			"writes rawx, which is also in its input_topics"},
		{"one of two inputs", "application_id: loop2\nkind: transformer\ninput_topics: [a, b]\ntransform: {builtin: rekey, output_topic: b, key: \"{value.id}\"}\n",
			"intermediate_topics: [b]"},
		{"a dead-letter topic read back", "application_id: loop3\nkind: transformer\ninput_topics: [a, a.dlq]\ninvalid_messages: dlq\ntransform: {builtin: count, output_topic: counted}\n",
			"writes a.dlq"},
		{"a module's output", "application_id: loop4\nkind: transformer\ninput_topics: [m]\ntransform: {module: ./x.wasm, output_topics: [m, n]}\n",
			"writes m, which is also"},
		{"an intermediate topic never written", "application_id: skip\nkind: transformer\ninput_topics: [a, b]\nintermediate_topics: [b]\ntransform: {builtin: count, output_topic: counted}\n",
			"declares b in intermediate_topics but does not write it"},
	}
	for _, c := range cases {
		path := writeStage(t, dir, c.name+".yaml", c.body)
		if _, err := l.Load(path); exitcode.Code(err) != exitcode.Usage || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want a usage error containing %q", c.name, err, c.want)
		}
	}
	declared := writeStage(t, dir, "declared.yaml", "application_id: loopok\nkind: transformer\ninput_topics: [a, b]\nintermediate_topics: [b]\ntransform: {builtin: rekey, output_topic: b, key: \"{value.id}\"}\n")
	if _, err := l.Load(declared); err != nil {
		t.Errorf("a declared intermediate topic is refused: %v", err)
	}
}

// A module stage whose poll, at the module's time limit, cannot fit in
// the transaction timeout starts with a warning that says what to set;
// one that fits starts without.
func TestLoadWarnsWhenAPollCannotFitTheTransactionTimeout(t *testing.T) {
	dir := t.TempDir()
	wasm := moduletest.Example(t, "count")
	for _, tc := range []struct {
		extra string
		warns string
	}{
		{"", "max_poll_records × time_limit (500 × 1s = 8m20s) is longer than the transaction timeout (1m0s)"},
		{"", "set max_poll_records: 30 or less, or a lower transform.time_limit"},
		{"max_poll_records: 10\n", ""},
		{"max_poll_records: 100\n", "set max_poll_records: 30 or less"},
	} {
		var logs logxtest.Buffer
		l := New(Options{Log: slog.New(slog.NewTextHandler(&logs, nil)), Getenv: func(k string) string {
			if k == "FLECHT_CACHE_DIR" {
				return filepath.Join(dir, "cache")
			}
			return ""
		}})
		path := writeStage(t, dir, "m.yaml", "application_id: m\nkind: transformer\ninput_topics: [in]\n"+tc.extra+
			"transform:\n  module: "+wasm+"\n  output_topics: [out]\n")
		if _, err := l.Load(path); err != nil {
			t.Fatal(err)
		}
		got := logs.String()
		if tc.warns == "" && strings.Contains(got, "max_poll_records × time_limit") {
			t.Errorf("%q: warned although a poll fits: %s", tc.extra, got)
		}
		if tc.warns != "" && !strings.Contains(got, tc.warns) {
			t.Errorf("%q: log lacks %q:\n%s", tc.extra, tc.warns, got)
		}
	}
}
