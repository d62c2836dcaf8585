package transformer_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/module/moduletest"
)

// What the runner finds wrong in a module's answer stops the stage with
// an error naming the module, its sha256 prefix and the record.
func TestModuleAnswerErrorsNameTheModule(t *testing.T) {
	wasm := moduletest.Build(t, filepath.Join("..", "module", "testdata", "modules"), "./misbehave")
	for _, tc := range []struct {
		name, value, extra, want string
	}{
		{"state in a stateless stage", `{"i":1}`, "  stateless: true\n", "set state, but the stage is stateless (transform.stateless: true)"},
		{"a partition the topic lacks", `{"do":"partition"}`, "", "message for refined partition 7: the topic has 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.topic("raw", 1)
			f.topic("refined", 1)
			f.produce("raw", &kgo.Record{Key: []byte("k"), Value: []byte(tc.value)})
			r := f.startModule(moduleStage(t, "label-app", wasm, "refined", tc.extra), t.TempDir(), "c")
			err := stopsWithin(t, r, 30*time.Second, "the module did not stop the runner")
			for _, w := range []string{"module misbehave.wasm (sha256 ", "raw/0@0", tc.want} {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Fatalf("error %v lacks %q", err, w)
				}
			}
		})
	}
}
