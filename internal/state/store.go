// Package state is a stage task's local state: a Pebble store holding the
// latest state per key of one changelog partition. The changelog is the
// source of truth; the store is a cache that makes reads cheap and is never
// written ahead of a committed transaction.
//
// A store is kept across restarts and crashes. Beside the state it records,
// in the same Pebble batch, a checkpoint: what it belongs to (application
// id, partition, the changelog topic's ID) and the changelog offset up to
// which it holds the committed state. A task that starts again reads only
// the changelog from that offset on (see Prepare for when it cannot).
package state

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// Store is one task's Pebble store.
type Store struct {
	db    *pebble.DB
	dir   string
	cache interface{ Unref() }
}

// Keys live under one prefix byte and the store's own records under
// another, so that no state key, whatever its bytes, can collide with the
// checkpoint.
const (
	dataPrefix = 'k'
	metaPrefix = 'm'
)

var (
	identityKey   = []byte{metaPrefix, 'i'}
	checkpointKey = []byte{metaPrefix, 'c'}
)

func dataKey(key string) []byte {
	k := make([]byte, 1+len(key))
	k[0] = dataPrefix
	copy(k[1:], key)
	return k
}

// Open opens the store in dir as an earlier run left it, creating an empty
// one where there is none. A store Pebble cannot open (a corrupt or
// foreign directory) is an error; Wipe, then Open again.
func Open(dir string, log *slog.Logger) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("state: creating %s: %w", dir, err)
	}
	cache := pebble.NewCache(16 << 20)
	opts := &pebble.Options{
		// The write-ahead log is what makes a store worth keeping after a
		// crash: Apply syncs it, so a killed process (or machine) keeps
		// every batch applied and never a torn one. A sync costs about
		// 0.3 ms per commit where a memtable flush per commit costs 5 ms
		// and an unsynced log loses its last unwritten block, hundreds of
		// records the next start must read again (BenchmarkDurability).
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

// Wipe removes the store in dir, if any.
func Wipe(dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("state: clearing %s: %w", dir, err)
	}
	return nil
}

// Dir is where the store lives.
func (s *Store) Dir() string { return s.dir }

// Get returns the stored value of key, if any.
func (s *Store) Get(key string) ([]byte, bool, error) { return s.read(dataKey(key)) }

// read returns a copy of the value under a store key, if any.
func (s *Store) read(key []byte) ([]byte, bool, error) {
	v, closer, err := s.db.Get(key)
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

// Position is where a store stands in its changelog partition: it holds
// the committed state of every record below Offset. Since is the earliest
// time at which a record at or after Offset may have been written that the
// store has not seen; a tombstone written after it stays in a compacted log
// for at least delete.retention.ms, which is what lets a restart trust the
// store only for that long after Since.
type Position struct {
	Offset int64
	Since  time.Time
}

// Apply writes changes and the position they bring the store to, in one
// batch, synced to the log: after a crash the store holds either both or
// neither.
func (s *Store) Apply(writes []Write, at Position) error {
	b := s.db.NewBatch()
	defer b.Close()
	var key []byte // reused: a batch copies what it is given
	for _, w := range writes {
		key = append(append(key[:0], dataPrefix), w.Key...)
		var err error
		if w.Value == nil {
			err = b.Delete(key, nil)
		} else {
			err = b.Set(key, w.Value, nil)
		}
		if err != nil {
			return fmt.Errorf("state: batch: %w", err)
		}
	}
	if err := b.Set(checkpointKey, encodePosition(at), nil); err != nil {
		return fmt.Errorf("state: batch: %w", err)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("state: commit: %w", err)
	}
	return nil
}

// Identity is what a store's content belongs to.
type Identity struct {
	ApplicationID string
	Partition     int32
	// TopicID is the changelog topic's Kafka topic ID: a topic deleted and
	// created again under the same name has another one.
	TopicID [16]byte
}

// Checkpoint is what a store recorded about itself.
type Checkpoint struct {
	Identity
	Position
}

// Checkpoint returns the store's checkpoint; ok is false for a store that
// has none (new, or written by a version that kept none). A checkpoint
// that does not decode is an error.
func (s *Store) Checkpoint() (cp Checkpoint, ok bool, err error) {
	id, hasID, err := s.read(identityKey)
	if err != nil || !hasID {
		return cp, false, err
	}
	pos, hasPos, err := s.read(checkpointKey)
	if err != nil || !hasPos {
		return cp, false, err
	}
	if cp.Identity, err = decodeIdentity(id); err != nil {
		return cp, false, err
	}
	if cp.Position, err = decodePosition(pos); err != nil {
		return cp, false, err
	}
	return cp, true, nil
}

// SetIdentity records what the store belongs to; call it on an empty store
// before its first Apply.
func (s *Store) SetIdentity(id Identity) error {
	if err := s.db.Set(identityKey, encodeIdentity(id), pebble.NoSync); err != nil {
		return fmt.Errorf("state: identity: %w", err)
	}
	return nil
}

// The encodings are the store's own, versioned by their first byte.
const encodingV1 = 1

func encodePosition(p Position) []byte {
	b := make([]byte, 17)
	b[0] = encodingV1
	binary.BigEndian.PutUint64(b[1:], uint64(p.Offset))
	binary.BigEndian.PutUint64(b[9:], uint64(p.Since.UnixNano()))
	return b
}

func decodePosition(b []byte) (Position, error) {
	if len(b) != 17 || b[0] != encodingV1 {
		return Position{}, errors.New("state: checkpoint position does not decode")
	}
	off := int64(binary.BigEndian.Uint64(b[1:]))
	if off < 0 {
		return Position{}, errors.New("state: checkpoint position does not decode")
	}
	return Position{Offset: off, Since: time.Unix(0, int64(binary.BigEndian.Uint64(b[9:])))}, nil
}

func encodeIdentity(id Identity) []byte {
	b := make([]byte, 0, 1+4+16+len(id.ApplicationID))
	b = append(b, encodingV1)
	b = binary.BigEndian.AppendUint32(b, uint32(id.Partition))
	b = append(b, id.TopicID[:]...)
	return append(b, id.ApplicationID...)
}

func decodeIdentity(b []byte) (Identity, error) {
	if len(b) < 21 || b[0] != encodingV1 {
		return Identity{}, errors.New("state: checkpoint identity does not decode")
	}
	var id Identity
	id.Partition = int32(binary.BigEndian.Uint32(b[1:]))
	copy(id.TopicID[:], b[5:21])
	id.ApplicationID = string(b[21:])
	return id, nil
}

// loader writes a restore into the store in large batches, in changelog
// order: a later write of a key in the same batch wins, as in the log, so
// no deduplication is needed on the way in. Each batch carries the
// position after its last record, so a restore cut short by a crash is
// resumed, not repeated.
type loader struct {
	s     *Store
	b     *pebble.Batch
	since time.Time
	next  int64
	key   []byte // reused: a batch copies what it is given
}

// loaderBatchBytes is how much a restore batch holds before it commits.
const loaderBatchBytes = 4 << 20

func (s *Store) loader(since time.Time) *loader {
	return &loader{s: s, b: s.db.NewBatch(), since: since}
}

// put sets key to value, or deletes it when value is nil, for the record
// at offset. Both are copied.
func (l *loader) put(key, value []byte, offset int64) error {
	l.key = append(append(l.key[:0], dataPrefix), key...)
	var err error
	if value == nil {
		err = l.b.Delete(l.key, nil)
	} else {
		err = l.b.Set(l.key, value, nil)
	}
	if err != nil {
		return fmt.Errorf("state: batch: %w", err)
	}
	l.next = offset + 1
	if l.b.Len() >= loaderBatchBytes {
		return l.flush(Position{Offset: l.next, Since: l.since}, false)
	}
	return nil
}

// flush commits what the batch holds with the position at, and starts the
// next batch. Only the last batch of a restore is synced: a crash that
// loses an earlier one makes the next start read a little more.
func (l *loader) flush(at Position, sync bool) error {
	if err := l.b.Set(checkpointKey, encodePosition(at), nil); err != nil {
		return fmt.Errorf("state: batch: %w", err)
	}
	opts := pebble.NoSync
	if sync {
		opts = pebble.Sync
	}
	if err := l.b.Commit(opts); err != nil {
		return fmt.Errorf("state: commit: %w", err)
	}
	l.b.Reset()
	return nil
}

func (l *loader) close() { _ = l.b.Close() }

// Each calls fn with every key and value, in key order (tests and
// diagnostics).
func (s *Store) Each(fn func(key string, value []byte) error) error {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{dataPrefix}, UpperBound: []byte{dataPrefix + 1}})
	if err != nil {
		return err
	}
	for it.First(); it.Valid(); it.Next() {
		if err := fn(string(it.Key()[1:]), it.Value()); err != nil {
			_ = it.Close()
			return err
		}
	}
	return it.Close()
}

// Count returns the number of keys (tests and diagnostics; it scans).
func (s *Store) Count() (int, error) {
	n := 0
	err := s.Each(func(string, []byte) error { n++; return nil })
	return n, err
}

// Close closes the store and keeps its files for the next start.
func (s *Store) Close() error {
	if s.db == nil {
		return nil
	}
	// Flushing the memtable makes the next open skip replaying the log.
	err := s.db.Flush()
	if cerr := s.db.Close(); err == nil {
		err = cerr
	}
	s.db = nil
	s.cache.Unref()
	return err
}

// Destroy closes the store and removes its directory.
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
