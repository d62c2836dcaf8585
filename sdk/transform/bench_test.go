package transform

import (
	"testing"

	"github.com/flecht-dev/flecht/sdk/abi"
)

// BenchmarkCountBatch runs a count handler (the count example's) over a
// batch of 64 records as the host sends it: the SDK's own cost per record
// (ns/op and allocs/op are per record), natively.
func BenchmarkCountBatch(b *testing.B) {
	handler = func(rec *Record, out *Output) error {
		seq, _ := rec.State().Int("seq")
		seq++
		if err := out.SendWith("counted", rec.KeyBytes(), rec.Value(), "seq", seq); err != nil {
			return Reject("%v", err)
		}
		return out.SetStateWith(rec.State().Bytes(), "seq", seq)
	}
	defer func() { handler = nil }()
	var w abi.BatchWriter
	w.Reset()
	for range 64 {
		w.Add(&abi.Record{Topic: []byte("in"), Key: []byte("key-1"), StateKey: []byte("key-1"), Flags: abi.RecordHasState,
			Value: []byte(`{"id":"1","pad":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}`), State: []byte(`{"seq":41}`)})
	}
	batch := w.Bytes()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i += 64 {
		transformBatch(batch, func(int) {})
	}
}
