package budget

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/flecht-dev/flecht/internal/textfmt"
)

func TestParseRate(t *testing.T) {
	for in, want := range map[string]float64{
		"10/s": 10, "600/min": 10, "36000/h": 10, "2.5/s": 2.5, "1_000/s": 1000,
		"0/s": 0, "864000/d": 10, " 30 / min ": 0.5, "1/hour": 1.0 / 3600, "90/m": 1.5,
	} {
		got, err := ParseRate(in)
		if err != nil || math.Abs(got-want) > 1e-12 {
			t.Errorf("ParseRate(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for in, want := range map[string]string{
		"10": "give a unit", "10/week": "unknown unit", "/s": "missing number", "-1/s": "not a non-negative",
		"1e3/s": "not a non-negative", "ten/s": "not a non-negative", "1__0/s": "not a number", "NaN/s": "not a non-negative",
		"1.2.3/s": "not a number",
	} {
		if _, err := ParseRate(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseRate(%q): want error %q, got %v", in, want, err)
		}
	}
}

func TestParseDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"24h": 24 * time.Hour, "7d": 7 * 24 * time.Hour, "1.5d": 36 * time.Hour, "1d12h30m": 36*time.Hour + 30*time.Minute,
		"90s": 90 * time.Second, "250ms": 250 * time.Millisecond, "0": 0, "+5m": 5 * time.Minute, "0.5h": 30 * time.Minute,
	} {
		got, err := ParseDuration(in)
		if err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-1h", "7", "d", "1dd", "1x", "h1", "1.2.3d", "999999999999d"} {
		if _, err := ParseDuration(in); err == nil {
			t.Errorf("ParseDuration(%q): want an error", in)
		}
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"512": 512, "512B": 512, "4kB": 4000, "4KB": 4000, "4KiB": 4096, "1.5MiB": 1572864, "2GB": 2e9, "1 MiB": 1 << 20} {
		got, err := ParseSize(in)
		if err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "x", "1TB", "-1", "1e30GiB"} {
		if _, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q): want an error", in)
		}
	}
}

// Every duration ParseDuration accepts prints back as one it reads to the
// same value (to the second).
func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"24h", "7d", "1.5d", "1d12h30m", "250ms", "0", "1x", "-1h", "9999999d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDuration(s)
		if err != nil {
			return
		}
		if d < 0 {
			t.Fatalf("%q parsed negative: %v", s, d)
		}
		if d < time.Second {
			return
		}
		back, err := ParseDuration(textfmt.FormatDuration(d))
		if err != nil || back != d.Round(time.Second) {
			t.Fatalf("%q → %v → %q → %v, %v", s, d, textfmt.FormatDuration(d), back, err)
		}
	})
}

func FuzzParseRate(f *testing.F) {
	for _, s := range []string{"10/s", "600/min", "36000/h", "2.5/s", "1_000/s", "/s", "1/", "x/y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRate(s)
		if err != nil {
			return
		}
		if r < 0 || math.IsNaN(r) || math.IsInf(r, 0) {
			t.Fatalf("%q → %v", s, r)
		}
	})
}
