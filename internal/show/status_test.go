package show

import (
	"bytes"
	"strings"
	"testing"

	"github.com/flecht-dev/flecht/internal/status"
	"github.com/flecht-dev/flecht/internal/ui"
)

// Each instance's standbys are listed with how far each is behind; an
// instance that keeps none gets no line.
func TestInstancesShowStandbys(t *testing.T) {
	m := &status.Modules{Instances: []status.Instance{
		{URL: "http://a/metrics", Runs: status.RunsBuiltin, Standbys: []status.Standby{{Partition: 1, Behind: 12500}, {Partition: 4}}},
		{URL: "http://b/metrics", Runs: status.RunsBuiltin},
	}}
	var b bytes.Buffer
	Instances(ui.NewHuman(&b, false), m)
	out := b.String()
	if !strings.Contains(out, "standbys: http://a/metrics keeps partitions 1 (12,500 behind), 4 (0 behind)") {
		t.Errorf("shown as:\n%s", out)
	}
	if strings.Contains(out, "http://b/metrics keeps") {
		t.Errorf("an instance without standbys listed:\n%s", out)
	}
}
