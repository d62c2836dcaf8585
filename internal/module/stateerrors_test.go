package module_test

import (
	"context"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/module"
	"github.com/flecht-dev/flecht/internal/statekey"
)

// State a stage cannot keep stops it with an error that names the
// module, its sha256 prefix and the record, as every module error does.
func TestStateItCannotKeepNamesTheModule(t *testing.T) {
	misbehave := testModule(t, "misbehave")
	byValue, err := statekey.Parse("{key}/{value.d}")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		spec     module.Spec
		template *statekey.Template
		rec      *kgo.Record
		want     string
	}{
		{"stateless stage", module.Spec{Path: misbehave, Stateless: true}, nil, rec("a", `{"i":1}`, 7),
			"it set state, but the stage is stateless (transform.stateless: true)"},
		{"tombstone without a state key", module.Spec{Path: misbehave}, byValue, rec("settomb", "", 7),
			"it set state for a tombstone, which has no state key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := load(t, tc.spec)
			o, err := module.NewOffline(context.Background(), m, tc.template)
			if err != nil {
				t.Fatal(err)
			}
			defer o.Close(context.Background())
			_, err = o.Run(context.Background(), []*kgo.Record{tc.rec})
			if err == nil {
				t.Fatal("no error")
			}
			label := "module misbehave.wasm (sha256 " + m.SHA256()[:12] + ")"
			for _, w := range []string{label, "in/2@7", tc.want} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}
