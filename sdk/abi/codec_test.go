package abi

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

func TestBatchRoundTrip(t *testing.T) {
	recs := []Record{
		{Flags: RecordHasState, Partition: 3, Offset: 1 << 40, Timestamp: -5, Topic: []byte("in"), Key: []byte("k"),
			Value: []byte(`{"a":1}`), StateKey: []byte("k"), State: []byte(`{"seq":1}`),
			Headers: []Header{{Key: []byte("h"), Value: []byte("v")}, {Key: []byte("n"), Value: nil}, {Key: []byte("e"), Value: []byte{}}}},
		{Flags: RecordValueNull | RecordKeyNull | RecordNoStateKey, Topic: []byte("in")},
	}
	var w BatchWriter
	w.Reset()
	for i := range recs {
		w.Add(&recs[i])
	}
	var br BatchReader
	if err := br.Reset(w.Bytes()); err != nil {
		t.Fatal(err)
	}
	if br.Len() != 2 {
		t.Fatalf("Len = %d", br.Len())
	}
	for i := range recs {
		var got Record
		if err := br.Next(&got); err != nil {
			t.Fatal(err)
		}
		want := recs[i]
		if got.Flags != want.Flags || got.Partition != want.Partition || got.Offset != want.Offset || got.Timestamp != want.Timestamp ||
			!bytes.Equal(got.Topic, want.Topic) || !bytes.Equal(got.Key, want.Key) || !bytes.Equal(got.Value, want.Value) ||
			!bytes.Equal(got.StateKey, want.StateKey) || !bytes.Equal(got.State, want.State) || len(got.Headers) != len(want.Headers) {
			t.Fatalf("record %d: got %+v, want %+v", i, got, want)
		}
		for j, h := range want.Headers {
			g := got.Headers[j]
			if !bytes.Equal(g.Key, h.Key) || !bytes.Equal(g.Value, h.Value) || (g.Value == nil) != (h.Value == nil) {
				t.Fatalf("record %d header %d: got %q=%q (nil %v), want %q=%q (nil %v)", i, j, g.Key, g.Value, g.Value == nil, h.Key, h.Value, h.Value == nil)
			}
		}
	}
	if err := br.Next(&Record{}); err == nil {
		t.Fatal("read past the last record")
	}
}

func TestResultRoundTrip(t *testing.T) {
	var w ResultWriter
	w.Reset()
	w.Begin()
	w.Message(&Message{Topic: []byte("out"), Key: []byte("k"), Value: []byte(`{}`)})
	w.Message(&Message{Flags: MessageValueNull | MessagePartition | MessageTimestamp | MessageHeaders, Topic: []byte("out"),
		Partition: 7, Timestamp: 99, Headers: []Header{{Key: []byte("x"), Value: nil}}})
	w.End(StateSet, []byte(`{"seq":2}`))
	w.Rejected("no device")
	w.Begin()
	w.End(StateDelete, nil)
	mark := w.Mark()
	w.Begin()
	w.Message(&Message{Topic: []byte("dropped")})
	w.Truncate(mark)
	w.Failed("bug")

	var rr ResultReader
	rr.Reset(w.Bytes())
	var res Result
	if err := rr.Next(&res); err != nil {
		t.Fatal(err)
	}
	if res.Kind != ResultDone || res.StateAction != StateSet || string(res.State) != `{"seq":2}` || len(res.Messages) != 2 {
		t.Fatalf("first: %+v", res)
	}
	m := res.Messages[1]
	if m.Value != nil || m.Partition != 7 || m.Timestamp != 99 || len(m.Headers) != 1 || m.Headers[0].Value != nil {
		t.Fatalf("second message: %+v", m)
	}
	if string(res.Messages[0].Value) != "{}" || res.Messages[0].Headers != nil {
		t.Fatalf("first message: %+v", res.Messages[0])
	}
	for _, want := range []Result{{Kind: ResultRejected, Reason: []byte("no device")}, {Kind: ResultDone, StateAction: StateDelete}, {Kind: ResultFailed, Reason: []byte("bug")}} {
		if err := rr.Next(&res); err != nil {
			t.Fatal(err)
		}
		if res.Kind != want.Kind || !bytes.Equal(res.Reason, want.Reason) || res.StateAction != want.StateAction || len(res.Messages) != 0 {
			t.Fatalf("got %+v, want %+v", res, want)
		}
	}
	if err := rr.End(); err != nil {
		t.Fatal(err)
	}
}

func TestReadersRefuseLies(t *testing.T) {
	var rr ResultReader
	for name, b := range map[string][]byte{
		"kind only half":        {0, 0},
		"unknown kind":          {9, 0, 0, 0},
		"reason past the end":   {1, 0, 0, 0, 0xff, 0xff, 0xff, 0x7f, 'x'},
		"unknown state action":  {0, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0},
		"message count too big": {0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0},
	} {
		rr.Reset(b)
		var res Result
		if err := rr.Next(&res); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	var br BatchReader
	if err := br.Reset([]byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0}); !errors.Is(err, ErrTruncated) {
		t.Errorf("huge record count: %v", err)
	}
	rr.Reset([]byte{2, 0, 0, 0, 1, 0, 0, 0, 'x', 'y'})
	var res Result
	if err := rr.Next(&res); err != nil {
		t.Fatal(err)
	}
	if err := rr.End(); err == nil {
		t.Error("trailing byte not reported")
	}
}

func TestVersionExport(t *testing.T) {
	if VersionExport(1) != "flecht_abi_v1" {
		t.Fatal(VersionExport(1))
	}
	for name, want := range map[string]int{"flecht_abi_v1": 1, "flecht_abi_v12": 12} {
		if v, ok := ParseVersionExport(name); !ok || v != want {
			t.Errorf("%s: %d %v", name, v, ok)
		}
	}
	for _, name := range []string{"flecht_abi_v", "flecht_abi_v01", "flecht_abi_v1x", "flecht_abi_v-1", "flecht_buffer", "flecht_abi_v9999999999"} {
		if v, ok := ParseVersionExport(name); ok {
			t.Errorf("%s parsed as %d", name, v)
		}
	}
}

// FuzzResultReader: whatever a module returns, the host's reader answers
// with results or an error, never a panic, and what it reads back writes
// the same bytes again.
func FuzzResultReader(f *testing.F) {
	var w ResultWriter
	w.Reset()
	w.Begin()
	w.Message(&Message{Flags: MessageHeaders | MessageTimestamp, Topic: []byte("out"), Key: []byte("k"), Value: []byte(`{}`), Headers: []Header{{Key: []byte("h")}}})
	w.End(StateSet, []byte(`{"seq":2}`))
	w.Rejected("bad")
	f.Add(w.Bytes())
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		var rr ResultReader
		rr.Reset(b)
		var again ResultWriter
		again.Reset()
		for {
			var res Result
			if err := rr.Next(&res); err != nil {
				return
			}
			switch res.Kind {
			case ResultDone:
				again.Begin()
				for i := range res.Messages {
					again.Message(&res.Messages[i])
				}
				again.End(res.StateAction, res.State)
			case ResultRejected:
				again.Rejected(string(res.Reason))
			case ResultFailed:
				again.Failed(string(res.Reason))
			}
			if rr.End() == nil {
				if !bytes.Equal(again.Bytes(), b) {
					t.Fatalf("read back and written again:\n%x\nwas\n%x", again.Bytes(), b)
				}
				return
			}
		}
	})
}

// FuzzBatchReader: a batch reader never panics, and reads back what the
// writer wrote.
func FuzzBatchReader(f *testing.F) {
	var w BatchWriter
	w.Reset()
	w.Add(&Record{Topic: []byte("t"), Headers: []Header{{Key: []byte("a"), Value: []byte("b")}}})
	f.Add(w.Bytes())
	f.Fuzz(func(t *testing.T, b []byte) {
		var br BatchReader
		if br.Reset(b) != nil {
			return
		}
		var again BatchWriter
		again.Reset()
		for i := 0; i < br.Len(); i++ {
			var rec Record
			if err := br.Next(&rec); err != nil {
				return
			}
			again.Add(&rec)
		}
		got := again.Bytes()
		if len(got) > len(b) || !reflect.DeepEqual(got[CursorOffset+4:], b[CursorOffset+4:len(got)]) {
			t.Fatalf("read back and written again:\n%x\nwas\n%x", got, b)
		}
	})
}
