package mqtt

import "testing"

func TestMatch(t *testing.T) {
	cases := []struct {
		filter, topic string
		want          bool
	}{
		{"sensors/+/events", "sensors/7/events", true},
		{"sensors/+/events", "sensors/7/other", false},
		{"sensors/+/events", "sensors/events", false},
		{"sensors/#", "sensors", true},
		{"sensors/#", "sensors/a/b/c", true},
		{"#", "anything/at/all", true},
		{"#", "$SYS/broker", false},
		{"+/x", "$SYS/x", false},
		{"$SYS/#", "$SYS/broker", true},
		{"a/+", "a/", true},
		{"a", "a/b", false},
	}
	for _, c := range cases {
		if got := Match(c.filter, c.topic); got != c.want {
			t.Errorf("Match(%q, %q) = %v", c.filter, c.topic, got)
		}
	}
}

func TestOverlap(t *testing.T) {
	cases := []struct {
		a, b string
		want bool
	}{
		{"sensors/+/events", "sensors/7/events", true},
		{"sensors/+/events", "sensors/+/status", false},
		{"sensors/#", "sensors/1/events", true},
		{"sensors/#", "sensors", true},
		{"a/b", "a/b", true},
		{"a/b", "a/c", false},
		{"a/+", "a/b/c", false},
		{"a/+/#", "a/b", true},
		{"a/b/c", "a/+/#", true},
		{"x/#", "y/#", false},
		{"+/+", "a/b/c", false},
		// A wildcard first level never matches a topic starting with $
		// (MQTT 4.7.2), so only a literal $ level meets a $ filter.
		{"+/x", "$SYS/x", false},
		{"#", "$SYS/#", false},
		{"+/#", "$SYS/broker", false},
		{"$SYS/+", "$SYS/broker", true},
		{"$SYS/#", "$SYS/broker", true},
		{"#", "+/x", true},
	}
	for _, c := range cases {
		if got := Overlap(c.a, c.b); got != c.want {
			t.Errorf("Overlap(%q, %q) = %v, want %v", c.a, c.b, got, c.want)
		}
		if got := Overlap(c.b, c.a); got != c.want {
			t.Errorf("Overlap(%q, %q) = %v, want %v (symmetry)", c.b, c.a, got, c.want)
		}
	}
}

func TestValidFilter(t *testing.T) {
	for _, f := range []string{"a", "a/+/b", "#", "a/#", "+"} {
		if err := ValidFilter(f); err != nil {
			t.Errorf("%q: %v", f, err)
		}
	}
	for _, f := range []string{"", "a/#/b", "a#", "a/b+", "$share/g/a"} {
		if err := ValidFilter(f); err == nil {
			t.Errorf("%q accepted", f)
		}
	}
}

// Overlap must agree with Match: whenever a topic matches both filters,
// they overlap.
func FuzzOverlapAgreesWithMatch(f *testing.F) {
	f.Add("a/+/c", "a/b/#", "a/b/c")
	f.Add("#", "x", "x")
	f.Fuzz(func(t *testing.T, a, b, topic string) {
		if ValidFilter(a) != nil || ValidFilter(b) != nil || topic == "" {
			return
		}
		if Match(a, topic) && Match(b, topic) && !Overlap(a, b) {
			t.Fatalf("%q and %q both match %q but Overlap says no", a, b, topic)
		}
	})
}
