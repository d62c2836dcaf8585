package lineage

import (
	"errors"
	"strconv"
	"testing"
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
		if b := strconv.AppendInt([]byte(SourcePrefix(s.Topic, s.Partition)), s.Offset, 10); string(b) != s.String() {
			t.Fatalf("SourcePrefix + offset = %q, String = %q", b, s.String())
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
