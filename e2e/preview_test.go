//go:build e2e

package e2e

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/module/moduletest"
	"github.com/flecht-dev/flecht/internal/preview"
)

// flecht preview on the real broker: a changed module reports exactly
// the outputs the change touches, computed here from the input; the same
// module, and the module rebuilt, report nothing.
func TestPreviewOfAChangedModule(t *testing.T) {
	const partitions, records = 3, 2000
	in, out := topicName(t, "raw"), topicName(t, "out")
	createTopic(t, in, partitions, nil)
	createTopic(t, out, partitions, nil)
	cl := inputProducer(t)
	var recs []*kgo.Record
	var changed, gone, same int64
	for i := range records {
		key := fmt.Sprintf("k-%d", i%7)
		value := fmt.Sprintf(`{"i":%d}`, i)
		switch {
		case i%10 == 0:
			value = fmt.Sprintf(`{"drop":true,"i":%d}`, i)
			gone++
		case key == "k-3":
			changed++
		default:
			same++
		}
		recs = append(recs, &kgo.Record{Topic: in, Key: []byte(key), Value: []byte(value), Partition: kafkax.Partition([]byte(key), partitions)})
	}
	if err := cl.ProduceSync(testCtx(t, time.Minute), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	count := moduletest.Example(t, "count")
	stage := moduleStageFile(t, "preview-app", in, out, count, "")
	changedWasm := moduletest.Build(t, filepath.Join(repoRoot, "internal", "preview", "testdata", "modules"), "./countflag")
	env := append(cacheEnv(t), "FLECHT_BROKERS="+brokers, "NO_COLOR=1", "HOME="+t.TempDir())

	stdout, stderr, code := runFlechtEnv(t, env, "", "preview", "-f", stage, "--module", changedWasm, "-o", "json")
	if code != 4 {
		t.Fatalf("a changed module: exit %d, want 4\n%s%s", code, stdout, stderr)
	}
	rep := decodeJSON[preview.Report](t, stdout)
	want := preview.TopicCounts{Topic: out, Identical: same, Changed: changed, OnlyCurrent: gone}
	if rep.Inputs != records || len(rep.Topics) != 1 || rep.Topics[0] != want {
		t.Errorf("read %d inputs, topics %+v; want %d and %+v", rep.Inputs, rep.Topics, records, want)
	}
	if len(rep.Fields) != 1 || rep.Fields[0] != (preview.FieldCount{Path: "value.flag", Count: changed}) || rep.State.Keys != 0 {
		t.Errorf("changed fields %+v, %d state keys differ; want value.flag × %d and none", rep.Fields, rep.State.Keys, changed)
	}

	stdout, stderr, code = runFlechtEnv(t, env, "", "preview", "-f", stage, "--module", count)
	if code != 0 {
		t.Fatalf("the same module: exit %d, want 0\n%s%s", code, stdout, stderr)
	}
	rebuilt := moduletest.Build(t, filepath.Join(repoRoot, "examples", "modules"), "github.com/flecht-dev/flecht/examples/modules/count")
	stdout, stderr, code = runFlechtEnv(t, env, "", "preview", "-f", stage, "--module", rebuilt, "-o", "json")
	if code != 0 || !decodeJSON[preview.Report](t, stdout).Identical {
		t.Fatalf("the module rebuilt: exit %d, want 0\n%s%s", code, stdout, stderr)
	}
}
