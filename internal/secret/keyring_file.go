package secret

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Load reads and validates a keyring file. A file that group or others may
// read or write is loaded, with a warning to show the operator: refusing it
// would turn a permissions slip into an outage, saying nothing would hide it.
func Load(path string) (kr *Keyring, warnings []string, err error) {
	doc, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	kr, err = ParseKeyring(doc)
	if err != nil {
		var e *Error
		if errors.As(err, &e) {
			e.Detail = path + ": " + e.Detail
		}
		return nil, nil, err
	}
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
		warnings = append(warnings, fmt.Sprintf(
			"keyring file %s has mode %04o: group or others can access the keys; run chmod 600", path, fi.Mode().Perm()))
	}
	return kr, warnings, nil
}

// beforeRename, when set by a test, runs after the temporary file is written
// and synced and before it replaces the keyring: a crash injected there must
// leave the old file whole.
var beforeRename func(tmp string) error

// Save writes the keyring to path atomically with mode 0600: a temporary
// file in the same directory, fsync, rename over path, fsync the directory.
// A reader sees the old file or the new one, never half of either, and a
// failure leaves the old file and no temporary behind. A symlink at path (a
// mounted secret) is followed, so the link keeps pointing at the keyring.
func (kr *Keyring) Save(path string) (err error) {
	doc, err := kr.JWKS()
	if err != nil {
		return err
	}
	target := path
	if resolved, err := filepath.EvalSymlinks(path); err == nil {
		target = resolved
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	dir := filepath.Dir(target)
	f, err := os.CreateTemp(dir, "."+filepath.Base(target)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if err = f.Chmod(0o600); err != nil {
		return err
	}
	if _, err = f.Write(doc); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if beforeRename != nil {
		if err = beforeRename(tmp); err != nil {
			return err
		}
	}
	if err = os.Rename(tmp, target); err != nil {
		return err
	}
	return syncDir(dir)
}

// syncDir makes the rename durable: without it a power cut can forget the
// new directory entry.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
