//go:build linux

package module

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// On Linux an instance's image after setup is a memfd, and its linear
// memory a private mapping of it: a page the module writes becomes the
// process's own copy, every other page stays the image's. Reverting finds
// the copies (the kernel's page map says which pages are not the file's)
// and copies the image back over them, so a reset costs the pages the
// records wrote, not the memory's size.

// freeze makes the first size bytes of the memory its image.
func (m *linearMemory) freeze(size uint64) error {
	if m.mapped == nil || !pageMapReadable() {
		m.freezeByCopy(size)
		return nil
	}
	fd, err := unix.MemfdCreate("flecht-module-image", unix.MFD_CLOEXEC)
	if err != nil {
		return fmt.Errorf("creating the image of the module's memory: %w", err)
	}
	defer unix.Close(fd)
	for off := uint64(0); off < size; {
		n, err := unix.Pwrite(fd, m.mapped[off:size], int64(off))
		if err != nil {
			return fmt.Errorf("writing the image of the module's memory: %w", err)
		}
		off += uint64(n)
	}
	if err := unix.Ftruncate(fd, int64(len(m.mapped))); err != nil {
		return fmt.Errorf("sizing the image of the module's memory: %w", err)
	}
	_, err = unix.MmapPtr(fd, 0, unsafe.Pointer(unsafe.SliceData(m.mapped)), uintptr(len(m.mapped)),
		unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_FIXED|unix.MAP_NORESERVE)
	if err != nil {
		return fmt.Errorf("mapping the image of the module's memory: %w", err)
	}
	// A second, read-only view of the image, to copy written pages back
	// from: the memory's own view of a page is its copy once written.
	if size > 0 {
		view, err := unix.Mmap(fd, 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
		if err != nil {
			return fmt.Errorf("mapping the image of the module's memory: %w", err)
		}
		m.image = view
	}
	m.frozen = true
	return nil
}

// revert copies the image back over every page written since the image
// was frozen, in the first size bytes; beyond the image they are zeroed,
// as memory the module has just grown is. A written page stays the
// process's own, mapped and writable, so the next record's writes cost no
// page fault. The pages the process owns are found by walking the page
// map. A page becomes the process's own only through a page fault of the
// thread that writes it, so while the caller's thread has taken no fault
// since the last walk (see otherThread), the pages found then are still
// all there are.
//
// trusted skips counting the thread's faults (a syscall, about a tenth
// of a record's cost) and copies back the pages known: the caller proves
// afterwards, with newPages, that the records in between wrote no other.
func (m *linearMemory) revert(size uint64, trusted bool) error {
	if !m.frozen {
		return m.revertByCopy(size)
	}
	mem := m.mapped[:size]
	if !trusted || m.maybeMoved || size != m.ownSize || m.faults == 0 {
		f := threadFaults()
		if m.maybeMoved {
			// The same thread's count still tells, another thread's does not.
			if tid := unix.Gettid(); tid != m.tid {
				m.tid, m.faults = tid, 0
			}
			m.maybeMoved = false
		}
		if f != m.faults || f == 0 || size != m.ownSize {
			if err := m.walk(size); err != nil {
				return err
			}
		}
		m.faults = f
	}
	for _, r := range m.own {
		n := uint64(0)
		if r.from < uint64(len(m.image)) {
			n = uint64(copy(mem[r.from:r.to], m.image[r.from:]))
		}
		clear(mem[r.from+n : r.to])
	}
	return nil
}

// walk finds the pages of the first size bytes that are the process's own.
func (m *linearMemory) walk(size uint64) error {
	m.own = m.own[:0]
	if err := writtenPages(m.mapped[:size], func(from, to uint64) error {
		m.own = append(m.own, pageRange{from, to})
		return nil
	}); err != nil {
		return err
	}
	m.ownSize = size
	return nil
}

// newPages says whether a page of the process's own has come up, in the
// bytes the last walk covered, that the last walk did not find: then a
// trusted revert since may have left a page as a record wrote it. The
// caller is on the thread of the last revert, locked to it since.
func (m *linearMemory) newPages() (bool, error) {
	if !m.frozen {
		return false, nil
	}
	f := threadFaults()
	if f == m.faults && f != 0 && !m.maybeMoved {
		return false, nil
	}
	known := append(m.known[:0], m.own...)
	if err := m.walk(m.ownSize); err != nil {
		return false, err
	}
	m.known, m.faults = known, f
	return !slices.Equal(known, m.own), nil
}

// otherThread says the caller may be on another thread than at the last
// revert: the next revert asks which thread it is on, and walks the page
// map unless it is the same. Between two reverts the caller otherwise
// keeps to one thread (runtime.LockOSThread), and writes the memory only
// from it.
func (m *linearMemory) otherThread() { m.maybeMoved = true }

// threadFaults counts the page faults the calling thread has taken (0
// when it cannot tell).
func threadFaults() uint64 {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_THREAD, &ru) != nil {
		return 0
	}
	return uint64(ru.Minflt) + uint64(ru.Majflt)
}

// The kernel's page map of this process, read by the PAGEMAP_SCAN ioctl
// (Linux 6.7) or, before it, entry by entry.
var pageMap struct {
	once   sync.Once
	file   *os.File
	noScan atomic.Bool // the ioctl is missing: read entries
}

func pageMapReadable() bool {
	pageMap.once.Do(func() {
		f, err := os.Open("/proc/self/pagemap")
		if err == nil {
			pageMap.file = f
		}
	})
	return pageMap.file != nil
}

// The ioctl's interface (include/uapi/linux/fs.h).
const (
	pagemapScan     = 0xC0606610 // _IOWR('f', 16, struct pm_scan_arg)
	pageIsFile      = 1 << 2
	pageIsPresent   = 1 << 3
	pageIsSwapped   = 1 << 4
	scanRegionBatch = 64
)

type pmScanArg struct {
	size, flags, start, end, walkEnd, vec, vecLen, maxPages,
	categoryInverted, categoryMask, categoryAnyofMask, returnMask uint64
}

type pageRegion struct{ start, end, categories uint64 }

var scanRegions = sync.Pool{New: func() any { return new([scanRegionBatch]pageRegion) }}

// writtenPages calls fn with the byte ranges of mem (offsets into it)
// whose pages are the process's own: present or swapped, and not the
// mapped file's.
func writtenPages(mem []byte, fn func(from, to uint64) error) error {
	if len(mem) == 0 {
		return nil
	}
	base := uint64(uintptrOf(mem))
	end := base + uint64(len(mem))
	if !pageMap.noScan.Load() {
		err := scanPages(base, end, fn)
		if !errors.Is(err, unix.ENOTTY) && !errors.Is(err, unix.EINVAL) {
			return err
		}
		pageMap.noScan.Store(true)
	}
	return readPageEntries(base, end, fn)
}

func scanPages(base, end uint64, fn func(from, to uint64) error) error {
	// On the heap, where nothing moves it: the kernel writes to it by the
	// address in arg.
	regions := scanRegions.Get().(*[scanRegionBatch]pageRegion)
	defer scanRegions.Put(regions)
	for start := base; start < end; {
		arg := pmScanArg{
			start: start, end: end,
			vec: uint64(uintptr(unsafe.Pointer(&regions[0]))), vecLen: scanRegionBatch,
			categoryInverted: pageIsFile, categoryMask: pageIsFile,
			categoryAnyofMask: pageIsPresent | pageIsSwapped, returnMask: pageIsPresent | pageIsSwapped,
		}
		arg.size = uint64(unsafe.Sizeof(arg))
		n, _, errno := unix.Syscall(unix.SYS_IOCTL, pageMap.file.Fd(), pagemapScan, uintptr(unsafe.Pointer(&arg)))
		if errno != 0 {
			return errno
		}
		for _, r := range regions[:n] {
			if err := fn(r.start-base, r.end-base); err != nil {
				return err
			}
		}
		if arg.walkEnd <= start {
			return fmt.Errorf("reading the page map: the scan stopped at %#x", arg.walkEnd)
		}
		start = arg.walkEnd
	}
	return nil
}

// readPageEntries is the page map read entry by entry: 8 bytes a page,
// bit 63 present, 62 swapped, 61 a page of the file.
func readPageEntries(base, end uint64, fn func(from, to uint64) error) error {
	page := uint64(os.Getpagesize())
	buf := make([]byte, 8*512)
	runStart, inRun := uint64(0), false
	for addr := base; addr < end; {
		n := min((end-addr+page-1)/page, uint64(len(buf)/8))
		if _, err := pageMap.file.ReadAt(buf[:8*n], int64(addr/page*8)); err != nil {
			return fmt.Errorf("reading the page map: %w", err)
		}
		for i := uint64(0); i < n; i++ {
			e := binary.LittleEndian.Uint64(buf[8*i:])
			own := e&(3<<62) != 0 && e&(1<<61) == 0
			at := addr + i*page
			switch {
			case own && !inRun:
				runStart, inRun = at, true
			case !own && inRun:
				inRun = false
				if err := fn(runStart-base, at-base); err != nil {
					return err
				}
			}
		}
		addr += n * page
	}
	if inRun {
		return fn(runStart-base, end-base)
	}
	return nil
}

func uintptrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

// mapsImage says whether the image is mapped (else it is a copy).
func (m *linearMemory) mapsImage() bool { return m.frozen }
