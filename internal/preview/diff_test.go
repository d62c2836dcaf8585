package preview

import (
	"encoding/json"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestDiffRecordsNamesThePaths(t *testing.T) {
	a := &kgo.Record{Topic: "out", Key: []byte("k"), Value: []byte(`{"a":1,"b":{"c":[1,2]},"d":"x","odd key":1}`)}
	b := &kgo.Record{Topic: "out", Key: []byte("k"), Value: []byte(`{"a":1,"b":{"c":[1,3,4]},"e":true,"odd key":2}`)}
	got := diffRecords(a, b)
	want := []string{"value.b.c[1]", "value.b.c[2]", "value.d", "value.e", `value["odd key"]`}
	if len(got) != len(want) {
		t.Fatalf("changes %+v, want paths %q", got, want)
	}
	for i, c := range got {
		if c.Path != want[i] {
			t.Errorf("change %d at %s, want %s", i, c.Path, want[i])
		}
	}
	if got[2].Candidate != nil || string(got[2].Current) != `"x"` {
		t.Errorf("value.d removed: %+v", got[2])
	}
	if fieldOf("value.b.c[12].x") != "value.b.c[*].x" {
		t.Errorf("fieldOf: %s", fieldOf("value.b.c[12].x"))
	}
	// The same JSON in other bytes is a change of the value: readers see
	// the bytes.
	if got := diffRecords(&kgo.Record{Value: []byte(`{"a":1}`)}, &kgo.Record{Value: []byte(`{ "a": 1 }`)}); len(got) != 1 || got[0].Path != "value" {
		t.Errorf("reformatted value: %+v", got)
	}
}

// Values and keys come from Kafka: any bytes compare without a panic,
// a record equals itself, and every change's sides are JSON.
func FuzzDiffRecords(f *testing.F) {
	f.Add([]byte("k"), []byte(`{"a":[1,{"b":null}],"c":"x"}`), []byte(`{"a":[1,{"b":2}]}`))
	f.Add([]byte{0xff}, []byte(`[1,2`), []byte(nil))
	f.Add([]byte(nil), []byte(`1e999`), []byte(`"\ud800"`))
	f.Fuzz(func(t *testing.T, key, a, b []byte) {
		ra := &kgo.Record{Topic: "t", Key: key, Value: a, Headers: []kgo.RecordHeader{{Key: string(key), Value: a}}}
		rb := &kgo.Record{Topic: "t", Key: key, Value: b}
		if got := diffRecords(ra, ra); len(got) != 0 {
			t.Fatalf("a record differs from itself: %+v", got)
		}
		for _, c := range diffRecords(ra, rb) {
			for _, side := range []json.RawMessage{c.Current, c.Candidate} {
				if side != nil && !json.Valid(side) {
					t.Fatalf("%s: side %q is not JSON", c.Path, side)
				}
			}
		}
	})
}
