package lint

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func facts(n int, kv ...string) TopicFacts {
	f := TopicFacts{Exists: true, Partitions: n, Configs: map[string]string{}}
	for i := 0; i+1 < len(kv); i += 2 {
		f.Configs[kv[i]] = kv[i+1]
	}
	return f
}

func problemKinds(r *TopicsReport) []string {
	var out []string
	for _, p := range r.Problems {
		out = append(out, p.Kind+":"+p.Topic)
	}
	return out
}

func TestCheckTopicsClean(t *testing.T) {
	spec := TopicsSpec{Raw: []string{"raw"}, Config: []string{"cfg"}, Input: []string{"raw", "raw2"}, TaskTopics: []string{"raw", "raw2"},
		Changelog: "app-changelog", DLQ: []string{"raw.dlq", "raw2.dlq"}}
	f := map[string]TopicFacts{
		"raw":           facts(3, "cleanup.policy", "delete", "retention.ms", "-1", "retention.bytes", "-1"),
		"raw2":          facts(3, "cleanup.policy", "delete", "retention.ms", "-1"),
		"cfg":           facts(1, "cleanup.policy", "compact", "retention.ms", "604800000"),
		"app-changelog": facts(3, "cleanup.policy", "compact"),
		"raw.dlq":       facts(3),
		"raw2.dlq":      facts(3),
	}
	r := CheckTopics(spec, f)
	if r.Findings != 0 || len(r.Problems) != 0 {
		t.Fatalf("problems %+v", r.Problems)
	}
	if len(r.Topics) != 6 || !reflect.DeepEqual(r.Topics[0].Roles, []string{"raw", "input"}) || !r.Topics[0].OK {
		t.Errorf("topics %+v", r.Topics)
	}
	if r.MinRetention != "infinite" {
		t.Errorf("min retention %q", r.MinRetention)
	}
}

func TestCheckTopicsFindings(t *testing.T) {
	spec := TopicsSpec{Raw: []string{"raw", "compacted", "sized", "gone"}, Config: []string{"cfg", "cfg2"}, Input: []string{"raw", "compacted"},
		TaskTopics: []string{"raw", "compacted"}, Changelog: "app-changelog", DLQ: []string{"raw.dlq"}}
	f := map[string]TopicFacts{
		"raw":           facts(3, "cleanup.policy", "delete", "retention.ms", "604800000"),
		"compacted":     facts(6, "cleanup.policy", "compact", "retention.ms", "-1"),
		"sized":         facts(1, "cleanup.policy", "delete", "retention.ms", "-1", "retention.bytes", "1000"),
		"gone":          {},
		"cfg":           facts(1, "cleanup.policy", "delete"),
		"cfg2":          facts(1, "cleanup.policy", "compact,delete"),
		"app-changelog": facts(3, "cleanup.policy", "delete"),
		"raw.dlq":       {},
	}
	r := CheckTopics(spec, f)
	want := []string{
		"raw_retention:raw", "raw_compacted:compacted", "raw_retention_bytes:sized", "missing_topic:gone",
		"config_not_compacted:cfg", "config_not_compacted:cfg2", "input_partitions:",
		"changelog_not_compacted:app-changelog", "changelog_partitions:app-changelog", "missing_dlq:raw.dlq",
	}
	if got := problemKinds(r); !reflect.DeepEqual(got, want) {
		t.Fatalf("problems\n got %v\nwant %v", got, want)
	}
	if r.Findings != len(want) {
		t.Errorf("findings %d", r.Findings)
	}
	msgs := map[string]string{}
	for _, p := range r.Problems {
		msgs[p.Kind+":"+p.Topic] = p.Message
	}
	for k, sub := range map[string]string{
		"raw_retention:raw":                     "retention.ms=604800000 (7d)",
		"config_not_compacted:cfg2":             "compact,delete also deletes",
		"input_partitions:":                     "compacted has 6, raw has 3",
		"changelog_partitions:app-changelog":    "3 partitions but the stage has 6 tasks",
		"changelog_not_compacted:app-changelog": "cleanup.policy=delete",
	} {
		if !strings.Contains(msgs[k], sub) {
			t.Errorf("%s: %q lacks %q", k, msgs[k], sub)
		}
	}

	// With --min-retention 7d the raw topic passes; 8d it fails again.
	spec = TopicsSpec{Raw: []string{"raw"}, MinRetention: 7 * 24 * time.Hour}
	if r := CheckTopics(spec, f); r.Findings != 0 || r.MinRetention != "7d" {
		t.Errorf("7d: %+v", r.Problems)
	}
	spec.MinRetention = 8 * 24 * time.Hour
	if r := CheckTopics(spec, f); r.Findings != 1 || !strings.Contains(r.Problems[0].Message, "at least 8d") {
		t.Errorf("8d: %+v", r.Problems)
	}

	// A changelog that does not exist yet is a note, not a finding.
	spec = TopicsSpec{Changelog: "new-changelog", Input: []string{"raw"}, TaskTopics: []string{"raw"}}
	r = CheckTopics(spec, map[string]TopicFacts{"raw": facts(3), "new-changelog": {}})
	if r.Findings != 0 || len(r.Notes) != 1 || !strings.Contains(r.Notes[0], "does not exist yet") {
		t.Errorf("%+v", r)
	}
}
