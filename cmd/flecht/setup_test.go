package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flecht-dev/flecht/internal/module/moduletest"
)

// A module whose setup loops without calling its host cannot be stopped:
// run exits 2, as for any module that cannot be set up, saying it ran over
// its time limit in its setup, before anything connects.
func TestSetupThatLoopsExits2(t *testing.T) {
	fx := newFixture(t)
	wasm := moduletest.Build(t, filepath.Join("..", "..", "internal", "module", "testdata", "modules"), "./setuploop")
	stage := filepath.Join(fx.dir, "loop.yaml")
	doc := "application_id: setup-loop\nkind: transformer\ninput_topics: [raw]\ntransform:\n  module: " + wasm + "\n  output_topics: [out]\n"
	if err := os.WriteFile(stage, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	// No broker listens there: the module is set up before run connects.
	_, errOut, code := fx.run(t, []string{"run", "-f", stage, "-b", "127.0.0.1:1"}, nil)
	if code != 2 {
		t.Errorf("exit %d, want 2", code)
	}
	for _, w := range []string{"module setuploop.wasm (sha256 ", "ran over its time limit in its setup (10s"} {
		if !strings.Contains(errOut, w) {
			t.Errorf("standard error lacks %q:\n%s", w, errOut)
		}
	}
	if strings.Contains(errOut, "no record") {
		t.Errorf("standard error names a record of a setup:\n%s", errOut)
	}
}
