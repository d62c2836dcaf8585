package cli

import (
	"context"
	"encoding/json"
	"fmt"
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

func TestLintStateKeyStatic(t *testing.T) {
	r := run(t, nil, "", "lint", "state-key", "--state-key", "{value.tenant}")
	if r.code != exitcode.Findings {
		t.Fatalf("exit %d: %s %s", r.code, r.out, r.err)
	}
	for _, want := range []string{"coarsens", "has no {key}", "example:", "1 problem found", "no topics sampled"} {
		if !strings.Contains(r.out, want) {
			t.Errorf("output lacks %q:\n%s", want, r.out)
		}
	}
	if r.err != "" {
		t.Errorf("stderr %q: the report says it all", r.err)
	}

	r = run(t, nil, "", "lint", "state-key", "--state-key", "{key}:{value.device}", "-o", "json")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	var rep lint.Report
	if err := json.Unmarshal([]byte(r.out), &rep); err != nil {
		t.Fatal(err)
	}
	c := rep.ExampleCollision
	if rep.StaticVerdict != lint.Unknown || c == nil || c.A.Key != "a:b" || c.B.Key != "a" || c.A.StateKey != c.B.StateKey {
		t.Errorf("%s", r.out)
	}

	r = run(t, nil, "", "lint", "state-key", "--state-key", "{key}:{value.device}", "--key-pattern", "[a-z0-9-]+", "-o", "json")
	rep = lint.Report{}
	_ = json.Unmarshal([]byte(r.out), &rep)
	if r.code != 0 || rep.StaticVerdict != lint.Refines || rep.KeyPattern != "[a-z0-9-]+" {
		t.Errorf("exit %d %s", r.code, r.out)
	}
}

func TestLintStateKeyUsageErrors(t *testing.T) {
	for args, want := range map[string]string{
		"":                                    "give --state-key TEMPLATE or -f stage.yaml",
		"--state-key {device}":                "unknown placeholder",
		"--state-key {key} --sample none":     "--sample",
		"--state-key {key} --sample 0":        "--sample",
		"--state-key {key} --max-examples 0":  "--max-examples must be at least 1, got 0",
		"--state-key {key} --max-examples -3": "--max-examples must be at least 1, got -3",
		"--state-key {key} --key-pattern [a-": "--key-pattern",
		"-f /nonexistent/stage.yaml":          "stage file /nonexistent/stage.yaml: no such file or directory",
		"--state-key {key} --topics a,,b":     "empty topic name",
		"--state-key {key} extra":             "unknown command",
	} {
		r := run(t, nil, "", append([]string{"lint", "state-key"}, strings.Fields(args)...)...)
		if r.code != exitcode.Usage || !strings.Contains(r.err, want) {
			t.Errorf("%q: exit %d %q; want 2 and %q", args, r.code, r.err, want)
		}
	}
	if r := run(t, nil, "", "lint"); r.code != 0 || !strings.Contains(r.out, "state-key") {
		t.Errorf("lint alone shows its help: exit %d %q", r.code, r.out)
	}
}

func TestLintStateKeyOnData(t *testing.T) {
	env := devenvtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := devenvtest.KafkaClient(t, env)
	for name, n := range map[string]int32{"raw": 6, "other": 8} {
		if _, err := kadm.NewClient(cl).CreateTopic(ctx, n, 1, nil, name); err != nil {
			t.Fatal(err)
		}
	}
	var recs []*kgo.Record
	for i := range 200 {
		tenant := fmt.Sprintf("tenant-%d", i%5)
		v := fmt.Appendf(nil, `{"tenant":%q,"device":"dev-%d"}`, tenant, i)
		recs = append(recs, &kgo.Record{Topic: "raw", Key: []byte(fmt.Sprintf("%s:dev-%d", tenant, i)), Value: v})
		recs = append(recs, &kgo.Record{Topic: "other", Key: []byte(fmt.Sprintf("%s:dev-%d", tenant, i)), Value: v})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	// The coarsening template is caught with concrete records.
	r := run(t, nil, "", "lint", "state-key", "-b", env.KafkaAddr(), "--state-key", "{value.tenant}", "--topics", "raw", "--sample", "ALL", "-o", "json")
	if r.code != exitcode.Findings {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	var rep lint.Report
	if err := json.Unmarshal([]byte(r.out), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.ViolationCount != 5 || rep.Topics[0].Sampled != 200 || rep.Sample != "all records" {
		t.Fatalf("%s", r.out)
	}
	for _, rec := range rep.Violations[0].Records {
		if kafkax.Partition([]byte(rec.Key), 6) != rec.Partition || rec.Topic != "raw" || rec.StateKey != rep.Violations[0].StateKey {
			t.Errorf("violation record %+v", rec)
		}
	}

	// The refining template passes; the human report says so.
	r = run(t, nil, "", "lint", "state-key", "-b", env.KafkaAddr(), "--state-key", "{key}/{value.device}", "--topics", "raw")
	if r.code != 0 || !strings.Contains(r.out, "no problems found") || !strings.Contains(r.out, "✓ no state key on more than one partition") {
		t.Errorf("exit %d:\n%s\n%s", r.code, r.out, r.err)
	}

	// Two topics with 6 and 8 partitions fail co-partitioning.
	r = run(t, nil, "", "lint", "state-key", "-b", env.KafkaAddr(), "--state-key", "{key}", "--topics", "raw,other")
	if r.code != exitcode.Findings || !strings.Contains(r.out, "not co-partitioned") || !strings.Contains(r.out, "raw has 6, other has 8") {
		t.Errorf("exit %d:\n%s", r.code, r.out)
	}

	// A stage file gives the template and the topics; an extractor is exempt.
	stage := writeFile(t, "s.yaml", "application_id: enrich\nkind: transformer\ninput_topics: [raw]\nstate_key: \"{value.tenant}\"\ntransform: {builtin: count}\n")
	r = run(t, nil, "", "lint", "state-key", "-b", env.KafkaAddr(), "-f", stage, "--sample", "50", "-o", "json")
	rep = lint.Report{}
	_ = json.Unmarshal([]byte(r.out), &rep)
	if r.code != exitcode.Findings || rep.StateKey != "{value.tenant}" || len(rep.Topics) != 1 || rep.Topics[0].Sampled > 300 || rep.Sample != "last 50 offsets per partition" {
		t.Errorf("stage file: exit %d %s", r.code, r.out)
	}
	ext := writeFile(t, "e.yaml", "application_id: poll\nkind: extractor\nconfig_topics: [cfg]\nstate_key: \"{value.tenant}\"\nextract: {builtin: http}\n")
	r = run(t, nil, "", "lint", "state-key", "-f", ext, "-o", "json")
	rep = lint.Report{}
	_ = json.Unmarshal([]byte(r.out), &rep)
	if r.code != 0 || !rep.Exempt || rep.Findings != 0 {
		t.Errorf("extractor: exit %d %s", r.code, r.out)
	}

	r = run(t, nil, "", "lint", "state-key", "-b", env.KafkaAddr(), "--state-key", "{key}", "--topics", "nope")
	if r.code != exitcode.Failure || !strings.Contains(r.err, `"nope" does not exist`) {
		t.Errorf("missing topic: exit %d %q", r.code, r.err)
	}
}
