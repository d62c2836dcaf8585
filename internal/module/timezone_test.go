package module_test

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/module"
)

// A module that embeds Go's zone database (time/tzdata) converts to a
// named zone, the same bytes in every run: it sees no zone file of the
// host's, whatever the host has.
func TestTimeZonesFromTheModulesOwnDatabase(t *testing.T) {
	at := func(key, utc string, offset int64) *kgo.Record {
		ts, err := time.Parse(time.RFC3339, utc)
		if err != nil {
			t.Fatal(err)
		}
		return &kgo.Record{Topic: "in", Partition: 2, Offset: offset, Key: []byte(key), Value: []byte(`{"zone":"Europe/Berlin"}`), Timestamp: ts}
	}
	recs := []*kgo.Record{at("winter", "2024-01-15T12:00:00Z", 0), at("summer", "2024-07-15T12:00:00Z", 1)}
	want := []string{
		`{"local":"2024-01-15T13:00:00.000 CET +01:00","zone":"Europe/Berlin"}`,
		`{"local":"2024-07-15T14:00:00.000 CEST +02:00","zone":"Europe/Berlin"}`,
	}
	path := testModule(t, "timezone")
	for run := range 2 {
		res, err := offline(t, module.Spec{Path: path}, recs...)
		if err != nil {
			t.Fatalf("run %d: %v", run, err)
		}
		for i, r := range res {
			if r.Rejected != "" || len(r.Messages) != 1 || string(r.Messages[0].RawValue) != want[i] {
				t.Errorf("run %d, record %d: %+v, want %s", run, i, r, want[i])
			}
		}
	}
}

// Without a zone database of its own a module loads, and time.LoadLocation
// fails as for a zone nobody knows.
func TestTimeZonesWithoutADatabase(t *testing.T) {
	res, err := offline(t, module.Spec{Path: testModule(t, "nozonedb")}, rec("k", `{"zone":"Europe/Berlin"}`, 0))
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || !strings.Contains(res[0].Rejected, "unknown time zone Europe/Berlin") {
		t.Fatalf("results %+v, want a rejection saying the zone is unknown", res)
	}
}
