package cli

import (
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/flecht-dev/flecht/internal/launch"
	"github.com/flecht-dev/flecht/internal/metrics"
	"github.com/flecht-dev/flecht/internal/secret"
	"github.com/flecht-dev/flecht/internal/ui"
)

// A stage started with a keyring publishes one keyring_keys_loaded series
// per kid: what `flecht keys check` scrapes before a promote.
func TestRunKeyringPublishesLoadedKids(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keyring.json")
	kr, err := secret.NewKeyring("old")
	if err != nil {
		t.Fatal(err)
	}
	if kr, err = kr.Add("new"); err != nil {
		t.Fatal(err)
	}
	if err := kr.Save(path); err != nil {
		t.Fatal(err)
	}
	io, _, _, _ := ui.Test()
	env := map[string]string{"FLECHT_KEYRING": path}
	opts := &RunOptions{Factory: &Factory{IO: io, Getenv: func(k string) string { return env[k] }}}
	obs := metrics.New(nil)
	if _, err := launch.New(launchOptions(opts)).LoadKeyring(obs, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	for _, kid := range []string{"old", "new"} {
		if v := metrics.Value(obs.KeysLoaded.WithLabelValues(kid)); v != 1 {
			t.Errorf("keyring_keys_loaded{kid=%q} = %v, want 1", kid, v)
		}
	}
	// No keyring named: nothing loaded, no error.
	opts.Factory.Getenv = func(string) string { return "" }
	if kr, err := launch.New(launchOptions(opts)).LoadKeyring(metrics.New(nil), slog.New(slog.DiscardHandler)); kr != nil || err != nil {
		t.Errorf("without a keyring: %v, %v", kr, err)
	}
}
