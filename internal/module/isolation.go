package module

import (
	"errors"
	"fmt"
	"reflect"
	"sync"

	"github.com/tetratelabs/wazero/api"
)

// Record isolation (docs/modules.md, "One input, one output"): every
// record runs on the instance as it was right after its setup. Whatever
// a record leaves behind in the module's memory and globals (a counter, a
// cache, a language runtime's random state that orders map iteration) is
// gone before the next record, so what a record produces depends on the
// record, its state and the setup alone: a task that restarts or moves
// produces the bytes it would have produced without.

// Isolation values of Spec.Isolation (transform.isolation).
const (
	// IsolationRecord resets the instance before every record (default).
	IsolationRecord = "record"
	// IsolationTask keeps one instance's memory across the records of its
	// task: faster for a module that writes much memory per record, but a
	// record's result may then depend on the records before it in this
	// instance, which a restart, a rebalance or a replay changes.
	IsolationTask = "task"
)

// IsolationName is the spec's isolation, the default spelt out.
func (s Spec) IsolationName() string {
	if s.Isolation == "" {
		return IsolationRecord
	}
	return s.Isolation
}

// imageCopyWarning says once per process that images are copies.
var imageCopyWarning sync.Once

// instanceImage is what a reset restores besides the memory's pages.
type instanceImage struct {
	size           uint32 // bytes of memory after setup
	globals        []savedGlobal
	bufPtr, bufCap uint32
}

// savedGlobal is a mutable global and its value after setup. wazero
// exposes a module's own globals only when it exports them; the rest
// are reached through its instance's Globals (see moduleGlobals).
type savedGlobal struct {
	g      globalValue
	lo, hi uint64
}

type globalValue interface {
	Value() (lo, hi uint64)
	SetValue(lo, hi uint64)
}

// freeze takes the instance's image after setup. The input buffer is
// given first, so that a record of ordinary size needs no allocation.
func (inst *Instance) freeze() error {
	if inst.bufPtr == 0 {
		if err := inst.write(nil); err != nil {
			return err
		}
	}
	mem := inst.mod.Memory()
	if mem == nil || inst.memory == nil {
		return fmt.Errorf("%s has no memory of its own to reset", inst.m.label())
	}
	globals, err := moduleGlobals(inst.mod)
	if err != nil {
		return fmt.Errorf("%s cannot be reset between records: %w", inst.m.label(), err)
	}
	img := &instanceImage{size: mem.Size(), bufPtr: inst.bufPtr, bufCap: inst.bufCap}
	for _, g := range globals {
		lo, hi := g.Value()
		img.globals = append(img.globals, savedGlobal{g: g, lo: lo, hi: hi})
	}
	if err := inst.memory.freeze(uint64(img.size)); err != nil {
		return err
	}
	if !inst.memory.mapsImage() {
		imageCopyWarning.Do(func() {
			inst.m.opts.Log.Warn("the module's memory after setup is kept as a copy, put back whole before every record (record isolation): the kernel's page map (/proc/self/pagemap) cannot be read here, so each record costs a copy of the module's memory; isolation: task avoids it, at the cost docs/modules.md describes",
				"module", inst.m.spec.Name, "memory_bytes", img.size)
		})
	}
	inst.image = img
	return nil
}

// reset returns the instance to its image.
func (inst *Instance) reset() error {
	img := inst.image
	mem := inst.mod.Memory()
	size := mem.Size()
	if err := inst.memory.revert(uint64(size), inst.trustReset); err != nil {
		return inst.brk(fmt.Errorf("%s could not be reset between records: %w", inst.m.label(), err))
	}
	if size > img.size {
		if err := shrinkMemory(mem, img.size); err != nil {
			return inst.brk(fmt.Errorf("%s could not be reset between records: %w", inst.m.label(), err))
		}
	}
	for i := range img.globals {
		s := &img.globals[i]
		if lo, hi := s.g.Value(); lo != s.lo || hi != s.hi {
			s.g.SetValue(s.lo, s.hi)
		}
	}
	inst.bufPtr, inst.bufCap = img.bufPtr, img.bufCap
	return nil
}

// moduleGlobals finds the mutable globals a module defines. wazero's
// instance keeps them in an exported field of a type its API does not
// name; a wazero that changes this fails here, at start, never later.
func moduleGlobals(mod api.Module) ([]globalValue, error) {
	v := reflect.ValueOf(mod)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return nil, errors.New("the WebAssembly runtime's instance is not the kind this flecht knows")
	}
	field := v.Elem().FieldByName("Globals")
	if !field.IsValid() || field.Kind() != reflect.Slice {
		return nil, errors.New("the WebAssembly runtime's instance has no globals this flecht can reach")
	}
	var out []globalValue
	for i := 0; i < field.Len(); i++ {
		g := field.Index(i)
		if g.Kind() != reflect.Pointer || g.IsNil() {
			continue
		}
		mutable := g.Elem().FieldByName("Type").FieldByName("Mutable")
		if !mutable.IsValid() || mutable.Kind() != reflect.Bool {
			return nil, errors.New("the WebAssembly runtime's globals are not the kind this flecht knows")
		}
		if !mutable.Bool() {
			continue
		}
		gv, ok := g.Interface().(globalValue)
		if !ok {
			return nil, errors.New("the WebAssembly runtime's globals cannot be read and set")
		}
		out = append(out, gv)
	}
	return out, nil
}

// shrinkMemory takes the memory back to size bytes, which a WebAssembly
// memory never does by itself: its length is set a page short of size,
// and growing it by that page has wazero tell the compiled code the new
// length.
func shrinkMemory(mem api.Memory, size uint32) error {
	const page = 1 << 16
	v := reflect.ValueOf(mem)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct || size < page {
		return errors.New("its memory cannot shrink")
	}
	buf := v.Elem().FieldByName("Buffer")
	if !buf.IsValid() || buf.Kind() != reflect.Slice || buf.Type().Elem().Kind() != reflect.Uint8 || !buf.CanSet() {
		return errors.New("its memory cannot shrink")
	}
	buf.Set(buf.Slice(0, int(size-page)))
	if _, ok := mem.Grow(1); !ok || mem.Size() != size {
		return fmt.Errorf("its memory did not shrink back to %d bytes", size)
	}
	return nil
}
