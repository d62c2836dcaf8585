package acl

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/flecht-dev/flecht/internal/stagefile"
)

func load(t *testing.T, yaml string) *stagefile.Stage {
	t.Helper()
	path := filepath.Join(t.TempDir(), "stage.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := stagefile.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

const countStage = `application_id: sensors-count
kind: transformer
input_topics: [sensors.raw]
transform: {builtin: count, output_topic: sensors.refined}
`

// lines renders acls as "type name pattern op" for compact comparison.
func lines(acls []ACL) []string {
	out := make([]string, len(acls))
	for i, a := range acls {
		out[i] = strings.Join([]string{string(a.ResourceType), a.ResourceName, string(a.PatternType), string(a.Operation)}, " ")
	}
	return out
}

func plan(t *testing.T, yaml string, o Options, outputs ...string) []string {
	t.Helper()
	top, err := StageTopics(load(t, yaml), outputs)
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPlan("User:p", top, o)
	if err != nil {
		t.Fatal(err)
	}
	return lines(p.ACLs)
}

func TestPlanPerRoleOfATransformer(t *testing.T) {
	cases := map[string]struct {
		o    Options
		want []string
	}{
		"run": {Options{Role: RoleRun}, []string{
			"topic sensors.raw literal read",
			"group sensors-count literal read",
			"topic sensors.refined literal write",
			"topic sensors-count-changelog literal read",
			"topic sensors-count-changelog literal write",
			"topic sensors-count-changelog literal create",
			"topic sensors-count-changelog literal describe_configs",
			"transactional_id sensors-count- prefixed write",
		}},
		"replay keeps outputs": {Options{Role: RoleReplay}, []string{
			"group sensors-count literal read",
			"topic sensors.raw literal read",
			"topic sensors.raw literal describe_configs",
			"transactional_id sensors-count- prefixed write",
			"topic sensors-count-changelog literal delete",
			"topic sensors.refined literal describe",
		}},
		"replay truncates outputs": {Options{Role: RoleReplay, TruncateOutputs: true}, []string{
			"group sensors-count literal read",
			"topic sensors.raw literal read",
			"topic sensors.raw literal describe_configs",
			"transactional_id sensors-count- prefixed write",
			"topic sensors-count-changelog literal delete",
			"topic sensors.refined literal delete",
		}},
		"operate": {Options{Role: RoleOperate}, []string{
			"group sensors-count literal describe",
			"topic sensors.raw literal read",
			"topic sensors.raw literal describe_configs",
			"topic sensors.refined literal read",
			"topic sensors-count-changelog literal describe",
			"topic sensors-count-changelog literal describe_configs",
			"transactional_id sensors-count- prefixed describe",
			"cluster kafka-cluster literal describe",
		}},
		"feed": {Options{Role: RoleFeed}, []string{
			"topic sensors.raw literal write",
			"topic sensors.raw literal create",
			"topic sensors.refined literal read",
			"topic sensors.refined literal create",
			"transactional_id flecht-produce- prefixed write",
		}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			if got := plan(t, countStage, c.o); !slices.Equal(got, c.want) {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"))
			}
		})
	}
}

func TestPlanOfStageKinds(t *testing.T) {
	run := Options{Role: RoleRun}
	t.Run("stateless transformer has no changelog", func(t *testing.T) {
		got := plan(t, "application_id: pt\nkind: transformer\ninput_topics: [a]\ntransform: {builtin: passthrough, output_topic: b}\n", run)
		for _, l := range got {
			if strings.Contains(l, "changelog") {
				t.Errorf("a stateless stage got %q", l)
			}
		}
	})
	t.Run("dead letters are created and written", func(t *testing.T) {
		got := plan(t, countStage+"invalid_messages: dlq\n", run)
		for _, want := range []string{"topic sensors.raw.dlq literal create", "topic sensors.raw.dlq literal write"} {
			if !slices.Contains(got, want) {
				t.Errorf("missing %q in\n%s", want, strings.Join(got, "\n"))
			}
		}
	})
	t.Run("config topics are read", func(t *testing.T) {
		got := plan(t, countStage+"config_topics: [sensors.config]\n", run)
		if !slices.Contains(got, "topic sensors.config literal read") {
			t.Errorf("no Read on the config topic in\n%s", strings.Join(got, "\n"))
		}
	})
	t.Run("module outputs and statelessness", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "m.wasm"), []byte("\x00asm\x01\x00\x00\x00"), 0o600); err != nil {
			t.Fatal(err)
		}
		yaml := "application_id: mod\nkind: transformer\ninput_topics: [in]\ntransform: {module: " + filepath.Join(dir, "m.wasm") + ", output_topics: [o1, o2], stateless: true}\n"
		got := plan(t, yaml, run)
		want := []string{"topic in literal read", "group mod literal read", "topic o1 literal write", "topic o2 literal write", "transactional_id mod- prefixed write"}
		if !slices.Equal(got, want) {
			t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})
	t.Run("extractor", func(t *testing.T) {
		got := plan(t, "application_id: ex\nkind: extractor\nconfig_topics: [ex.config]\nextract: {builtin: http-poll}\n", run, "items")
		want := []string{
			"topic ex.config literal read", "group ex literal read", "topic items literal write",
			"topic ex-changelog literal read", "topic ex-changelog literal write", "topic ex-changelog literal create", "topic ex-changelog literal describe_configs",
			"transactional_id ex- prefixed write",
		}
		if !slices.Equal(got, want) {
			t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})
	t.Run("extractor operate: its raw topics' retention", func(t *testing.T) {
		// lint topics reads the raw topics' configs (their retention), so
		// DescribeConfigs beside Read (trace), which does not imply it.
		got := plan(t, "application_id: ex\nkind: extractor\nconfig_topics: [ex.config]\nextract: {builtin: http-poll}\n", Options{Role: RoleOperate}, "items")
		want := []string{
			"group ex literal describe", "topic ex.config literal read", "topic ex.config literal describe_configs",
			"topic items literal read", "topic items literal describe_configs",
			"topic ex-changelog literal describe", "topic ex-changelog literal describe_configs",
			"transactional_id ex- prefixed describe", "cluster kafka-cluster literal describe",
		}
		if !slices.Equal(got, want) {
			t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})
	t.Run("bridge: no group, no changelog, its default output", func(t *testing.T) {
		got := plan(t, "application_id: br\nkind: mqtt\nconfig_topics: [br.config]\nextract: {builtin: mqtt-relay, output_topic: sensors.raw}\n", run)
		want := []string{"topic br.config literal read", "topic sensors.raw literal write", "transactional_id br- prefixed write"}
		if !slices.Equal(got, want) {
			t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})
}

func TestPlanRefusals(t *testing.T) {
	top, err := StageTopics(load(t, "application_id: br\nkind: mqtt\nconfig_topics: [c]\nextract: {builtin: mqtt-relay}\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewPlan("User:p", top, Options{Role: RoleReplay}); err == nil {
		t.Error("a replay plan of a bridge was made")
	}
	for _, p := range []string{"", "alice", "User:", "User:a\nb"} {
		if _, err := NewPlan(p, top, Options{Role: RoleRun}); err == nil {
			t.Errorf("principal %q accepted", p)
		}
	}
	if _, err := ParseRole("admin"); err == nil {
		t.Error("role admin accepted")
	}
}

// TestPlanJSONShape pins the JSON other tools (the secured e2e tier) read.
func TestPlanJSONShape(t *testing.T) {
	top, _ := StageTopics(load(t, countStage), nil)
	p, err := NewPlan("User:count", top, Options{Role: RoleRun})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"acls":[{"principal":"User:count","resource_type":"topic","resource_name":"sensors.raw","pattern_type":"literal","operation":"read","permission":"allow","host":"*"},`
	if !strings.HasPrefix(string(b), want) {
		t.Errorf("JSON starts\n%s\nwant\n%s", b, want)
	}
	var back map[string]any
	if err := json.Unmarshal(b, &back); err != nil || len(back) != 1 {
		t.Errorf("top level is not exactly {\"acls\":...}: %s", b)
	}
}

func TestImpliedOperationsAreLeftOut(t *testing.T) {
	r := Resource{Type: Topic, Name: "t", Pattern: Literal}
	got := lines(ACLs("User:p", []Need{{Resource: r, Operation: Describe}, {Resource: r, Operation: Write}, {Resource: r, Operation: DescribeConfigs}}))
	want := []string{"topic t literal write", "topic t literal describe_configs"}
	if !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestRender(t *testing.T) {
	top, _ := StageTopics(load(t, countStage), nil)
	p, _ := NewPlan("User:CN=count", top, Options{Role: RoleRun})
	gs := Commands(p.ACLs, "k:9093", "admin.properties")
	if len(gs) != 5 {
		t.Fatalf("%d commands, want one per resource (5)", len(gs))
	}
	want := "kafka-acls.sh --bootstrap-server k:9093 --command-config admin.properties --add --allow-principal User:CN=count --operation Write --transactional-id sensors-count- --resource-pattern-type prefixed"
	if gs[4].Command != want {
		t.Errorf("got\n%s\nwant\n%s", gs[4].Command, want)
	}
	if c := Command("User:x y", Resource{Type: Topic, Name: "a;rm -rf /", Pattern: Literal}, []Operation{Read}, "", ""); !strings.Contains(c, "'a;rm -rf /'") || !strings.Contains(c, "'User:x y'") {
		t.Errorf("not shell-quoted: %s", c)
	}
	u := Strimzi(p)
	if u.Metadata.Name != "count" || u.Spec.Authorization.Type != "simple" || len(u.Spec.Authorization.ACLs) != 5 {
		t.Fatalf("KafkaUser %+v", u)
	}
	txn := u.Spec.Authorization.ACLs[4]
	if txn.Resource.Type != "transactionalId" || txn.Resource.PatternType != "prefix" || !slices.Equal(txn.Operations, []string{"Write"}) {
		t.Errorf("transactional ID entry %+v", txn)
	}
	if cl := u.Spec.Authorization.ACLs[1]; cl.Resource.Type != "group" || cl.Resource.PatternType != "literal" {
		t.Errorf("group entry %+v", cl)
	}
}
