package kafkax

import "testing"

func TestFormatPartitions(t *testing.T) {
	got := FormatPartitions(map[string][]int32{"sensors.raw": {1, 0}, "cfg": {2}})
	if got != "cfg:2 sensors.raw:0,1" {
		t.Errorf("got %q", got)
	}
	if got := FormatPartitions(nil); got != "" {
		t.Errorf("empty: %q", got)
	}
}
