package lineage

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestSourceRoundTrip(t *testing.T) {
	for _, s := range []Source{{"sensors.raw", 0, 0}, {"a-b_c.d", 2147483647, 9223372036854775807}} {
		got, err := ParseSource(s.String())
		if err != nil || got != s {
			t.Fatalf("ParseSource(%q) = %+v, %v", s.String(), got, err)
		}
		if b := AppendSource(nil, s.Topic, s.Partition, s.Offset); string(b) != s.String() {
			t.Fatalf("AppendSource = %q, String = %q", b, s.String())
		}
	}
}

func TestParseSourceRefuses(t *testing.T) {
	for _, in := range []string{"", "t", "t/1", "/1@2", "t/@2", "t/1@", "t/-1@2", "t/1@-2", "t/01@2", "t/1@+2",
		"t/2147483648@0", "t/1@9223372036854775808", "a@b/1@2", "t/1@2@3", "t/1 @2"} {
		if s, err := ParseSource(in); err == nil {
			t.Errorf("ParseSource(%q) = %+v, want an error", in, s)
		}
	}
}

func TestLogic(t *testing.T) {
	sum := "ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef0123456789"
	l := ModuleLogic(sum)
	if l != "module:sha256:abcdef0123456789" {
		t.Fatalf("ModuleLogic = %q", l)
	}
	if !MatchesModule(l, sum) || MatchesModule(l, "00"+sum[2:]) || MatchesModule(BuiltinLogic("count", "1.0"), sum) {
		t.Fatal("MatchesModule answers wrong")
	}
	if _, ok := ModuleDigest("module:sha256:"); ok {
		t.Fatal("an empty digest names a module")
	}
}

func TestGeneration(t *testing.T) {
	if g, err := GenerationOf(OffsetMetadata(7)); err != nil || g != 7 {
		t.Fatalf("GenerationOf = %d, %v", g, err)
	}
	if g, err := GenerationOf(""); !errors.Is(err, ErrNoGeneration) || g != FirstGeneration {
		t.Fatalf("empty metadata = %d, %v", g, err)
	}
	for _, bad := range []string{"flecht.generation=0", "flecht.generation=x", "flecht.generation=07"} {
		if g, err := GenerationOf(bad); err == nil || errors.Is(err, ErrNoGeneration) || g != FirstGeneration {
			t.Errorf("GenerationOf(%q) = %d, %v", bad, g, err)
		}
	}
	if _, err := ParseGeneration("0"); err == nil {
		t.Fatal("generation 0 accepted")
	}
}

// FuzzParseSource: no input panics, and what parses prints back as given.
func FuzzParseSource(f *testing.F) {
	for _, s := range []string{"t/0@0", "a.b/3@17", "t/1@", "//@@", "t/-0@0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		s, err := ParseSource(in)
		if err == nil && s.String() != in {
			t.Fatalf("ParseSource(%q) = %+v, prints %q", in, s, s.String())
		}
	})
}

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
