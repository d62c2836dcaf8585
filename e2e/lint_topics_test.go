//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"testing"
)

type lintTopicsOut struct {
	Problems []struct {
		Kind  string `json:"kind"`
		Topic string `json:"topic"`
	} `json:"problems"`
	Findings int `json:"findings"`
}

func rpLintTopics(t *testing.T, args ...string) (lintTopicsOut, int) {
	t.Helper()
	out, errOut, code := runFlecht(t, "", append(append([]string{"lint", "topics"}, args...), "-o", "json")...)
	var r lintTopicsOut
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("exit %d, %v\n%s\n%s", code, err, out, errOut)
	}
	return r, code
}

func (r lintTopicsOut) kinds() []string {
	var out []string
	for _, p := range r.Problems {
		out = append(out, p.Kind+":"+p.Topic)
	}
	sort.Strings(out)
	return out
}

// flecht lint topics on the real broker's effective configs: the broker's
// default retention (7 days) is a finding for a raw topic; a config topic
// left at delete, a changelog with the wrong partition count, unequal
// inputs and a missing dead-letter topic are findings; fixed, it is clean.
func TestLintTopicsOnKafka(t *testing.T) {
	app := topicName(t, "app")
	raw, raw2 := topicName(t, "raw"), topicName(t, "rawb")
	cfg, defaulted := topicName(t, "cfg"), topicName(t, "dflt")
	rpCreate(t, raw, 3, map[string]string{"retention.ms": "-1"})
	rpCreate(t, raw2, 2, map[string]string{"retention.ms": "-1"})
	rpCreate(t, cfg, 1, nil)       // delete: wrong for a config topic
	rpCreate(t, defaulted, 3, nil) // the broker's default retention
	rpCreate(t, app+"-changelog", 2, map[string]string{"cleanup.policy": "compact"})

	stage := filepath.Join(t.TempDir(), "stage.yaml")
	yaml := fmt.Sprintf("application_id: %s\nkind: transformer\ninput_topics: [%s, %s]\nconfig_topics: [%s]\ninvalid_messages: dlq\ntransform: {builtin: passthrough, output_topic: out}\n", app, raw, raw2, cfg)
	if err := os.WriteFile(stage, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	r, code := rpLintTopics(t, "-f", stage)
	want := []string{
		"changelog_partitions:" + app + "-changelog",
		"config_not_compacted:" + cfg,
		"input_partitions:",
		"missing_dlq:" + raw + ".dlq",
		"missing_dlq:" + raw2 + ".dlq",
	}
	sort.Strings(want)
	if code != 4 || !reflect.DeepEqual(r.kinds(), want) || r.Findings != len(want) {
		t.Fatalf("exit %d, problems %v, want 4 and %v", code, r.kinds(), want)
	}

	r, code = rpLintTopics(t, "--raw", defaulted)
	if code != 4 || !reflect.DeepEqual(r.kinds(), []string{"raw_retention:" + defaulted}) {
		t.Errorf("broker-default retention: exit %d %v", code, r.kinds())
	}
	if r, code = rpLintTopics(t, "--raw", defaulted, "--min-retention", "7d"); code != 0 || r.Findings != 0 {
		t.Errorf("7d is enough with --min-retention 7d: exit %d %v", code, r.kinds())
	}

	// The fixed pipeline is clean.
	app2 := topicName(t, "app2")
	cfg2 := topicName(t, "cfg2")
	rpCreate(t, cfg2, 1, map[string]string{"cleanup.policy": "compact"})
	rpCreate(t, app2+"-changelog", 3, map[string]string{"cleanup.policy": "compact"})
	rpCreate(t, raw+".dlq", 3, nil)
	clean := filepath.Join(t.TempDir(), "clean.yaml")
	yaml = fmt.Sprintf("application_id: %s\nkind: transformer\ninput_topics: [%s]\nconfig_topics: [%s]\ninvalid_messages: dlq\ntransform: {builtin: passthrough, output_topic: out}\n", app2, raw, cfg2)
	if err := os.WriteFile(clean, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	if r, code = rpLintTopics(t, "-f", clean); code != 0 || r.Findings != 0 {
		t.Errorf("clean pipeline: exit %d %v", code, r.kinds())
	}
}
