package transformer_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/buildinfo"
	"github.com/flecht-dev/flecht/internal/lineage"
	"github.com/flecht-dev/flecht/internal/metrics"
	"github.com/flecht-dev/flecht/internal/module"
	"github.com/flecht-dev/flecht/internal/module/moduletest"
	"github.com/flecht-dev/flecht/internal/stagefile"
	"github.com/flecht-dev/flecht/internal/transformer"
)

// The runner's side of WebAssembly modules: the same exactly-once
// contract as a builtin, with the module's instances per task.

func moduleStage(t *testing.T, app, wasm, output, extra string) *stagefile.Stage {
	t.Helper()
	return stageFile(t, fmt.Sprintf(`
application_id: %s
kind: transformer
input_topics: [raw]
max_poll_records: 100
transform:
  module: %s
  output_topics: [%s]
%s`, app, wasm, output, extra))
}

// startModule runs st's module.
func (f *fixture) startModule(st *stagefile.Stage, stateDir, clientID string) *running {
	f.t.Helper()
	m := st.Transform.Module
	mod, err := module.Load(context.Background(), module.Spec{Path: m.Path, OutputTopics: m.OutputTopics, ApplicationID: st.ApplicationID, Stateless: m.Stateless},
		module.Options{Log: testLogger(f.t)})
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { mod.Close(context.Background()) })
	return f.startWith(st, stateDir, clientID, module.NewTransformer(mod))
}

// The count module writes what the count builtin writes, byte for byte:
// outputs and changelog, over canonical and non-canonical values alike.
func TestModuleCountWritesTheBuiltinsBytes(t *testing.T) {
	f := newFixture(t)
	f.topics(3, "raw", "by-builtin", "by-module")
	values := []string{
		`{"t":20}`, `{"b":1,"a":2}`, `{"n":1e2,"m":-0,"f":1.50}`, `{"s":"ü\u00e9\n\"x\"","deep":{"z":[1,{"y":null}]}}`,
		`{}`, ``, `{"seq":99,"keep":true}`, `  {"spaced" : 1 }  `, `{"big":12345678901234567890}`, `{"esc":"\u001f<>&"}`,
	}
	var recs []*kgo.Record
	for i := range 60 {
		v := []byte(values[i%len(values)])
		if i%13 == 12 {
			v = nil // a tombstone: no output, no state change
		}
		recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, "k-%d", i%7), Value: v})
	}
	f.produce("raw", recs...)
	builtin := f.start(stageFile(t, `
application_id: by-builtin
kind: transformer
input_topics: [raw]
transform: {builtin: count, output_topic: by-builtin}
`), t.TempDir(), "b")
	wasm := moduletest.Example(t, "count")
	mod := f.startModule(moduleStage(t, "by-module", wasm, "by-module", ""), t.TempDir(), "m")
	want := 60 - 60/13
	waitFor(t, 60*time.Second, "both stages' outputs", func() bool {
		return len(f.read("by-builtin")) >= want && len(f.read("by-module")) >= want
	})
	builtin.stop(t)
	mod.stop(t)
	a, b := byKey(f.read("by-builtin")), byKey(f.read("by-module"))
	if len(a) != 7 || len(b) != 7 {
		t.Fatalf("keys: builtin %d, module %d", len(a), len(b))
	}
	for k, vs := range a {
		if strings.Join(vs, "\n") != strings.Join(b[k], "\n") {
			t.Errorf("key %s:\nbuiltin %q\nmodule  %q", k, vs, b[k])
		}
	}
	ca, cb := latest(f.read("by-builtin-changelog")), latest(f.read("by-module-changelog"))
	if fmt.Sprint(ca) != fmt.Sprint(cb) || len(ca) != 7 {
		t.Errorf("changelogs differ:\nbuiltin %v\nmodule  %v", ca, cb)
	}
	// Each names its own logic: the module by its file's sha256.
	code, err := os.ReadFile(wasm)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(code)
	for topic, logic := range map[string]string{
		"by-module":  lineage.ModuleLogic(hex.EncodeToString(sum[:])),
		"by-builtin": lineage.BuiltinLogic("count", buildinfo.Read(debug.ReadBuildInfo).Version),
	} {
		for _, o := range f.read(topic) {
			if got := lineageOf(o)[lineage.HeaderLogic]; len(got) != 1 || got[0] != logic {
				t.Fatalf("an output to %s names the logic %q, want %q", topic, got, logic)
			}
		}
	}
}

func byKey(recs []*kgo.Record) map[string][]string {
	out := map[string][]string{}
	for _, r := range recs {
		out[string(r.Key)] = append(out[string(r.Key)], string(r.Value))
	}
	return out
}

func latest(recs []*kgo.Record) map[string]string {
	out := map[string]string{}
	for _, r := range recs {
		out[string(r.Key)] = string(r.Value)
	}
	return out
}

func TestModuleExactlyOnceAcrossRestarts(t *testing.T) {
	f := newFixture(t)
	st := moduleStage(t, "mod-app", moduletest.Example(t, "count"), "refined", "")
	exactlyOnceAcrossRestarts(t, f, "mod-app", func(dir, client string) *running { return f.startModule(st, dir, client) })
}

// A record the module rejects follows invalid_messages like one that does
// not decode.
func TestModuleRejectionsFollowThePolicy(t *testing.T) {
	bad := []*kgo.Record{
		{Key: []byte("k1"), Value: []byte(`{"ok":1}`)},
		{Key: []byte("k1"), Value: []byte(`[1,2]`)}, // count rejects a value that is not an object
		{Key: []byte("k1"), Value: []byte(`{"ok":2}`)},
	}
	outcome := map[string]string{"crash": "raised", "skip": "skipped", "dlq": "dead_lettered"}
	for _, policy := range []string{"crash", "skip", "dlq"} {
		t.Run(policy, func(t *testing.T) {
			f := newFixture(t)
			f.topic("raw", 1)
			f.topic("refined", 1)
			st := moduleStage(t, "mod-app", moduletest.Example(t, "count"), "refined", "invalid_messages: "+policy+"\n")
			f.produce("raw", bad...)
			r := f.startModule(st, t.TempDir(), "c")
			if policy == "crash" {
				select {
				case err := <-r.done:
					var inv *transformer.InvalidMessageError
					if !errorsAs(err, &inv) || inv.Offset != 1 {
						t.Fatalf("want InvalidMessageError at offset 1, got %v", err)
					}
					r.done <- err
				case <-time.After(30 * time.Second):
					t.Fatal("crash policy did not stop the runner")
				}
				if n := len(f.read("refined")); n != 0 {
					t.Errorf("%d outputs committed despite the crash", n)
				}
			} else {
				waitFor(t, 30*time.Second, "offset 3 committed", func() bool { return f.committed("mod-app", "raw", 0) == 3 })
				out := f.read("refined")
				if len(out) != 2 || string(out[1].Value) != `{"ok":2,"seq":2}` {
					t.Fatalf("outputs %v: the rejected record must leave the state alone", out)
				}
				if policy == "dlq" {
					if dl := f.read("raw.dlq"); len(dl) != 1 || string(dl[0].Value) != `[1,2]` {
						t.Fatalf("dlq holds %v", dl)
					}
				}
				r.stop(t)
			}
			if got := metrics.Value(r.obs.MessagesInvalid.WithLabelValues(outcome[policy], "raw")); got != 1 {
				t.Errorf("messages_invalid_total{outcome=%q} = %v, want 1", outcome[policy], got)
			}
		})
	}
}

// A module failing on a record stops the stage, naming the module and the
// record, and nothing of its task's open transaction commits: the records
// before it in the same transaction are read again after a fix.
func TestModuleFailureCommitsNothing(t *testing.T) {
	f := newFixture(t)
	f.topic("raw", 1)
	f.topic("refined", 1)
	var recs []*kgo.Record
	for i := range 5 {
		recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, `{"i":%d}`, i)})
	}
	recs = append(recs, &kgo.Record{Key: []byte("k9"), Value: []byte(`{"do":"fail"}`)})
	f.produce("raw", recs...)
	wasm := moduletest.Build(t, filepath.Join("..", "module", "testdata", "modules"), "./misbehave")
	r := f.startModule(moduleStage(t, "mod-app", wasm, "refined", "commit_interval: 10s\n"), t.TempDir(), "c")
	err := stopsWithin(t, r, 30*time.Second, "the failing module did not stop the runner")
	for _, w := range []string{"module misbehave.wasm (sha256 ", "failed on raw/0@5: asked to fail"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Fatalf("error %v lacks %q", err, w)
		}
	}
	if n := len(f.read("refined")); n != 0 {
		t.Errorf("%d outputs committed despite the failure", n)
	}
	if at := f.committed("mod-app", "raw", 0); at > 0 {
		t.Errorf("offset %d committed despite the failure", at)
	}
}

// What a module answers is never the cluster's fault: an output or a
// state cut short (`{"a":`, which decodes to io.ErrUnexpectedEOF, as a
// broken connection does) stops the stage at once, naming the module and
// the record, instead of being retried as a cluster failure.
func TestModuleTruncatedJSONStopsTheStage(t *testing.T) {
	for do, want := range map[string]string{
		"badjson":  "has a value that is not a JSON object: not JSON",
		"cutstate": "its new state is not a JSON object: not JSON",
	} {
		t.Run(do, func(t *testing.T) {
			f := newFixture(t)
			f.topics(1, "raw", "refined")
			f.produce("raw", &kgo.Record{Key: []byte("k0"), Value: []byte(`{"i":0}`)},
				&kgo.Record{Key: []byte("k1"), Value: []byte(`{"do":"` + do + `"}`)})
			wasm := moduletest.Build(t, filepath.Join("..", "module", "testdata", "modules"), "./misbehave")
			r := f.startModule(moduleStage(t, "mod-app", wasm, "refined", ""), t.TempDir(), "c")
			err := stopsWithin(t, r, 20*time.Second, "a module's truncated JSON did not stop the stage: retried as a cluster failure")
			var own *transformer.TransformerError
			if !errorsAs(err, &own) {
				t.Errorf("error %v is not a TransformerError", err)
			}
			for _, w := range []string{"module misbehave.wasm (sha256 ", "on raw/0@1", want} {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("error %v lacks %q", err, w)
				}
			}
			if n := len(f.read("refined")); n != 0 {
				t.Errorf("%d outputs committed despite the failure", n)
			}
		})
	}
}

// State a module may not set (in a stateless stage, or for a tombstone
// that has no state key) stops the stage naming the module, the start of
// its sha256 and the record.
func TestModuleStateErrorsNameTheModule(t *testing.T) {
	for _, tc := range []struct {
		name, extra, want string
		rec               *kgo.Record
	}{
		{"stateless", "  stateless: true\n", "set state, but the stage is stateless", &kgo.Record{Key: []byte("k"), Value: []byte(`{"i":1}`)}},
		{"tombstone", "state_key: \"{key}/{value.d}\"\n", "set state for a tombstone, which has no state key", &kgo.Record{Key: []byte("settomb")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.topics(1, "raw", "refined")
			f.produce("raw", tc.rec)
			wasm := moduletest.Build(t, filepath.Join("..", "module", "testdata", "modules"), "./misbehave")
			r := f.startModule(moduleStage(t, "mod-app", wasm, "refined", tc.extra), t.TempDir(), "c")
			err := stopsWithin(t, r, 30*time.Second, "the stage did not stop")
			var own *transformer.TransformerError
			if !errorsAs(err, &own) {
				t.Errorf("error %v is not a TransformerError", err)
			}
			for _, w := range []string{"module misbehave.wasm (sha256 ", "on raw/0@0", tc.want} {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("error %v lacks %q", err, w)
				}
			}
		})
	}
}

// stopsWithin waits for the runner to stop on its own and returns its
// error; past within the test fails, saying why that matters.
func stopsWithin(t *testing.T, r *running, within time.Duration, why string) error {
	t.Helper()
	select {
	case err := <-r.done:
		r.done <- err
		return err
	case <-time.After(within):
		t.Fatal(why)
		return nil
	}
}
