package transform

import (
	"testing"

	"github.com/flecht-dev/flecht/sdk/abi"
	"github.com/flecht-dev/flecht/sdk/wire"
)

// BenchmarkCountBatch runs a count handler (the count example's) over a
// batch of 64 records as the host sends it: the SDK's own cost per record
// (ns/op and allocs/op are per record), natively.
func BenchmarkCountBatch(b *testing.B) {
	handler = func(rec *Record, out *Output) error {
		seq, _ := rec.State().Int("seq")
		seq++
		value, err := wire.With(rec.Value(), "seq", seq)
		if err != nil {
			return Reject("%v", err)
		}
		if err := out.SendBytes("counted", rec.KeyBytes(), value); err != nil {
			return err
		}
		state, err := wire.With(rec.State().Bytes(), "seq", seq)
		if err != nil {
			return err
		}
		return out.SetState(state)
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
