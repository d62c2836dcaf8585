package cli

import (
	"errors"
	"io/fs"
	"log/slog"

	"github.com/flecht-dev/flecht/internal/exitcode"

	"github.com/flecht-dev/flecht/internal/metrics"
	"github.com/flecht-dev/flecht/internal/secret"
)

// loadRunKeyring loads the keyring named by --keyring or FLECHT_KEYRING, if
// any, and publishes its kids as flechtwerk_keyring_keys_loaded{kid}, which
// `flecht keys check` reads before a key is promoted (reader-first).
func loadRunKeyring(opts *RunOptions, obs *metrics.Observer, log *slog.Logger) (*secret.Keyring, error) {
	path := opts.Keyring
	if path == "" {
		path = opts.Factory.Getenv("FLECHT_KEYRING")
	}
	if path == "" {
		return nil, nil
	}
	kr, warnings, err := secret.Load(path, secret.FileLog(log),
		keyringPassword(passwordFilePath(opts.PasswordFile, opts.Factory.Getenv), opts.Factory.IO))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, exitcode.UsageError(err) // a missing file, as everywhere
	}
	if err != nil {
		return nil, err
	}
	for _, w := range warnings {
		log.Warn(w)
	}
	obs.KeyringLoaded(kr.Kids())
	return kr, nil
}
