package transformer_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/module/moduletest"
)

// A module that sets state in a stateless stage stops the stage with an
// error naming the module, its sha256 prefix and the record.
func TestModuleStateInAStatelessStageNamesTheModule(t *testing.T) {
	f := newFixture(t)
	f.topic("raw", 1)
	f.topic("refined", 1)
	f.produce("raw", &kgo.Record{Key: []byte("k"), Value: []byte(`{"i":1}`)})
	wasm := moduletest.Build(t, filepath.Join("..", "module", "testdata", "modules"), "./misbehave")
	r := f.startModule(moduleStage(t, "stateless-app", wasm, "refined", "  stateless: true\n"), t.TempDir(), "c")
	select {
	case err := <-r.done:
		r.done <- err
		for _, w := range []string{"module misbehave.wasm (sha256 ", "raw/0@0", "the stage is stateless (transform.stateless: true)"} {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Fatalf("error %v lacks %q", err, w)
			}
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the module did not stop the runner")
	}
}
