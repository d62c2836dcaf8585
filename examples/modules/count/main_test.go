package main

import (
	"testing"

	"github.com/flecht-dev/flecht/sdk/transform"
	"github.com/flecht-dev/flecht/sdk/transformtest"
)

func TestCountsPerKey(t *testing.T) {
	h, err := transformtest.New(transform.Setup{OutputTopics: []string{"counted"}})
	if err != nil {
		t.Fatal(err)
	}
	for i, step := range []struct{ key, value, want string }{
		{"a", `{"t":20}`, `{"seq":1,"t":20}`},
		{"b", `{"z":1,"a":2.50}`, `{"a":2.5,"seq":1,"z":1}`}, // not canonical: rewritten as Python writes it
		{"a", `{"t":21,"seq":7}`, `{"seq":2,"t":21}`},
	} {
		res := h.Run(transformtest.Input{Key: step.key, Value: []byte(step.value)})
		if res.Err != nil || len(res.Messages) != 1 || string(res.Messages[0].Value) != step.want || res.Messages[0].Topic != "counted" {
			t.Fatalf("record %d: %+v, want %s", i, res, step.want)
		}
	}
	if got := string(h.State["a"]); got != `{"seq":2}` {
		t.Errorf("state of a = %s", got)
	}
	// A tombstone neither counts nor writes; an array is rejected.
	if res := h.Run(transformtest.Input{Key: "a", Tombstone: true}); res.Err != nil || len(res.Messages) != 0 || res.StateChanged {
		t.Errorf("tombstone: %+v", res)
	}
	if res := h.Run(transformtest.Input{Key: "a", Value: []byte(`[1]`)}); res.Rejected == "" {
		t.Errorf("array: %+v", res)
	}
}

func TestRefusesTwoOutputTopics(t *testing.T) {
	if _, err := transformtest.New(transform.Setup{OutputTopics: []string{"x", "y"}}); err == nil {
		t.Fatal("two output topics accepted")
	}
}
