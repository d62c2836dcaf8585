// Package atomicfile writes a file so that a reader sees the old file or
// the new one, never part of either, and a crash leaves no half-written
// file under the name: the keyring's saves, and the files the keys verbs
// write beside it.
package atomicfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// Options choose how the file is published.
type Options struct {
	// Replace publishes with a rename over an existing file; without it a
	// hard link publishes, which the kernel refuses when the path exists
	// (an error matching fs.ErrExist), so no other writer's file is lost.
	Replace bool
	// TempPattern names the temporary file in the path's directory
	// (os.CreateTemp; default ".NAME.tmp-*").
	TempPattern string
	// BeforePublish, when set, runs once the temporary file is written and
	// synced, before it is published (tests inject a crash there).
	BeforePublish func(tmp string) error
}

// Write writes data to path with mode perm: a temporary file in the same
// directory, fsync, publish (rename or link), fsync the directory. On a
// failure the old file, if any, is untouched and no temporary is left.
func Write(path string, data []byte, perm os.FileMode, o Options) error {
	dir := filepath.Dir(path)
	pattern := o.TempPattern
	if pattern == "" {
		pattern = "." + filepath.Base(path) + ".tmp-*"
	}
	tmp, err := writeTemp(dir, pattern, data, perm)
	if err != nil {
		return err
	}
	// After a rename the temporary name is gone; after a link it is a
	// second name; after a failure it should not stay: remove it in every
	// case.
	defer os.Remove(tmp)
	if o.BeforePublish != nil {
		if err := o.BeforePublish(tmp); err != nil {
			return err
		}
	}
	if err := publish(tmp, path, o.Replace); err != nil {
		return err
	}
	return SyncDir(dir)
}

func publish(tmp, path string, replace bool) error {
	if replace {
		return os.Rename(tmp, path)
	}
	err := os.Link(tmp, path)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, fs.ErrExist):
		return &fs.PathError{Op: "create", Path: path, Err: fs.ErrExist}
	}
	// A file system without hard links: check again, then rename.
	if _, statErr := os.Lstat(path); statErr == nil {
		return &fs.PathError{Op: "create", Path: path, Err: fs.ErrExist}
	}
	return os.Rename(tmp, path)
}

// writeTemp writes data to a new file in dir with mode perm and syncs it.
// On failure nothing is left behind.
func writeTemp(dir, pattern string, data []byte, perm os.FileMode) (name string, err error) {
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return "", err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err = f.Chmod(perm); err != nil {
		return "", err
	}
	if _, err = f.Write(data); err != nil {
		return "", err
	}
	if err = f.Sync(); err != nil {
		return "", err
	}
	return f.Name(), f.Close()
}

// SyncDir makes a rename or link durable: without it a power cut can
// forget the new directory entry.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// SameFile reports whether a and b name one file: the same inode when
// both exist, else the same absolute path.
func SameFile(a, b string) bool {
	fa, errA := os.Stat(a)
	fb, errB := os.Stat(b)
	if errA == nil && errB == nil {
		return os.SameFile(fa, fb)
	}
	absA, errA := filepath.Abs(a)
	absB, errB := filepath.Abs(b)
	return errA == nil && errB == nil && absA == absB
}
