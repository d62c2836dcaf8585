package testrun

import (
	"testing"
)

// FuzzParseTestRecord: whatever a line of --input holds, it is a record or
// an error, never a panic.
func FuzzParseTestRecord(f *testing.F) {
	for _, seed := range []string{
		`{"key": "dev-1", "value": {"t": 20}, "timestamp": "2026-01-01T00:00:00Z"}`,
		`{"key": null, "value": null, "topic": "raw", "partition": 2, "offset": 9, "headers": {"a": "b", "n": null}}`,
		`{"key": "k", "value_base64": "AAE=", "timestamp": 17}`,
		`{"key": "k", "value_text": "x", "value": {}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		rec, err := parseRecord(line, map[string]int64{})
		if err == nil && (rec == nil || rec.Topic == "" || rec.Partition < 0 || rec.Offset < 0) {
			t.Fatalf("%q parsed to %+v", line, rec)
		}
	})
}
