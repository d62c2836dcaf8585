package launch

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/logx/logxtest"
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
