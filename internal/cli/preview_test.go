package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/devenv/devenvtest"
	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/preview"
)

func TestPreviewUsageErrors(t *testing.T) {
	count := replayFile(t, "count.yaml", "application_id: counter\nkind: transformer\ninput_topics: [raw]\ntransform: {builtin: count, output_topic: out}\n")
	env := map[string]string{"FLECHT_BROKERS": "127.0.0.1:1"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"preview", "--module", "x.wasm"}, "-f STAGE"},
		{[]string{"preview", "-f", count}, "give the candidate"},
		{[]string{"preview", "-f", count, "--module", "x.wasm", "--stage", count}, "one of them"},
		{[]string{"preview", "-f", count, "--module", "x.wasm"}, "not a module"},
		{[]string{"preview", "-f", count, "--stage", count, "--to-datetime", "yesterday"}, "RFC 3339"},
		{[]string{"preview", "-f", count, "--stage", count, "--by-duration", "soon"}, "--by-duration"},
		{[]string{"preview", "-f", count, "--stage", count, "--by-duration", "1h", "--to-datetime", "2026-01-01T00:00:00Z"}, "give one"},
	} {
		r := run(t, env, "", tc.args...)
		if r.code != exitcode.Usage || !strings.Contains(r.err, tc.want) {
			t.Errorf("%q: exit %d, stderr %q; want exit 2 naming %q", tc.args, r.code, r.err, tc.want)
		}
	}
}

// The same builtin exits 0; new options that change outputs exit 4, and
// -o json says which.
func TestPreviewExitCodes(t *testing.T) {
	env := devenvtest.Start(t)
	cl := devenvtest.KafkaClient(t, env, kgo.DefaultProduceTopic("raw"))
	adm := kadm.NewClient(cl)
	for _, topic := range []string{"raw", "out"} {
		if err := kafkax.CreateTopic(context.Background(), adm, topic, 2, nil); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 10 {
		if err := cl.ProduceSync(context.Background(), &kgo.Record{Key: []byte{'k', byte('0' + i)}, Value: []byte(`{"a":1,"b":2}`)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cur := replayFile(t, "cur.yaml", "application_id: pass\nkind: transformer\ninput_topics: [raw]\ntransform: {builtin: passthrough, output_topic: out}\n")
	cand := replayFile(t, "cand.yaml", "application_id: pass\nkind: transformer\ninput_topics: [raw]\ntransform: {builtin: passthrough, output_topic: out, fields: [a]}\n")
	e := map[string]string{"FLECHT_BROKERS": env.KafkaAddr()}

	r := run(t, e, "", "preview", "-f", cur, "--stage", cur)
	if r.code != 0 || !strings.Contains(r.out, "identical") {
		t.Fatalf("the same logic: exit %d\n%s%s", r.code, r.out, r.err)
	}
	r = run(t, e, "", "preview", "-f", cur, "--stage", cand, "-o", "json")
	if r.code != exitcode.Findings {
		t.Fatalf("a changed logic: exit %d, want 4\n%s%s", r.code, r.out, r.err)
	}
	var rep preview.Report
	if err := json.Unmarshal([]byte(r.out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, r.out)
	}
	if rep.Inputs != 10 || len(rep.Topics) != 1 || rep.Topics[0].Changed != 10 || len(rep.Fields) != 1 || rep.Fields[0].Path != "value.b" {
		t.Errorf("report: %+v", rep)
	}
}
