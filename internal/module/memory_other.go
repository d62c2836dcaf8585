//go:build !unix

package module

// linearMemory backs an instance's memory with a Go slice where no
// anonymous mapping is at hand.
type linearMemory struct {
	buf []byte
	max uint64

	image []byte // the image an instance is reset to (see freeze)
}

func newLinearMemory(capacity, max uint64) *linearMemory {
	return &linearMemory{buf: make([]byte, 0, capacity), max: max}
}

func (m *linearMemory) Reallocate(size uint64) []byte {
	if size > m.max {
		return nil
	}
	if size > uint64(cap(m.buf)) {
		m.buf = append(m.buf[:cap(m.buf)], make([]byte, size-uint64(cap(m.buf)))...)
	}
	m.buf = m.buf[:size]
	return m.buf
}

func (m *linearMemory) bytes() []byte { return m.buf }

func (m *linearMemory) Free() {}

func (m *linearMemory) release() { m.buf = nil }
