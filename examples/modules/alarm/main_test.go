package main

import (
	"testing"
	"time"

	"github.com/flecht-dev/flecht/sdk/transform"
	"github.com/flecht-dev/flecht/sdk/transformtest"
	"github.com/flecht-dev/flecht/sdk/wire"
)

// The alarm rises at high, holds while the reading wobbles between the
// thresholds, and clears only at low.
func TestHysteresis(t *testing.T) {
	h, err := transformtest.New(transform.Setup{OutputTopics: []string{"alarms"},
		Config: wire.Object{"field": "temp", "high": 30, "low": 25}})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var events []string
	for i, temp := range []float64{20, 29, 30, 31, 27, 29, 26, 25, 28, 33} {
		res := h.Run(transformtest.Input{Key: "boiler", Value: wire.Object{"temp": temp}, Time: start.Add(time.Duration(i) * time.Minute)})
		if res.Err != nil || res.Rejected != "" {
			t.Fatalf("reading %v: %+v", temp, res)
		}
		for _, m := range res.Messages {
			events = append(events, string(m.Value))
		}
	}
	want := []string{
		`{"alarm":"raised","at":"2026-01-01T00:02:00Z","temp":30.0,"threshold":30.0}`,
		`{"alarm":"cleared","at":"2026-01-01T00:07:00Z","temp":25.0,"threshold":25.0}`,
		`{"alarm":"raised","at":"2026-01-01T00:09:00Z","temp":33.0,"threshold":30.0}`,
	}
	if len(events) != len(want) {
		t.Fatalf("events %q, want %q", events, want)
	}
	for i := range want {
		if events[i] != want[i] {
			t.Errorf("event %d: %s, want %s", i, events[i], want[i])
		}
	}
	if got := string(h.State["boiler"]); got != `{"raised":true,"since":1767226140000}` {
		t.Errorf("state = %s", got)
	}
}

func TestRejectsAReadingThatIsNotANumber(t *testing.T) {
	h, err := transformtest.New(transform.Setup{OutputTopics: []string{"alarms"}, Config: wire.Object{"field": "temp", "high": 30, "low": 25}})
	if err != nil {
		t.Fatal(err)
	}
	if res := h.Run(transformtest.Input{Key: "k", Value: wire.Object{"temp": "hot"}}); res.Rejected == "" {
		t.Errorf("%+v", res)
	}
}

func TestRefusesThresholdsThatOverlap(t *testing.T) {
	_, err := transformtest.New(transform.Setup{OutputTopics: []string{"a"}, Config: wire.Object{"field": "t", "high": 20, "low": 25}})
	if err == nil {
		t.Fatal("low above high accepted")
	}
}
