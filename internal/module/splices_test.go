package module

import "testing"

// The host skips its check of an output only when the output is, byte
// for byte, what json_set spliced in the call: a value the module changed
// afterwards, a fallback's result and a value no splice made are checked.
func TestOnlyUnchangedSplicesSkipTheCheck(t *testing.T) {
	var s splices
	s.reset()
	a, code := s.set([]byte(`{"id":"1"}`), []byte("seq"), []byte("42"))
	if code != 0 || string(a) != `{"id":"1","seq":42}` {
		t.Fatalf("set = %s, %d", a, code)
	}
	fallback, code := s.set([]byte(`{ "id": "2" }`), []byte("seq"), []byte("1"))
	if code != 0 || string(fallback) != `{"id":"2","seq":1}` {
		t.Fatalf("set = %s, %d", fallback, code)
	}
	s.set([]byte(`{"seq":41}`), []byte("seq"), []byte("42"))
	if _, code := s.set([]byte(`[1]`), []byte("seq"), []byte("1")); code != -1 {
		t.Fatalf("an array: code %d, want -1", code)
	}
	changed := []byte(`{"id":"1","seq":43}`)
	for _, c := range []struct {
		v    string
		want bool
	}{
		{string(changed), false},
		{`{"id":"1","seq":42}`, true},
		{`{"id":"1","seq":42}`, false}, // matched already
		{`{"id":"2","seq":1}`, false},  // the fallback's: not proven
		{`{"seq":42}`, true},
		{`{"seq":42}`, false},
	} {
		if got := s.made([]byte(c.v)); got != c.want {
			t.Errorf("made(%s) = %v, want %v", c.v, got, c.want)
		}
	}
	s.reset()
	if s.made([]byte(`{"seq":42}`)) {
		t.Error("a splice of the call before counts in the next")
	}
}
