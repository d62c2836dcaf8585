package module_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/module"
)

// Under record isolation every record runs on the instance as it was
// after setup: a module that counts records and keeps memory sees each
// record as its first, its memory never runs out however much the records
// before it kept, and a record too large for the standing input buffer
// leaves nothing behind either. Each output equals the output of a fresh
// instance.
func TestRecordIsolationLeavesNothingBehind(t *testing.T) {
	path := testModule(t, "hoarder")
	spec := module.Spec{Path: path, MemoryLimit: 32 << 20}
	var recs []*kgo.Record
	for i := range 40 {
		v := `{"grow_mib":4}`
		if i == 17 {
			v = `{"grow_mib":1,"pad":"` + strings.Repeat("x", 300<<10) + `"}`
		}
		recs = append(recs, rec(fmt.Sprint("k", i), v, int64(i)))
	}
	got, err := offline(t, spec, recs...)
	if err != nil {
		t.Fatalf("40 records of 4 MiB each under a 32 MiB limit: %v", err)
	}
	for i, r := range recs {
		if i%8 != 1 && i != 17 && i != 39 {
			continue // a fresh instance for a few: each costs a start
		}
		fresh, err := offline(t, spec, r)
		if err != nil {
			t.Fatal(err)
		}
		if a, b := string(got[i].Messages[0].RawValue), string(fresh[0].Messages[0].RawValue); a != b {
			t.Errorf("record %d: %s after %d records, %s on a fresh instance", i, a, i, b)
		}
	}
	if v := string(got[39].Messages[0].RawValue); !strings.Contains(v, `"handled":1,`) {
		t.Errorf("the last record saw %s", v)
	}

	// The same module under task isolation keeps what it kept: the proof
	// that the test above tells the two apart.
	spec.Isolation = module.IsolationTask
	kept, err := offline(t, spec, recs[:3]...)
	if err != nil {
		t.Fatal(err)
	}
	if v := string(kept[2].Messages[0].RawValue); !strings.Contains(v, `"handled":3,"kept_mib":12`) {
		t.Errorf("under task isolation the third record saw %s", v)
	}
	if _, err := offline(t, spec, recs...); err == nil || !strings.Contains(err.Error(), "memory_limit") {
		t.Errorf("under task isolation 40 × 4 MiB under 32 MiB: %v, want the memory limit", err)
	}
}

// The resets between the records of a batch copy back the pages known to
// be written without asking the kernel each time; a record that writes a
// page no record wrote before is found at the end of the batch, and the
// batch runs again, checking each reset: no record sees another's byte,
// whether it only reports it or fails on it.
func TestRecordIsolationFindsPagesWrittenMidBatch(t *testing.T) {
	path := testModule(t, "scribbler")
	for _, strict := range []bool{false, true} {
		var recs []*kgo.Record
		for i := range 12 {
			recs = append(recs, rec(fmt.Sprint("k", i), fmt.Sprintf(`{"write":%d,"strict":%v}`, 10+i%4*20+i, strict), int64(i)))
		}
		got, err := offline(t, module.Spec{Path: path}, recs...)
		if err != nil {
			t.Fatalf("strict %v: %v", strict, err)
		}
		for i, r := range got {
			want := fmt.Sprintf(`{"seen":[%d]}`, 10+i%4*20+i)
			if v := string(r.Messages[0].RawValue); v != want {
				t.Errorf("strict %v, record %d: %s, want %s", strict, i, v, want)
			}
		}
	}
}
