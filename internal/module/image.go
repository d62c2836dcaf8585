package module

// The image by copy, where the memory cannot be a private mapping of it:
// a revert copies the image back and zeroes what lies beyond it, which
// costs the memory's size per record.

func (m *linearMemory) freezeByCopy(size uint64) {
	m.image = append([]byte(nil), m.bytes()[:size]...)
}

func (m *linearMemory) revertByCopy(size uint64) error {
	mem := m.bytes()[:size]
	n := copy(mem, m.image)
	clear(mem[n:])
	return nil
}

// pageRange is a range of whole pages, as byte offsets into a memory.
type pageRange struct{ from, to uint64 }
