package secret

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/flecht-dev/flecht/internal/atomicfile"
	"github.com/flecht-dev/flecht/internal/boundedread"
	"github.com/flecht-dev/flecht/internal/exitcode"
)

// FileOption configures Load, Save, Create and Lock.
type FileOption func(*fileConfig)

type fileConfig struct {
	log      *slog.Logger
	password PasswordFunc
}

// FileLog sends the file operations' notes (leftovers removed, a stale lock
// broken) to l instead of slog.Default().
func FileLog(l *slog.Logger) FileOption { return func(c *fileConfig) { c.log = l } }

// WithPassword gives Load the source of the password of a protected keyring
// file; it is called only when the file is protected.
func WithPassword(p PasswordFunc) FileOption { return func(c *fileConfig) { c.password = p } }

func fileOpts(opts []FileOption) fileConfig {
	c := fileConfig{log: slog.Default()}
	for _, o := range opts {
		o(&c)
	}
	return c
}

// Load reads and validates a keyring file, plain or password-protected
// (ReadKeyring; the password comes from WithPassword, and a protected file
// without one is KindKeyringPassword). The keyring remembers a protected
// file's password, so Save writes it protected again. A file that group or
// others may read or write is loaded, with a warning to show the operator:
// refusing it would turn a permissions slip into an outage, saying nothing
// would hide it. Temporary files a killed writer left beside it are removed
// (see removeStale).
func Load(path string, opts ...FileOption) (kr *Keyring, warnings []string, err error) {
	c := fileOpts(opts)
	doc, err := ReadKeyringFile(path)
	if err != nil {
		var e *Error
		if errors.As(err, &e) {
			e.Detail = path + ": " + e.Detail
		}
		return nil, nil, err
	}
	if target, err := filepath.EvalSymlinks(path); err == nil {
		removeStale(target, c.log)
	}
	kr, err = ReadKeyring(doc, c.password)
	if err != nil {
		var e *Error
		if errors.As(err, &e) {
			e.Detail = path + ": " + e.Detail
		}
		return nil, nil, err
	}
	if w := boundedread.ModeWarning(KeyringFile.Name, path); w != "" {
		warnings = append(warnings, w)
	}
	return kr, warnings, nil
}

// MaxKeyringFileBytes bounds what is read of a keyring file: a keyring of
// thousands of keys fits many times over, and a path that names something
// else (a log, /dev/zero) is refused without being read into memory.
const MaxKeyringFileBytes = 16 << 20

// KeyringFile is what a keyring file is to a read.
var KeyringFile = boundedread.Kind{Name: "keyring file", Limit: MaxKeyringFileBytes}

// ReadKeyringFile reads the keyring file at path, up to
// MaxKeyringFileBytes: a larger file is KindKeyringInvalid, a missing one
// matches fs.ErrNotExist.
func ReadKeyringFile(path string) ([]byte, error) {
	return readKind(KeyringFile, path, func() error {
		return &Error{Kind: KindKeyringInvalid, Detail: fmt.Sprintf("larger than %d MiB: not a keyring file", MaxKeyringFileBytes>>20)}
	})
}

// readBounded reads at most limit bytes of the file at path (a pipe or a
// device as well, until a signal); tooLarge is the error for a file holding
// more.
func readBounded(path string, limit int64, tooLarge func() error) ([]byte, error) {
	return readKind(boundedread.Kind{Name: "file", Limit: limit}, path, tooLarge)
}

// readKind reads path as boundedread does; a file too large is tooLarge(),
// a usage error (exit 2) as every too-large file is.
func readKind(k boundedread.Kind, path string, tooLarge func() error) ([]byte, error) {
	b, err := k.ReadFile(path)
	if errors.Is(err, boundedread.ErrTooLarge) {
		return nil, exitcode.UsageError(tooLarge())
	}
	return b, err
}

// beforeRename, when set by a test, runs after the temporary file is written
// and synced and before it replaces the keyring: a crash injected there must
// leave the old file whole.
var beforeRename func(tmp string) error

// Save writes the keyring's Document (protected when Protected) to path
// atomically with mode 0600: a temporary file in the same directory, fsync,
// rename over path, fsync the directory.
// A reader sees the old file or the new one, never half of either, and a
// failure leaves the old file and no temporary behind. A symlink at path (a
// mounted secret) is followed, so the link keeps pointing at the keyring.
func (kr *Keyring) Save(path string, opts ...FileOption) (err error) {
	c := fileOpts(opts)
	doc, err := kr.Document()
	if err != nil {
		return err
	}
	target := path
	if resolved, err := filepath.EvalSymlinks(path); err == nil {
		target = resolved
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	removeStale(target, c.log)
	return atomicfile.Write(target, doc, 0o600, atomicfile.Options{Replace: true,
		TempPattern: tempPrefix(target, tmpTag) + "*", BeforePublish: beforeRename})
}

// Create writes the keyring to path only if path does not exist, without a
// window in which another writer's file could be replaced: the complete
// document is written and synced under a private name in the same
// directory (mode 0600), and a hard link publishes it under path, which the
// kernel refuses when path exists. Where hard links are not supported, it
// falls back to a rename after checking again. An existing path is an
// error that matches fs.ErrExist.
func (kr *Keyring) Create(path string, opts ...FileOption) error {
	c := fileOpts(opts)
	doc, err := kr.Document()
	if err != nil {
		return err
	}
	removeStale(path, c.log)
	return atomicfile.Write(path, doc, 0o600, atomicfile.Options{TempPattern: tempPrefix(path, initTag) + "*"})
}

// Siblings of a keyring file K: the temporaries ".K.tmp-*" (Save),
// ".K.init-*" (Create) and "..K.init-*.tmp-*" (Create of earlier versions,
// which saved under the init name); the lock ".K.lock" (Lock) and a broken
// stale lock renamed aside, ".K.lock.stale-*".
const (
	tmpTag   = ".tmp-"
	initTag  = ".init-"
	lockTag  = ".lock"
	staleTag = ".stale-"
)

func tempPrefix(target, tag string) string { return "." + filepath.Base(target) + tag }

// staleAfter is how old a temporary sibling must be to be a leftover: a
// write takes milliseconds, so one this old has no live writer.
const staleAfter = time.Minute

// removeStale removes the temporary siblings of the keyring at target that
// a killed writer left behind: each holds a whole keyring, key bytes
// included, and a key removed since would survive there. Only regular
// files older than staleAfter go, so a write in progress is never touched.
// Failures are logged, never returned: the keyring itself is fine.
func removeStale(target string, log *slog.Logger) {
	dir, base := filepath.Split(target)
	if dir == "" {
		dir = "."
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !isTempSibling(e.Name(), base) || !e.Type().IsRegular() {
			continue
		}
		fi, err := e.Info()
		if err != nil || time.Since(fi.ModTime()) < staleAfter {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			log.Warn("could not remove a stale temporary keyring file", "path", p, "error", err)
			continue
		}
		log.Debug("removed a stale temporary keyring file left by an interrupted write", "path", p,
			"age", time.Since(fi.ModTime()).Round(time.Second))
	}
}

func isTempSibling(name, base string) bool {
	init := "." + base + initTag
	return strings.HasPrefix(name, "."+base+tmpTag) || strings.HasPrefix(name, init) ||
		strings.HasPrefix(name, "."+base+lockTag+staleTag) ||
		(strings.HasPrefix(name, "."+init) && strings.Contains(name[len(init)+1:], tmpTag))
}
