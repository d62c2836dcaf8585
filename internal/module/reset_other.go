//go:build !linux

package module

// Elsewhere the image is a copy, and reverting copies it back whole.

func (m *linearMemory) freeze(size uint64) error {
	m.freezeByCopy(size)
	return nil
}

func (m *linearMemory) revert(size uint64, _ bool) error { return m.revertByCopy(size) }

func (m *linearMemory) newPages() (bool, error) { return false, nil }

func (m *linearMemory) otherThread() {}

func (m *linearMemory) mapsImage() bool { return false }
