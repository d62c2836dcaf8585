package cli

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/lineage"
)

// lineageFixture is a kfake cluster holding a stage's raw record, its one
// output with lineage, and the committed offset; and the stage file.
type lineageFixture struct {
	env    map[string]string
	stage  string
	cl     *kgo.Client
	output lineage.Source
}

func newLineageFixture(t *testing.T) *lineageFixture {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1),
		kfake.ListenFn(func(network, _ string) (net.Listener, error) { return net.Listen(network, "127.0.0.1:0") }),
		kfake.SeedTopics(1, "in.raw", "in.refined"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.TransactionalID("pass-0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	raw := &kgo.Record{Topic: "in.raw", Key: []byte("k"), Value: []byte(`{"n":1}`),
		Headers: []kgo.RecordHeader{{Key: lineage.HeaderOrigin, Value: []byte(lineage.MQTTOrigin("s/k"))}}}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(cl.BeginTransaction())
	must(cl.ProduceSync(ctx, raw).FirstErr())
	must(cl.EndTransaction(ctx, kgo.TryCommit))
	st := lineage.Stamp{Source: lineage.Source{Topic: "in.raw", Offset: raw.Offset}, Logic: lineage.BuiltinLogic("passthrough", "0.31.0"), Generation: 1}
	out := &kgo.Record{Topic: "in.refined", Key: []byte("k"), Value: []byte(`{"n":1}`), Headers: st.Headers()}
	must(cl.BeginTransaction())
	must(cl.ProduceSync(ctx, out).FirstErr())
	must(cl.EndTransaction(ctx, kgo.TryCommit))
	var offs kadm.Offsets
	offs.Add(kadm.Offset{Topic: "in.raw", At: raw.Offset + 1, LeaderEpoch: -1, Metadata: lineage.OffsetMetadata(1)})
	_, err = kadm.NewClient(cl).CommitOffsets(ctx, "pass", offs)
	must(err)

	stage := filepath.Join(t.TempDir(), "pass.yaml")
	must(os.WriteFile(stage, []byte("application_id: pass\nkind: transformer\ninput_topics: [in.raw]\ntransform:\n  builtin: passthrough\n  output_topic: in.refined\n"), 0o600))
	return &lineageFixture{env: map[string]string{"FLECHT_BROKERS": strings.Join(c.ListenAddrs(), ",")}, stage: stage, cl: cl,
		output: lineage.Source{Topic: "in.refined", Offset: out.Offset}}
}

func TestVerifyCommand(t *testing.T) {
	fx := newLineageFixture(t)
	r := run(t, fx.env, "", "verify", "-f", fx.stage)
	if r.code != exitcode.OK || !strings.Contains(r.out, "✓ content checked") || !strings.Contains(r.out, "name builtin:passthrough@0.31.0; this flecht reruns builtin:passthrough@") {
		t.Fatalf("clean stage (content checked, another builtin version noted): exit %d\n%s\n%s", r.code, r.out, r.err)
	}

	// A record from a plain producer: exit 4, named in text and in JSON.
	plain := &kgo.Record{Topic: "in.refined", Key: []byte("x"), Value: []byte("{}")}
	if err := fx.cl.ProduceSync(context.Background(), plain).FirstErr(); err == nil {
		t.Fatal("a transactional client produced outside a transaction")
	}
	other, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(fx.env["FLECHT_BROKERS"], ",")...))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := other.ProduceSync(context.Background(), plain).FirstErr(); err != nil {
		t.Fatal(err)
	}
	at := lineage.Source{Topic: "in.refined", Offset: plain.Offset}.String()
	r = run(t, fx.env, "", "verify", "-f", fx.stage)
	if r.code != exitcode.Findings || !strings.Contains(r.out, at) || !strings.Contains(r.out, "no_lineage") {
		t.Fatalf("a foreign record: exit %d\n%s\n%s", r.code, r.out, r.err)
	}
	r = run(t, fx.env, "", "verify", "-f", fx.stage, "-o", "json")
	var rep struct {
		ContentChecked *bool `json:"content_checked"`
		Findings       []struct{ Kind, Record string }
	}
	if err := json.Unmarshal([]byte(r.out), &rep); err != nil || r.code != exitcode.Findings {
		t.Fatalf("json: exit %d, %v\n%s", r.code, err, r.out)
	}
	if rep.ContentChecked == nil || !*rep.ContentChecked || len(rep.Findings) != 1 || rep.Findings[0].Record != at {
		t.Fatalf("json report %+v", rep)
	}

	// A module file for a builtin's lineage is the wrong one: exit 2.
	wasm := filepath.Join(t.TempDir(), "m.wasm")
	if err := os.WriteFile(wasm, []byte("\x00asm\x01\x00\x00\x00"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r = run(t, fx.env, "", "verify", "-f", fx.stage, "--module", wasm); r.code != exitcode.Usage || !strings.Contains(r.err, "builtin") {
		t.Fatalf("a module for a builtin stage: exit %d\n%s", r.code, r.err)
	}

	// A stage without lineage cannot be audited: exit 2, saying so.
	off := filepath.Join(t.TempDir(), "off.yaml")
	if err := os.WriteFile(off, []byte("application_id: pass\nkind: transformer\ninput_topics: [in.raw]\nlineage: false\ntransform:\n  builtin: passthrough\n  output_topic: in.refined\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r = run(t, fx.env, "", "verify", "-f", off); r.code != exitcode.Usage || !strings.Contains(r.err, "lineage: false") {
		t.Fatalf("lineage: false: exit %d\n%s", r.code, r.err)
	}
}

func TestTraceCommand(t *testing.T) {
	fx := newLineageFixture(t)
	r := run(t, fx.env, "", "trace", fx.output.String())
	if r.code != exitcode.OK || !strings.Contains(r.out, "in.raw/0@") || !strings.Contains(r.out, "mqtt:s/k") {
		t.Fatalf("trace: exit %d\n%s\n%s", r.code, r.out, r.err)
	}
	r = run(t, fx.env, "", "trace", "in.refined", "--key", "k", "-o", "json")
	var chains []struct {
		Hops []struct{ Record string }
		End  string
	}
	if err := json.Unmarshal([]byte(r.out), &chains); err != nil || len(chains) != 1 || len(chains[0].Hops) != 2 || chains[0].End != "origin" {
		t.Fatalf("trace --key: exit %d, %v\n%s", r.code, err, r.out)
	}
	if r = run(t, fx.env, "", "trace", "in.refined/0@999"); r.code != exitcode.Refused {
		t.Fatalf("a record that is not there: exit %d\n%s", r.code, r.err)
	}
	if r = run(t, fx.env, "", "trace", "in.refined/x@1"); r.code != exitcode.Usage {
		t.Fatalf("a bad place: exit %d\n%s", r.code, r.err)
	}
}
