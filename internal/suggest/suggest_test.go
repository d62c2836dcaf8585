package suggest

import (
	"slices"
	"testing"
)

func TestNearest(t *testing.T) {
	known := []string{"sensors-count", "sensors-dedupe", "billing", "sensors-count-v2", "poller"}
	for _, c := range []struct {
		id   string
		want []string
	}{
		{"sensors-cuont", []string{"sensors-count", "sensors-count-v2"}}, // a swap, nearest first
		{"sensor-count", []string{"sensors-count", "sensors-count-v2"}},  // a letter missing
		{"sensors-count", []string{"sensors-count-v2"}},                  // itself is not a suggestion
		{"biling", []string{"billing"}},
		{"zzz", []string{}},
		{"", []string{}},
	} {
		if got := Nearest(c.id, known); !slices.Equal(got, c.want) {
			t.Errorf("Nearest(%q) = %q, want %q", c.id, got, c.want)
		}
	}
	if d := editDistance("ab", "ba"); d != 1 {
		t.Errorf("a swap costs %d", d)
	}
}
