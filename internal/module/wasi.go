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
// cursor says: what the clocks and the random source read.
type currentRecord interface {
	// current names the record: an id that changes whenever the record
	// does, and its event time (ms); ok is false outside a record (at
	// start, during setup, in a call that gives a buffer).
	current() (id uint64, eventTimeMs int64, ok bool)
	// seed is the current record's random seed.
	seed() [32]byte
	// halt ends an abandoned call (Instance.call): every stand-in calls it.
	halt()
}

// standIns configures an instance's WASI: the clocks, sleeping, the
// random source, standard output and error.
func standIns(cfg wazero.ModuleConfig, cur currentRecord, initSeed [32]byte, stdout, stderr *logWriter) wazero.ModuleConfig {
	clock := &recordClock{cur: cur}
	rnd := &recordRandom{cur: cur, initSeed: initSeed}
	return cfg.
		WithWalltime(func() (int64, int32) {
			cur.halt()
			_, ms, ok := cur.current()
			if !ok {
				return 0, 0 // the Unix epoch while no record is current
			}
			sec, rem := ms/1000, ms%1000
			if rem < 0 {
				sec, rem = sec-1, rem+1000
			}
			return sec, int32(rem) * 1_000_000
		}, 1_000_000).
		WithNanotime(func() int64 { cur.halt(); return clock.read(0) }, 1).
		WithNanosleep(func(ns int64) { cur.halt(); clock.read(max(ns, 0)) }).
		WithOsyield(cur.halt).
		WithRandSource(rnd).
		WithStdout(stdout).
		WithStderr(stderr)
}

// recordClock is the monotonic clock: a function of the record alone. On
// a record it starts at the record's event time (ns) and moves by a
// nanosecond per reading (so it never stands still for a runtime that
// waits for it to move) and by what the module sleeps; durations inside a
// module mean nothing, and nothing depends on how fast the host is or on
// the records before. Outside a record it reads on from where it stood
// when the last stretch outside a record began after a record: at start
// and in setup it counts from zero, and after setup it starts again from
// where setup left it each time.
type recordClock struct {
	cur     currentRecord
	id      uint64
	onRec   bool
	ns      int64
	setupNs int64 // where it stood when the first record came
	started bool  // a record has come
}

func (c *recordClock) read(sleep int64) int64 {
	id, ms, ok := c.cur.current()
	switch {
	case ok && (!c.onRec || id != c.id):
		if !c.started {
			c.setupNs, c.started = c.ns, true
		}
		c.ns, c.id, c.onRec = ms*1_000_000, id, true
	case !ok && c.onRec:
		c.ns, c.onRec = c.setupNs, false
	}
	c.ns += 1 + sleep
	return c.ns
}

// recordRandom is the random source: a ChaCha8 stream seeded by the
// current record, started again whenever the record changes, so each
// record's bytes are the same in every run. Outside a record it is seeded
// by the module, and started again whenever a record has come between.
type recordRandom struct {
	cur      currentRecord
	initSeed [32]byte
	id       uint64
	onRec    bool
	started  bool
	stream   *rand.ChaCha8
}

func (r *recordRandom) Read(p []byte) (int, error) {
	r.cur.halt()
	id, _, ok := r.cur.current()
	if !r.started || ok != r.onRec || (ok && id != r.id) {
		seed := r.initSeed
		if ok {
			seed = r.cur.seed()
		}
		r.stream = rand.NewChaCha8(seed)
		r.id, r.onRec, r.started = id, ok, true
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
