package attr

import (
	"testing"
	"time"
)

// The wire forms are the ones Python's isoformat writes (see the upstream
// codec tests); a record written by either side reads the same in both.
func TestDATETIMERoundTrips(t *testing.T) {
	for _, s := range []string{
		"2024-06-15T14:30:45.123456Z",
		"2024-01-01T00:00:00Z",
		"2024-01-01T02:00:00.123456+02:00",
		"2024-01-01T02:00:00-05:30",
		"2024-01-01T02:00:00.123456789Z",
	} {
		v, err := DATETIME.Decode(s)
		if err != nil {
			t.Errorf("Decode(%q): %v", s, err)
			continue
		}
		w, err := DATETIME.Encode(v)
		if err != nil || w != s {
			t.Errorf("round trip %q -> %v, %v", s, w, err)
		}
	}
}

func TestDATETIMENormalizes(t *testing.T) {
	cases := map[string]string{
		"2024-06-15T14:30:45.123Z":  "2024-06-15T14:30:45.123000Z", // microsecond width, as Python
		"2024-01-01T00:00:00+00:00": "2024-01-01T00:00:00Z",        // a zero offset reads as UTC
		"2024-01-01 02:00:00+02:00": "2024-01-01T02:00:00+02:00",   // space separator accepted
		"2024-01-01T00:00:00.5Z":    "2024-01-01T00:00:00.500000Z",
	}
	for in, want := range cases {
		v, err := DATETIME.Decode(in)
		if err != nil {
			t.Errorf("Decode(%q): %v", in, err)
			continue
		}
		if w, _ := DATETIME.Encode(v); w != want {
			t.Errorf("%q re-encodes as %v, want %q", in, w, want)
		}
	}
}

func TestDATETIMEEncodeZones(t *testing.T) {
	utc := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	if w, _ := DATETIME.Encode(utc); w != "2024-01-01T00:00:00Z" {
		t.Errorf("UTC: %v", w)
	}
	// Z asserts UTC, not a zero offset: a zone that merely sits at +00:00
	// (London in winter) keeps its offset, as in Python.
	london := time.Date(2024, 1, 1, 0, 0, 0, 0, time.FixedZone("GMT", 0))
	if w, _ := DATETIME.Encode(london); w != "2024-01-01T00:00:00+00:00" {
		t.Errorf("GMT: %v", w)
	}
	odd := time.Date(2024, 1, 1, 0, 0, 0, 0, time.FixedZone("LMT", 3600+30*60+15))
	if w, _ := DATETIME.Encode(odd); w != "2024-01-01T00:00:00+01:30:15" {
		t.Errorf("second offset: %v", w)
	}
	if _, err := DATETIME.Encode(time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)); err == nil {
		t.Error("year 10000 accepted")
	}
}

func TestDATETIMERejects(t *testing.T) {
	for _, bad := range []any{
		"2024-01-01T02:00:00",   // naive: no instant
		"2024-01-01T02:00Z",     // no seconds
		"2024-01-01t02:00:00Z",  // lower-case separator
		"2024-01-01T02:00:00z",  // lower-case Z
		"2024-01-01T24:00:00Z",  // hour 24
		"2024-02-30T00:00:00Z",  // no such day
		"2024-01-01T00:00:00.Z", // empty fraction
		"2024-01-01T00:00:00.1234567890Z",
		"2024-01-01T00:00:00+0200", // offset without colon
		"2024-01-01T00:00:00+24:00",
		"2024-01-01T00:00:00Z ",
		"20240101T000000Z",
		"",
		42,
	} {
		if _, err := DATETIME.Decode(bad); err == nil {
			t.Errorf("DATETIME.Decode(%#v) accepted it", bad)
		}
	}
}

func TestDATE(t *testing.T) {
	d, err := DATE.Decode("2026-03-15")
	if err != nil || d != (Date{2026, time.March, 15}) {
		t.Fatalf("Decode = %v, %v", d, err)
	}
	if w, _ := DATE.Encode(d); w != "2026-03-15" {
		t.Errorf("Encode = %v", w)
	}
	for _, bad := range []string{"2026-3-15", "20260315", "2026-02-29", "0000-01-01", "2026-03-15T00:00:00Z", "2026-W11-1"} {
		if _, err := DATE.Decode(bad); err == nil {
			t.Errorf("DATE.Decode(%q) accepted it", bad)
		}
	}
	if _, err := DATE.Encode(Date{2026, time.February, 30}); err == nil {
		t.Error("DATE wrote Feb 30")
	}
}

func TestTIME(t *testing.T) {
	for _, s := range []string{"13:30:00", "00:00:00", "23:59:59.123456", "13:30:00+02:00", "13:30:00+00:00", "01:02:03.000000001-05:00"} {
		v, err := TIME.Decode(s)
		if err != nil {
			t.Errorf("Decode(%q): %v", s, err)
			continue
		}
		if w, _ := TIME.Encode(v); w != s {
			t.Errorf("%q round-trips as %v", s, w)
		}
	}
	// Z reads as a zero offset and, unlike DATETIME, writes +00:00 (Python's
	// time.isoformat).
	v, err := TIME.Decode("13:30:00Z")
	if err != nil {
		t.Fatal(err)
	}
	if w, _ := TIME.Encode(v); w != "13:30:00+00:00" {
		t.Errorf("Z re-encodes as %v", w)
	}
	for _, bad := range []string{"13:30", "24:00:00", "13:60:00", "1:30:00", "13:30:00.", "13:30:00+2:00", "13:30:00 "} {
		if _, err := TIME.Decode(bad); err == nil {
			t.Errorf("TIME.Decode(%q) accepted it", bad)
		}
	}
	if _, err := TIME.Encode(TimeOfDay{Hour: 25}); err == nil {
		t.Error("TIME wrote hour 25")
	}
}
