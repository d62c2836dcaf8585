//go:build unix

package module

import (
	"syscall"

	"github.com/tetratelabs/wazero/experimental"
)

// linearMemory backs an instance's memory with an anonymous mapping of its
// whole limit, reserved at once: growing then moves nothing (wazero's own
// memory is a Go slice copied whole at every growth, and a Go module grows
// its heap a few MiB at a time), and what the module never touches is
// never resident. Where the mapping fails, a Go slice backs it.
type linearMemory struct {
	mapped []byte // the mapping, or nil
	buf    []byte // the slice instead
	max    uint64

	// The image an instance is reset to (see freeze): the memory is a
	// private mapping of it and image a read-only view (frozen), or image
	// is a copy.
	frozen bool
	image  []byte
	// own are the pages of the memory that are the process's own (written
	// since the freeze) as of the last walk of the page map, which found
	// the memory at ownSize bytes; faults is the count of page faults of
	// the thread of the last revert (reset_linux.go).
	own     []pageRange
	ownSize uint64
	known   []pageRange // own before the last newPages, reused
	faults  uint64
	// tid is the thread of the last revert; maybeMoved says the caller
	// may be on another since.
	tid        int
	maybeMoved bool
}

func newLinearMemory(capacity, max uint64) *linearMemory {
	b, err := syscall.Mmap(-1, 0, int(max), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON|syscall.MAP_NORESERVE)
	if err != nil {
		return &linearMemory{buf: make([]byte, 0, capacity), max: max}
	}
	return &linearMemory{mapped: b, max: max}
}

// Reallocate grows (or shrinks) the memory.
func (m *linearMemory) Reallocate(size uint64) []byte {
	switch {
	case size > m.max:
		return nil
	case m.mapped != nil:
		return m.mapped[:size:len(m.mapped)]
	case size > uint64(cap(m.buf)):
		m.buf = append(m.buf[:cap(m.buf)], make([]byte, size-uint64(cap(m.buf)))...)
	}
	m.buf = m.buf[:size]
	return m.buf
}

// bytes is the whole memory, at least as long as its current size.
func (m *linearMemory) bytes() []byte {
	if m.mapped != nil {
		return m.mapped
	}
	return m.buf
}

// Free is wazero closing the module, which an exit or a trap does in the
// middle of a call: the host still reads the memory then (the cursor, its
// size), so it stays until the instance is closed (release).
func (m *linearMemory) Free() {}

// release unmaps the memory.
func (m *linearMemory) release() {
	if m.frozen && m.image != nil {
		_ = syscall.Munmap(m.image)
	}
	m.image, m.frozen = nil, false
	if m.mapped != nil {
		_ = syscall.Munmap(m.mapped)
		m.mapped = nil
	}
	m.buf = nil
}

var _ experimental.LinearMemory = (*linearMemory)(nil)
