package module

import (
	"crypto/sha256"
	"encoding/binary"
	"math/rand/v2"

	"github.com/tetratelabs/wazero"
)

// The deterministic stand-ins for what a language runtime asks of WASI.
// A module sees the record's event time as the wall clock and random bytes
// seeded by the record's place in its topic, so a replay over the same
// input writes the same bytes; no file, socket, argument or environment
// variable reaches it.

// currentRecord is the record a batch call is working on, as the module's
// cursor says: what the clock and the random source read.
type currentRecord interface {
	// current returns the record's event time (ms) and its random seed;
	// ok is false outside a batch (at start and during setup).
	current() (eventTimeMs int64, seed [32]byte, ok bool)
	// halt ends an abandoned call (Instance.call): every stand-in calls it.
	halt()
}

// standIns configures an instance's WASI: the clock, sleeping, the random
// source, standard output and error.
func standIns(cfg wazero.ModuleConfig, cur currentRecord, initSeed [32]byte, stdout, stderr *logWriter) wazero.ModuleConfig {
	mono := new(int64)
	rnd := &recordRandom{cur: cur, initSeed: initSeed}
	return cfg.
		WithWalltime(func() (int64, int32) {
			cur.halt()
			ms, _, ok := cur.current()
			if !ok {
				return 0, 0 // the Unix epoch while no record is current
			}
			sec, rem := ms/1000, ms%1000
			if rem < 0 {
				sec, rem = sec-1, rem+1000
			}
			return sec, int32(rem) * 1_000_000
		}, 1_000_000).
		// The monotonic clock moves only when the module sleeps (and by a
		// nanosecond per reading, so it never stands still for a runtime
		// that waits for it to move): durations inside a module mean
		// nothing, and nothing depends on how fast the host is.
		WithNanotime(func() int64 { cur.halt(); *mono++; return *mono }, 1).
		WithNanosleep(func(ns int64) {
			cur.halt()
			if ns > 0 {
				*mono += ns
			}
		}).
		WithOsyield(cur.halt).
		WithRandSource(rnd).
		WithStdout(stdout).
		WithStderr(stderr)
}

// recordRandom is the random source: a ChaCha8 stream seeded by the
// current record, started again whenever the record changes, so each
// record's bytes are the same in every run.
type recordRandom struct {
	cur      currentRecord
	initSeed [32]byte
	seed     [32]byte
	started  bool
	stream   *rand.ChaCha8
}

func (r *recordRandom) Read(p []byte) (int, error) {
	r.cur.halt()
	seed := r.initSeed
	if _, s, ok := r.cur.current(); ok {
		seed = s
	}
	if !r.started || seed != r.seed {
		r.seed, r.started = seed, true
		r.stream = rand.NewChaCha8(seed)
	}
	return r.stream.Read(p)
}

// recordSeed is a record's random seed: its topic, partition and offset,
// which a replay reads again at the same place.
func recordSeed(topic string, partition int32, offset int64) [32]byte {
	h := sha256.New()
	h.Write([]byte("flecht record seed\x00"))
	h.Write([]byte(topic))
	var b [12]byte
	binary.LittleEndian.PutUint32(b[:4], uint32(partition))
	binary.LittleEndian.PutUint64(b[4:], uint64(offset))
	h.Write(b[:])
	var seed [32]byte
	h.Sum(seed[:0])
	return seed
}

// instanceSeed seeds what a module reads of randomness outside a record
// (a runtime's start-up): the same for every instance of one module.
func instanceSeed(moduleSHA256 string) [32]byte {
	return sha256.Sum256([]byte("flecht instance seed\x00" + moduleSHA256))
}
