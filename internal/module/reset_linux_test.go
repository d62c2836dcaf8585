//go:build linux

package module

import (
	"bytes"
	"runtime"
	"slices"
	"testing"
)

// A frozen memory reverts to its image: the pages written since (and
// only those) are found, by the page map's scan and by its entries alike,
// and copied back; what lies beyond the image reads as zero again.
func TestFrozenMemoryRevertsToItsImage(t *testing.T) {
	const page = 4096
	m := newLinearMemory(1<<20, 8<<20)
	defer m.release()
	mem := m.Reallocate(1 << 20)
	for i := range mem {
		mem[i] = byte(i / page)
	}
	image := bytes.Clone(mem)
	if err := m.freeze(uint64(len(mem))); err != nil {
		t.Fatal(err)
	}
	if !m.frozen {
		t.Fatal("the memory is not a private mapping of its image: this machine's page map cannot be read")
	}
	mem = m.Reallocate(2 << 20) // grown past the image, as a module grows it
	for _, p := range []int{3, 10, 11, 12, 200, 300} {
		mem[p*page+7]++
	}
	want := []pageRange{{3 * page, 4 * page}, {10 * page, 13 * page}, {200 * page, 201 * page}, {300 * page, 301 * page}}
	collect := func(walk func(base, end uint64, fn func(from, to uint64) error) error) []pageRange {
		var got []pageRange
		base := uint64(uintptrOf(mem))
		if err := walk(base, base+uint64(len(mem)), func(from, to uint64) error {
			got = append(got, pageRange{from, to})
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := collect(scanPages); !slices.Equal(got, want) {
		t.Errorf("the scan found %v, want %v", got, want)
	}
	if got := collect(readPageEntries); !slices.Equal(got, want) {
		t.Errorf("the entries say %v, want %v", got, want)
	}

	m.otherThread()
	if err := m.revert(uint64(len(mem)), false); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(mem[:len(image)], image) || !allZero(mem[len(image):]) {
		t.Fatal("after the revert the memory is not its image")
	}
	// The written pages stay the process's own and are copied back again;
	// a page written anew costs the thread a page fault, and is found.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	m.otherThread()
	if err := m.revert(uint64(len(mem)), false); err != nil {
		t.Fatal(err)
	}
	mem[10*page]++
	mem[500*page]++
	if err := m.revert(uint64(len(mem)), false); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(mem[:len(image)], image) || !allZero(mem[len(image):]) {
		t.Fatal("after the second revert the memory is not its image")
	}
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// Where the memory cannot be a private mapping of its image, a copy of
// the image is copied back whole.
func TestCopiedImageRevertsWhole(t *testing.T) {
	m := newLinearMemory(1<<16, 1<<20)
	defer m.release()
	mem := m.Reallocate(1 << 16)
	for i := range mem {
		mem[i] = byte(i)
	}
	image := bytes.Clone(mem)
	m.freezeByCopy(uint64(len(mem)))
	mem = m.Reallocate(1 << 17)
	mem[5]++
	mem[1<<16+5] = 9
	if err := m.revert(uint64(len(mem)), false); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(mem[:len(image)], image) || !allZero(mem[len(image):]) {
		t.Fatal("after the revert the memory is not its image")
	}
}
