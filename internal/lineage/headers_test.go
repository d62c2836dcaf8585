package lineage

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestReadHeaders(t *testing.T) {
	st := Stamp{Source: Source{"raw", 2, 41}, Logic: ModuleLogic("abcdef0123456789ff"), Generation: 3}
	got, found, err := Read(append([]kgo.RecordHeader{{Key: "other", Value: []byte("x")}}, st.Headers()...))
	if err != nil || !found || got != st {
		t.Fatalf("Read = %+v, %v, %v; want %+v", got, found, err, st)
	}
	if _, found, err := Read([]kgo.RecordHeader{{Key: "other"}}); found || err != nil {
		t.Fatalf("no lineage: found %v, %v", found, err)
	}
	for i := range st.Headers() {
		hs := st.Headers()
		missing := append(hs[:i:i], hs[i+1:]...)
		if _, found, err := Read(missing); !found || err == nil {
			t.Errorf("without %s: found %v, %v; want an error", hs[i].Key, found, err)
		}
		bad := st.Headers()
		bad[i].Value = []byte("")
		if _, _, err := Read(bad); err == nil {
			t.Errorf("empty %s accepted", bad[i].Key)
		}
	}
	if o, ok := OriginOf([]kgo.RecordHeader{{Key: HeaderOrigin, Value: []byte(MQTTOrigin("s/1"))}}); !ok || o != "mqtt:s/1" {
		t.Fatalf("OriginOf = %q, %v", o, ok)
	}
}

// FuzzRead: no header set panics Read, and a stamp it reads writes back
// to headers it reads the same.
func FuzzRead(f *testing.F) {
	f.Add("t/0@0", "builtin:count@1", "1")
	f.Add("t/0@x", "", "0")
	f.Fuzz(func(t *testing.T, src, logic, gen string) {
		st, _, err := Read([]kgo.RecordHeader{{Key: HeaderSource, Value: []byte(src)}, {Key: HeaderLogic, Value: []byte(logic)}, {Key: HeaderGeneration, Value: []byte(gen)}})
		if err != nil {
			return
		}
		again, _, err := Read(st.Headers())
		if err != nil || again != st {
			t.Fatalf("%+v reads back as %+v, %v", st, again, err)
		}
	})
}
