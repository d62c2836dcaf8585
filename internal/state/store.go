// Package state is a stage task's local state: a Pebble store holding the
// latest state per key, rebuilt from the task's changelog partition whenever
// the task starts. The changelog is the source of truth; the store is a
// cache that makes reads cheap, so it is wiped on start and on revoke and
// never written ahead of a committed transaction.
package state

import (
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/cockroachdb/pebble/v2"
)

// Store is one task's Pebble store.
type Store struct {
	db    *pebble.DB
	dir   string
	cache interface{ Unref() }
}

// Open creates a fresh store in dir, removing whatever an earlier run left
// there: state is always restored from the changelog, never trusted from
// disk.
func Open(dir string, log *slog.Logger) (*Store, error) {
	if err := os.RemoveAll(dir); err != nil {
		return nil, fmt.Errorf("state: clearing %s: %w", dir, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("state: creating %s: %w", dir, err)
	}
	cache := pebble.NewCache(16 << 20)
	opts := &pebble.Options{
		// The changelog is the durable copy; a WAL would only double the
		// writes of a store that is rebuilt after every crash anyway.
		DisableWAL:   true,
		Cache:        cache,
		MemTableSize: 8 << 20,
		Logger:       pebbleLogger{log},
	}
	db, err := pebble.Open(dir, opts)
	if err != nil {
		cache.Unref()
		return nil, fmt.Errorf("state: opening pebble in %s: %w", dir, err)
	}
	return &Store{db: db, dir: dir, cache: cache}, nil
}

// Dir is where the store lives.
func (s *Store) Dir() string { return s.dir }

// Get returns the stored value of key, if any.
func (s *Store) Get(key string) ([]byte, bool, error) {
	v, closer, err := s.db.Get([]byte(key))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("state: get: %w", err)
	}
	out := append([]byte(nil), v...)
	return out, true, closer.Close()
}

// Write is one change: Value nil deletes the key.
type Write struct {
	Key   string
	Value []byte
}

// Apply writes changes in one batch.
func (s *Store) Apply(writes []Write) error {
	if len(writes) == 0 {
		return nil
	}
	b := s.db.NewBatch()
	defer b.Close()
	for _, w := range writes {
		var err error
		if w.Value == nil {
			err = b.Delete([]byte(w.Key), nil)
		} else {
			err = b.Set([]byte(w.Key), w.Value, nil)
		}
		if err != nil {
			return fmt.Errorf("state: batch: %w", err)
		}
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("state: commit: %w", err)
	}
	return nil
}

// loader writes a restore into the store in large batches, in changelog
// order: a later write of a key in the same batch wins, as in the log, so
// no deduplication is needed on the way in.
type loader struct {
	s *Store
	b *pebble.Batch
}

// loaderBatchBytes is how much a restore batch holds before it commits.
const loaderBatchBytes = 4 << 20

func (s *Store) loader() *loader { return &loader{s: s, b: s.db.NewBatch()} }

// put sets key to value, or deletes it when value is nil. Both are copied.
func (l *loader) put(key, value []byte) error {
	var err error
	if value == nil {
		err = l.b.Delete(key, nil)
	} else {
		err = l.b.Set(key, value, nil)
	}
	if err != nil {
		return fmt.Errorf("state: batch: %w", err)
	}
	if l.b.Len() >= loaderBatchBytes {
		return l.flush()
	}
	return nil
}

// flush commits what the batch holds and starts the next.
func (l *loader) flush() error {
	if l.b.Empty() {
		return nil
	}
	if err := l.b.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("state: commit: %w", err)
	}
	l.b.Reset()
	return nil
}

func (l *loader) close() { _ = l.b.Close() }

// Count returns the number of keys (tests and diagnostics; it scans).
func (s *Store) Count() (int, error) {
	it, err := s.db.NewIter(nil)
	if err != nil {
		return 0, err
	}
	n := 0
	for it.First(); it.Valid(); it.Next() {
		n++
	}
	return n, it.Close()
}

// Close closes the store and keeps its files.
func (s *Store) Close() error {
	if s.db == nil {
		return nil
	}
	err := s.db.Close()
	s.db = nil
	s.cache.Unref()
	return err
}

// Destroy closes the store and removes its directory (revoke).
func (s *Store) Destroy() error {
	err := s.Close()
	if rmErr := os.RemoveAll(s.dir); err == nil {
		err = rmErr
	}
	return err
}

// pebbleLogger sends Pebble's chatter to slog at debug level; Fatalf still
// aborts, as Pebble requires.
type pebbleLogger struct{ log *slog.Logger }

func (l pebbleLogger) Infof(format string, args ...any) {
	if l.log != nil {
		l.log.Debug("pebble: " + fmt.Sprintf(format, args...))
	}
}

func (l pebbleLogger) Errorf(format string, args ...any) {
	if l.log != nil {
		l.log.Error("pebble: " + fmt.Sprintf(format, args...))
	}
}

func (l pebbleLogger) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf("pebble: "+format, args...))
}
