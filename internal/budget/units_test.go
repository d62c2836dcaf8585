package budget

import (
	"math"
	"strings"
	"testing"
	"time"
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

func TestFormat(t *testing.T) {
	for d, want := range map[time.Duration]string{
		1000 * time.Second: "16m40s", 24 * time.Hour: "24h", 100000 * time.Second: "27h46m40s",
		864000 * time.Second: "10d", 50 * time.Hour: "2d2h", 0: "0s", 125 * time.Millisecond: "125ms",
		time.Hour + 5*time.Second: "1h5s", 1499 * time.Millisecond: "1s",
	} {
		if got := FormatDuration(d); got != want {
			t.Errorf("FormatDuration(%v) = %q, want %q", d, got, want)
		}
	}
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 864000: "864,000", 1234567890: "1,234,567,890", -4500: "-4,500"} {
		if got := FormatCount(n); got != want {
			t.Errorf("FormatCount(%d) = %q, want %q", n, got, want)
		}
	}
	for v, want := range map[float64]string{10: "10/s", 2000: "2,000/s", 12.345: "12.35/s", 1.0 / 6: "0.167/s", 160: "160/s", 199.7: "200/s",
		1e26: "1e+26/s", 1e15: "1e+15/s", 99_999_999_999_999: "99,999,999,999,999/s"} {
		if got := FormatRate(v); got != want {
			t.Errorf("FormatRate(%v) = %q, want %q", v, got, want)
		}
	}
	for n, want := range map[int64]string{512: "512 B", 1536: "1.5 KiB", 64 << 20: "64 MiB"} {
		if got := FormatBytes(n); got != want {
			t.Errorf("FormatBytes(%d) = %q, want %q", n, got, want)
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
		back, err := ParseDuration(FormatDuration(d))
		if err != nil || back != d.Round(time.Second) {
			t.Fatalf("%q → %v → %q → %v, %v", s, d, FormatDuration(d), back, err)
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
