package cli

import (
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/devenv/devenvtest"
	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/lint"
)

func TestLintTopicsCommand(t *testing.T) {
	env := devenvtest.Start(t)
	adm := kadm.NewClient(devenvtest.KafkaClient(t, env))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for topic, spec := range map[string]struct {
		n   int32
		cfg map[string]string
	}{
		"good.raw":         {3, map[string]string{"retention.ms": "-1", "cleanup.policy": "delete"}},
		"short.raw":        {3, map[string]string{"retention.ms": "3600000"}},
		"devices":          {1, map[string]string{"cleanup.policy": "compact"}},
		"enrich-changelog": {3, map[string]string{"cleanup.policy": "compact"}},
	} {
		if err := kafkax.CreateTopic(ctx, adm, topic, spec.n, spec.cfg); err != nil {
			t.Fatal(err)
		}
	}
	e := map[string]string{"FLECHT_BROKERS": env.KafkaAddr()}
	good := replayFile(t, "good.yaml", "application_id: enrich\nkind: transformer\ninput_topics: [good.raw]\nconfig_topics: [devices]\ntransform: {builtin: passthrough, output_topic: out}\n")
	r := run(t, e, "", "lint", "topics", "-f", good)
	if r.code != 0 || !strings.Contains(r.out, "no problems found") {
		t.Fatalf("clean: exit %d\n%s%s", r.code, r.out, r.err)
	}

	bad := replayFile(t, "bad.yaml", "application_id: enrich\nkind: transformer\ninput_topics: [short.raw]\nconfig_topics: [good.raw]\ninvalid_messages: dlq\ntransform: {builtin: passthrough, output_topic: out}\n")
	r = run(t, e, "", "lint", "topics", "-f", bad, "-o", "json")
	if r.code != exitcode.Findings {
		t.Fatalf("findings: exit %d %s", r.code, r.err)
	}
	var rep lint.TopicsReport
	if err := json.Unmarshal([]byte(r.out), &rep); err != nil {
		t.Fatal(err)
	}
	if got := problemKinds(&rep); !reflect.DeepEqual(got, []string{"raw_retention:short.raw", "config_not_compacted:good.raw", "missing_dlq:short.raw.dlq"}) {
		t.Errorf("problems %v", got)
	}
	if rep.ApplicationID != "enrich" || rep.Findings != 3 {
		t.Errorf("%+v", rep)
	}
	// Each config problem names the flecht command that fixes it, and
	// that command, run as printed, does (the raw topic's; good.raw stays
	// as it is for the checks below).
	for _, p := range rep.Problems {
		if p.Kind == "missing_dlq" {
			continue
		}
		if !strings.HasPrefix(p.Fix, "flecht topic config "+p.Topic+" --set ") {
			t.Fatalf("%s: fix %q", p.Kind, p.Fix)
		}
		if p.Topic != "short.raw" {
			continue
		}
		if r := run(t, e, "", strings.Fields(p.Fix)[1:]...); r.code != 0 {
			t.Fatalf("%s: exit %d %s", p.Fix, r.code, r.err)
		}
	}
	r = run(t, e, "", "lint", "topics", "-f", bad, "-o", "json")
	var after lint.TopicsReport
	if err := json.Unmarshal([]byte(r.out), &after); err != nil {
		t.Fatal(err)
	}
	if got := problemKinds(&after); !reflect.DeepEqual(got, []string{"config_not_compacted:good.raw", "missing_dlq:short.raw.dlq"}) {
		t.Errorf("after the fixes: %v", got)
	}

	// Lists instead of a stage file; a missing topic is a finding.
	r = run(t, e, "", "lint", "topics", "--raw", "good.raw,nope", "--min-retention", "30d")
	if r.code != exitcode.Findings || !strings.Contains(r.out, "nope does not exist") {
		t.Errorf("lists: exit %d\n%s", r.code, r.out)
	}
	if r = run(t, e, "", "lint", "topics"); r.code != exitcode.Usage {
		t.Errorf("no topics: exit %d", r.code)
	}
	if r = run(t, e, "", "lint", "topics", "--raw", "x", "--min-retention", "long"); r.code != exitcode.Usage {
		t.Errorf("bad retention: exit %d", r.code)
	}

	// The global --config names flecht's config file, never a topic:
	// the profile in it reaches the broker, and only --config-topics
	// lists config topics.
	cfgFile := replayFile(t, "config.yaml", "current_profile: dev\nprofiles:\n  dev:\n    brokers: ["+env.KafkaAddr()+"]\n")
	r = run(t, nil, "", "--config", cfgFile, "lint", "topics", "--raw", "good.raw", "--config-topics", "devices", "-o", "json")
	if err := json.Unmarshal([]byte(r.out), &rep); r.code != 0 || err != nil || len(rep.Topics) != 2 {
		t.Errorf("--config with --config-topics: exit %d %v %s%s", r.code, err, r.out, r.err)
	}
}

// A bad topic name or application id is a usage error found before any
// connection (the broker address here does not answer), not a broker
// error.
func TestLintTopicsNames(t *testing.T) {
	e := map[string]string{"FLECHT_BROKERS": "127.0.0.1:1"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--raw", "bad topic"}, `topic "bad topic" is not a valid Kafka topic name`},
		{[]string{"--config-topics", "a,b/c"}, `topic "b/c" is not a valid Kafka topic name`},
		{[]string{"--input", "x", "--application-id", "bad app"}, `application id "bad app"`},
		{[]string{"--raw", strings.Repeat("x", 250)}, "at most 249 characters"},
		{[]string{"--raw", ","}, "empty topic name"},
	} {
		r := run(t, e, "", append([]string{"lint", "topics"}, tc.args...)...)
		if r.code != exitcode.Usage || !strings.Contains(r.err, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, r.code, r.err, tc.want)
		}
	}
	if r := run(t, e, "", "lint", "topics", "--config", "x"); r.code != exitcode.Usage || !strings.Contains(r.err, "give -f stage.yaml") {
		t.Errorf("--config is the config file, not a topic list: exit %d %q", r.code, r.err)
	}
}

// An extractor's raw topics are the output_topic of its active configs:
// the latest value per key, without deleted or suspended configs.
func TestLintTopicsExtractorRawTopics(t *testing.T) {
	env := devenvtest.Start(t)
	cl := devenvtest.KafkaClient(t, env)
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for topic, cfg := range map[string]map[string]string{
		"polls":       {"cleanup.policy": "compact"},
		"feed.raw":    {"retention.ms": "3600000"},
		"feed2.raw":   {"retention.ms": "-1"},
		"paused.raw":  {"retention.ms": "3600000"},
		"deleted.raw": {"retention.ms": "3600000"},
		"old.raw":     {"retention.ms": "3600000"},
		"relay.raw":   {"retention.ms": "3600000"},
	} {
		if err := kafkax.CreateTopic(ctx, adm, topic, 1, cfg); err != nil {
			t.Fatal(err)
		}
	}
	for _, kv := range [][2]string{
		{"a", `{"url":"http://x","output_topic":"feed.raw"}`},
		{"b", `{"url":"http://x","output_topic":"old.raw"}`},
		{"b", `{"url":"http://x","output_topic":"feed2.raw"}`},
		{"c", `{"output_topic":"paused.raw","suspended":true}`},
		{"d", `{"output_topic":"deleted.raw"}`},
		{"d", ""}, // tombstone
		{"e", `not json`},
		{"f", `{"output_topic":"feed.raw"}`},
	} {
		rec := &kgo.Record{Topic: "polls", Key: []byte(kv[0])}
		if kv[1] != "" {
			rec.Value = []byte(kv[1])
		}
		if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	e := map[string]string{"FLECHT_BROKERS": env.KafkaAddr()}
	for _, kind := range []string{"extractor", "mqtt"} {
		stage := replayFile(t, kind+".yaml", "application_id: poller\nkind: "+kind+"\nconfig_topics: [polls]\nextract: {builtin: http-poll}\n")
		r := run(t, e, "", "lint", "topics", "-f", stage, "-o", "json")
		var rep lint.TopicsReport
		if err := json.Unmarshal([]byte(r.out), &rep); err != nil || r.code != exitcode.Findings {
			t.Fatalf("%s: exit %d %v\n%s%s", kind, r.code, err, r.out, r.err)
		}
		if got := problemKinds(&rep); !reflect.DeepEqual(got, []string{"raw_retention:feed.raw"}) {
			t.Errorf("%s: problems %v, want feed.raw's retention only", kind, got)
		}
		var raws []string
		for _, lt := range rep.Topics {
			if slices.Contains(lt.Roles, lint.RoleRaw) {
				raws = append(raws, lt.Topic)
			}
		}
		if !reflect.DeepEqual(raws, []string{"feed.raw", "feed2.raw"}) {
			t.Errorf("%s: raw topics %v", kind, raws)
		}
		if notes := strings.Join(rep.Notes, "\n"); !strings.Contains(notes, "did not decode were skipped: 1") {
			t.Errorf("%s: notes %q", kind, notes)
		}
	}

	// An mqtt-relay stage's extract.output_topic is the raw topic of the
	// records that name none (upstream's records hold only "topic").
	relay := replayFile(t, "relay.yaml", "application_id: bridge\nkind: mqtt\nconfig_topics: [polls]\nextract: {builtin: mqtt-relay, output_topic: relay.raw, key: \"{topic}\"}\n")
	r := run(t, e, "", "lint", "topics", "-f", relay, "-o", "json")
	var relayRep lint.TopicsReport
	if err := json.Unmarshal([]byte(r.out), &relayRep); err != nil || r.code != exitcode.Findings {
		t.Fatalf("relay: exit %d %v\n%s%s", r.code, err, r.out, r.err)
	}
	if got := problemKinds(&relayRep); !reflect.DeepEqual(got, []string{"raw_retention:feed.raw", "raw_retention:relay.raw"}) {
		t.Errorf("relay: problems %v, want feed.raw's and relay.raw's retention", got)
	}

	// Config topics that cannot be read: said in a note, beside the
	// missing topic's finding.
	stage := replayFile(t, "gone.yaml", "application_id: poller\nkind: extractor\nconfig_topics: [nope]\nextract: {builtin: http-poll}\n")
	r = run(t, e, "", "lint", "topics", "-f", stage, "-o", "json")
	var rep lint.TopicsReport
	if err := json.Unmarshal([]byte(r.out), &rep); err != nil || r.code != exitcode.Findings {
		t.Fatalf("exit %d %v\n%s%s", r.code, err, r.out, r.err)
	}
	if notes := strings.Join(rep.Notes, "\n"); !strings.Contains(notes, "the raw topics were not checked") || !strings.Contains(notes, `"nope" does not exist`) {
		t.Errorf("notes %q", notes)
	}
}

func problemKinds(r *lint.TopicsReport) []string {
	var out []string
	for _, p := range r.Problems {
		out = append(out, p.Kind+":"+p.Topic)
	}
	return out
}
