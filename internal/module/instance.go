package module

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/sys"

	"github.com/flecht-dev/flecht/sdk/abi"
)

// Instance is one task's instance of a module: its own memory, nothing
// shared with another task's. Not safe for concurrent use: a task calls
// it from its own goroutine.
type Instance struct {
	m         *Module
	partition int32
	mod       api.Module
	buffer    api.Function
	transform api.Function
	init      api.Function
	log       *moduleLog
	stdout    *logWriter
	stderr    *logWriter
	ctx       context.Context // carries the instance to the host functions

	bufPtr, bufCap uint32
	stack          []uint64

	// batch is the call in progress (nil between calls): the clock and the
	// random source read its current record.
	batch *Batch
	// broken is why the instance can no longer be called.
	broken error
	// abandoned: a call ran over its time limit; the next host function it
	// calls ends it (halt), and the instance is broken.
	abandoned atomic.Bool
	// memory backs the module's linear memory; Close releases it.
	memory *linearMemory
	// deadline is when the call in progress runs out of time (UnixNano,
	// 0 between calls); timer calls expire then.
	deadline atomic.Int64
	timer    *time.Timer
	// timerAt is when the timer fires (UnixNano), 0 when it is not armed.
	timerAt atomic.Int64
	// image is what the instance is reset to before each record (record
	// isolation: isolation.go), nil under task isolation; dirty says a
	// call ran since the last reset.
	image *instanceImage
	dirty bool
	// trustReset: the next reset copies back the pages known to be
	// written without counting the thread's faults; the caller checks
	// afterwards (Task.TransformBatch).
	trustReset bool
	// spliced is what json_set made in the call in progress (host.go).
	spliced splices
	// calls counts the batch calls, to tell their records apart.
	calls uint64
	// ready: the instance has started and is set up (stuckError).
	ready atomic.Bool
}

// Batch is the input of one call: the records, in the ABI's layout, and
// what the host needs to know of each (for the clock, the random source
// and errors). Reuse one: Reset keeps its buffers.
type Batch struct {
	w    abi.BatchWriter
	meta []recordMeta
}

type recordMeta struct {
	topic     string
	partition int32
	offset    int64
	timestamp int64
}

// Reset empties the batch.
func (b *Batch) Reset() {
	b.w.Reset()
	b.meta = b.meta[:0]
}

// Add appends a record; topic is rec.Topic as a string.
func (b *Batch) Add(rec *abi.Record, topic string) {
	b.w.Add(rec)
	b.meta = append(b.meta, recordMeta{topic: topic, partition: rec.Partition, offset: rec.Offset, timestamp: rec.Timestamp})
}

// Len is the number of records; Size their encoded bytes.
func (b *Batch) Len() int  { return len(b.meta) }
func (b *Batch) Size() int { return b.w.Size() }

// Where names record i of the batch: topic/partition@offset.
func (b *Batch) Where(i int) string {
	if i < 0 || i >= len(b.meta) {
		return "?"
	}
	r := b.meta[i]
	return fmt.Sprintf("%s/%d@%d", r.topic, r.partition, r.offset)
}

// NewInstance instantiates the module for the task of partition: it runs
// the module's start (WASI _initialize) and its setup with the stage's
// config.
func (m *Module) NewInstance(ctx context.Context, partition int32) (*Instance, error) {
	log := m.opts.Log.With("module", m.spec.Name, "partition", partition)
	inst := &Instance{m: m, partition: partition, log: newModuleLog(log), stack: make([]uint64, 1)}
	// Made before any call, stopped: expire, on the timer's goroutine,
	// reads it.
	inst.timer = time.AfterFunc(time.Hour, inst.expire)
	inst.timer.Stop()
	inst.stdout = &logWriter{log: inst.log, level: slog.LevelInfo, halt: inst.halt}
	inst.stderr = &logWriter{log: inst.log, level: slog.LevelWarn, stderr: true, halt: inst.halt}
	inst.ctx = context.WithValue(context.WithoutCancel(ctx), instanceKey{}, inst)
	startCtx := experimental.WithMemoryAllocator(inst.ctx, experimental.MemoryAllocatorFunc(func(capacity, max uint64) experimental.LinearMemory {
		inst.memory = newLinearMemory(capacity, max)
		return inst.memory
	}))
	cfg := standIns(wazero.NewModuleConfig().WithName("").WithStartFunctions(abi.ExportInitialize),
		inst, instanceSeed(m.sha), inst.stdout, inst.stderr)
	startLimit := m.setupLimit()
	err := inst.call(startLimit, func() error {
		mod, err := m.rt.InstantiateModule(startCtx, m.compiled, cfg)
		inst.mod = mod
		return err
	})
	if err != nil {
		if inst.abandoned.Load() {
			err = inst.brk(fmt.Errorf("%s did not start within %s", m.label(), startLimit))
		} else {
			err = inst.failure("failed to start", err, "")
		}
		inst.Close(ctx)
		return nil, err
	}
	inst.buffer = inst.mod.ExportedFunction(abi.ExportBuffer)
	inst.transform = inst.mod.ExportedFunction(abi.ExportTransform)
	inst.init = inst.mod.ExportedFunction(abi.ExportInit)
	if err := inst.setup(startLimit); err != nil {
		inst.Close(ctx)
		return nil, err
	}
	if m.spec.Isolation != IsolationTask {
		if err := inst.freeze(); err != nil {
			inst.Close(ctx)
			return nil, err
		}
	}
	inst.ready.Store(true)
	return inst, nil
}

// call runs fn, a call into the module, on the caller's goroutine, under a
// time limit. wazero cannot stop compiled code that runs over (only at the
// price of a check in every loop: see compile); instead, once the limit
// has passed, the next host function the call calls ends it (halt): a
// module's runtime reads the clock, yields or writes often. A call that
// calls none (a bare loop) does not return; after a grace period
// Options.OnStuck is told, and `flecht run` exits (the restart recovers;
// nothing of the open transaction commits). A goroutine per call would
// grow a fresh stack for wazero every time, which costs more than many a
// call.
func (inst *Instance) call(limit time.Duration, fn func() error) error {
	d := time.Now().Add(limit).UnixNano()
	inst.deadline.Store(d)
	// The timer stays armed between calls: a call re-arms it only when it
	// would fire after the call's deadline (expire re-arms it for a call
	// whose deadline lies later), which spares a call of a few records
	// a timer reset and stop.
	if at := inst.timerAt.Load(); at == 0 || at > d {
		inst.timerAt.Store(d)
		inst.timer.Reset(limit)
	}
	err := fn()
	inst.deadline.Store(0)
	if inst.abandoned.Load() {
		return errTimeLimit
	}
	return err
}

// expire runs when the timer fires: if a call is running past its time,
// it marks the call abandoned, for halt, and waits a grace period for it
// to return; if a call is running within its time, it re-arms the timer
// for that call's deadline.
func (inst *Instance) expire() {
	// Disarmed before the deadline is read: a call that begins meanwhile
	// either sees the timer disarmed and arms it, or its deadline is read
	// here (call stores the deadline before it reads timerAt).
	inst.timerAt.Store(0)
	d := inst.deadline.Load()
	if d == 0 {
		return // between calls
	}
	if now := time.Now().UnixNano(); now < d {
		inst.timerAt.Store(d)
		inst.timer.Reset(time.Duration(d - now))
		return
	}
	inst.abandoned.Store(true)
	inst.m.abandoned.Store(true)
	grace := max(stuckGrace, inst.m.spec.TimeLimit)
	time.AfterFunc(grace, func() {
		if inst.deadline.Load() != d {
			return
		}
		err := inst.stuckError()
		if stuck := inst.m.opts.OnStuck; stuck != nil {
			stuck(err)
		}
	})
}

// stuckGrace is how long a call over its limit has to call a host
// function (and so end) before it counts as stuck.
const stuckGrace = time.Second

var errTimeLimit = errors.New("ran over its time limit")

// halt ends an abandoned call at the host function it calls next.
func (inst *Instance) halt() {
	if inst.abandoned.Load() {
		panic(sys.NewExitError(sys.ExitCodeDeadlineExceeded))
	}
}

// setup hands the module its setup document; a refusal is a LoadError:
// the stage file's config is wrong for the module.
func (inst *Instance) setup(limit time.Duration) error {
	if inst.init == nil {
		return nil
	}
	m := inst.m
	topics := m.spec.OutputTopics
	if topics == nil {
		topics = []string{}
	}
	doc, err := json.Marshal(struct {
		ApplicationID string          `json:"application_id"`
		Partition     int32           `json:"partition"`
		OutputTopics  []string        `json:"output_topics"`
		Module        string          `json:"module"`
		Config        json.RawMessage `json:"config"`
		Stateless     bool            `json:"stateless"`
	}{m.spec.ApplicationID, inst.partition, topics, m.spec.Name, m.spec.Config, m.spec.Stateless})
	if err != nil {
		return err
	}
	if err := inst.write(doc); err != nil {
		return err
	}
	inst.stack[0] = api.EncodeI32(int32(len(doc)))
	if err := inst.call(limit, func() error { return inst.init.CallWithStack(inst.ctx, inst.stack) }); err != nil {
		if errors.Is(err, errTimeLimit) {
			return inst.brk(fmt.Errorf("%s ran over its time limit in its setup (%s)", m.label(), limit))
		}
		return inst.failure("failed in its setup", err, "")
	}
	refusal, err := inst.answer(inst.stack[0])
	if err != nil {
		return err
	}
	if len(refusal) > 0 {
		return &LoadError{Path: m.spec.Path, Err: &SetupRefusal{Reason: clip(string(refusal), 1024)}}
	}
	return nil
}

// write puts b in the module's input buffer, growing it first if needed.
func (inst *Instance) write(b []byte) error {
	if uint32(len(b)) > inst.bufCap || inst.bufPtr == 0 {
		size := max(uint32(len(b)), 64<<10)
		inst.stack[0] = api.EncodeI32(int32(size))
		err := inst.call(inst.m.spec.TimeLimit, func() error { return inst.buffer.CallWithStack(inst.ctx, inst.stack) })
		switch {
		case errors.Is(err, errTimeLimit):
			return inst.brk(fmt.Errorf("%s ran over its time limit (%s) giving a buffer", inst.m.label(), inst.m.spec.TimeLimit))
		case err != nil:
			return inst.failure("failed to give a buffer", err, "")
		}
		ptr := api.DecodeU32(inst.stack[0])
		if ptr == 0 {
			return inst.brk(fmt.Errorf("%s gave no buffer of %d bytes (%s returned 0)", inst.m.label(), size, abi.ExportBuffer))
		}
		inst.bufPtr, inst.bufCap = ptr, size
	}
	if !inst.mod.Memory().Write(inst.bufPtr, b) {
		return inst.brk(fmt.Errorf("%s gave a buffer at %d that lies outside its memory", inst.m.label(), inst.bufPtr))
	}
	return nil
}

// answer reads an address<<32|length result out of the module's memory;
// the bytes alias it until the next call.
func (inst *Instance) answer(v uint64) ([]byte, error) {
	ptr, n := uint32(v>>32), uint32(v)
	if n == 0 {
		return nil, nil
	}
	b, ok := inst.mod.Memory().Read(ptr, n)
	if !ok {
		return nil, inst.brk(fmt.Errorf("%s answered with bytes %d to %d, outside its memory", inst.m.label(), ptr, uint64(ptr)+uint64(n)))
	}
	return b, nil
}

// Transform runs one call over the batch and returns the module's results
// in the ABI's layout; they alias the module's memory until the next call.
func (inst *Instance) Transform(b *Batch) ([]byte, error) {
	if inst.broken != nil {
		return nil, inst.broken
	}
	if inst.image != nil {
		if inst.dirty {
			if err := inst.reset(); err != nil {
				return nil, err
			}
		}
		inst.dirty = true
	}
	if err := inst.write(b.w.Bytes()); err != nil {
		return nil, err
	}
	limit := inst.m.spec.TimeLimit * time.Duration(b.Len())
	inst.batch = b
	inst.spliced.reset()
	inst.calls++
	inst.log.callStarts()
	start := time.Now()
	inst.stack[0] = api.EncodeI32(int32(b.w.Size()))
	err := inst.call(limit, func() error { return inst.transform.CallWithStack(inst.ctx, inst.stack) })
	if o := inst.m.opts.Observe; o != nil {
		o(b.Len(), time.Since(start))
	}
	if errors.Is(err, errTimeLimit) {
		if b.Len() == 1 {
			return nil, inst.brk(fmt.Errorf("%s ran over its time limit (time_limit %s) on %s", inst.m.label(), inst.m.spec.TimeLimit, inst.where()))
		}
		return nil, inst.brk(fmt.Errorf("%s ran over its time limit (time_limit %s per record, %d in the call) on %s",
			inst.m.label(), inst.m.spec.TimeLimit, b.Len(), inst.where()))
	}
	if err != nil {
		return nil, inst.failure("failed", err, inst.where())
	}
	inst.batch = nil
	out, err := inst.answer(inst.stack[0])
	if err != nil {
		return nil, err
	}
	if out == nil && b.Len() > 0 {
		return nil, inst.brk(fmt.Errorf("%s answered a batch of %d records with no results", inst.m.label(), b.Len()))
	}
	return out, nil
}

// current is the record the module works on, for the clocks and the
// random source: the cursor in the batch's header says which; its id is
// the call's number and the record's place in the call.
func (inst *Instance) current() (uint64, int64, bool) {
	i, ok := inst.cursor()
	if !ok {
		return 0, 0, false
	}
	return inst.calls<<32 | uint64(i), inst.batch.meta[i].timestamp, true
}

// seed is the current record's random seed.
func (inst *Instance) seed() [32]byte {
	i, ok := inst.cursor()
	if !ok {
		return [32]byte{}
	}
	r := inst.batch.meta[i]
	return recordSeed(r.topic, r.partition, r.offset)
}

// cursor is the index of the record the module works on in the call in
// progress.
func (inst *Instance) cursor() (int, bool) {
	b := inst.batch
	if b == nil || inst.mod == nil {
		return 0, false
	}
	i, ok := inst.mod.Memory().ReadUint32Le(inst.bufPtr + abi.CursorOffset)
	if !ok || int(i) >= len(b.meta) {
		return 0, false
	}
	return int(i), true
}

// where names the record the module was working on, from its cursor, or
// the batch's records when the cursor says nothing.
func (inst *Instance) where() string {
	b := inst.batch
	if b == nil {
		return "no record"
	}
	if inst.mod != nil {
		if i, ok := inst.mod.Memory().ReadUint32Le(inst.bufPtr + abi.CursorOffset); ok && int(i) < b.Len() {
			return b.Where(int(i))
		}
	}
	if b.Len() == 1 {
		return b.Where(0)
	}
	return fmt.Sprintf("one of %s to %s", b.Where(0), b.Where(b.Len()-1))
}

// SetupRefusal is a module's refusal of its setup: the stage file's
// transform.config or output_topics do not suit it.
type SetupRefusal struct {
	Reason string
}

func (e *SetupRefusal) Error() string {
	return "refuses its setup (transform.config and output_topics in the stage file): " + e.Reason
}

// Failure is a module's error on a record: a trap, an exit, a time limit,
// or the module reporting its own failure. The stage stops on it.
type Failure struct {
	Msg string
}

func (e *Failure) Error() string { return e.Msg }

// failure turns an error of a call into the instance's Failure, naming
// the module, its digest prefix and the record, with what the module last
// wrote to standard error.
func (inst *Instance) failure(what string, err error, where string) error {
	inst.stdout.flush()
	inst.stderr.flush()
	var msg strings.Builder
	fmt.Fprintf(&msg, "%s %s", inst.m.label(), what)
	if where != "" {
		fmt.Fprintf(&msg, " on %s", where)
	}
	var exit *sys.ExitError
	switch {
	case errors.As(err, &exit):
		fmt.Fprintf(&msg, ": it exited with code %d", exit.ExitCode())
	default:
		first, _, _ := strings.Cut(err.Error(), "\n")
		fmt.Fprintf(&msg, ": it trapped (%s)", first)
	}
	if inst.mod != nil {
		// A runtime out of memory fails to grow it a little short of the
		// limit: its heap grows in chunks.
		if used, limit := int64(inst.mod.Memory().Size()), inst.m.spec.MemoryLimit; used >= limit-limit/4 {
			fmt.Fprintf(&msg, "; %.1f MiB of its memory_limit %d MiB in use", float64(used)/(1<<20), limit>>20)
		}
	}
	if w := inst.log.words(); w != "" {
		fmt.Fprintf(&msg, "; it wrote to standard error: %q", clip(w, 300))
	}
	return inst.brk(&Failure{Msg: msg.String()})
}

// brk marks the instance unusable with err and returns err.
func (inst *Instance) brk(err error) error {
	if inst.broken == nil {
		inst.broken = err
	}
	return err
}

// Close ends the instance and frees its memory, unless a call of it is
// still running (stuck: see call).
func (inst *Instance) Close(ctx context.Context) {
	inst.stdout.flush()
	inst.stderr.flush()
	if inst.deadline.Load() != 0 {
		return
	}
	inst.timer.Stop()
	if inst.mod != nil {
		_ = inst.mod.Close(ctx)
	}
	if inst.memory != nil {
		inst.memory.release()
	}
}

// clip keeps the start of s, n bytes at most.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

// Interrupt ends the call in progress at the next host function it calls,
// as a time limit does, and every later call at once: the stage is
// stopping (SIGTERM) and discards what the call was doing. A call that
// calls nothing runs on until its time limit (see call). Safe from any
// goroutine.
func (inst *Instance) Interrupt() { inst.abandoned.Store(true) }
