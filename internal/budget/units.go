package budget

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// ParseRate reads a message rate such as 10/s, 600/min, 36000/h or 2.5/s
// and returns messages per second. Underscores may group digits (1_000/s).
func ParseRate(s string) (float64, error) {
	num, unit, ok := strings.Cut(strings.TrimSpace(s), "/")
	if !ok {
		return 0, fmt.Errorf("rate %q: give a unit, e.g. 10/s, 600/min or 36000/h", s)
	}
	v, err := parseNumber(num)
	if err != nil {
		return 0, fmt.Errorf("rate %q: %v", s, err)
	}
	var per float64
	switch strings.ToLower(strings.TrimSpace(unit)) {
	case "s", "sec", "second":
		per = 1
	case "m", "min", "minute":
		per = 60
	case "h", "hr", "hour":
		per = 3600
	case "d", "day":
		per = 86400
	default:
		return 0, fmt.Errorf("rate %q: unknown unit %q (use /s, /min, /h or /d)", s, unit)
	}
	return v / per, nil
}

func parseNumber(s string) (float64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, errors.New("missing number")
	}
	if strings.HasPrefix(s, "_") || strings.HasSuffix(s, "_") || strings.Contains(s, "__") {
		return 0, fmt.Errorf("%q is not a number", s)
	}
	clean := strings.ReplaceAll(s, "_", "")
	for _, c := range clean {
		if (c < '0' || c > '9') && c != '.' {
			return 0, fmt.Errorf("%q is not a non-negative decimal number", s)
		}
	}
	v, err := strconv.ParseFloat(clean, 64)
	if err != nil || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, fmt.Errorf("%q is not a number", s)
	}
	return v, nil
}

// ParseDuration reads Go duration syntax (90s, 1h30m, 250ms) plus d for
// days (7d, 1.5d, 1d12h). Negative durations are refused.
func ParseDuration(s string) (time.Duration, error) {
	in := strings.TrimSpace(s)
	if in == "" {
		return 0, errors.New("empty duration")
	}
	if strings.HasPrefix(in, "-") {
		return 0, fmt.Errorf("duration %q is negative", s)
	}
	in = strings.TrimPrefix(in, "+")
	if in == "0" {
		return 0, nil
	}
	// Rewrite every "<number>d" as hours for time.ParseDuration.
	var b strings.Builder
	for i := 0; i < len(in); {
		j := i
		for j < len(in) && (in[j] == '.' || (in[j] >= '0' && in[j] <= '9')) {
			j++
		}
		k := j
		for k < len(in) && !(in[k] == '.' || (in[k] >= '0' && in[k] <= '9')) {
			k++
		}
		num, unit := in[i:j], in[j:k]
		if num == "" || unit == "" {
			return 0, fmt.Errorf("duration %q: use e.g. 90s, 15m, 24h or 7d", s)
		}
		if unit == "d" {
			v, err := strconv.ParseFloat(num, 64)
			if err != nil {
				return 0, fmt.Errorf("duration %q: %q is not a number", s, num)
			}
			b.WriteString(strconv.FormatFloat(v*24, 'f', -1, 64) + "h")
		} else {
			b.WriteString(num + unit)
		}
		i = k
	}
	d, err := time.ParseDuration(b.String())
	if err != nil {
		return 0, fmt.Errorf("duration %q: use e.g. 90s, 15m, 24h or 7d", s)
	}
	return d, nil
}

// ParseSize reads a byte size: 512, 512B, 4kB (1000), 4KiB (1024), MB,
// MiB, GB, GiB.
func ParseSize(s string) (int64, error) {
	in := strings.TrimSpace(s)
	i := 0
	for i < len(in) && (in[i] == '.' || (in[i] >= '0' && in[i] <= '9')) {
		i++
	}
	v, err := parseNumber(in[:i])
	if err != nil {
		return 0, fmt.Errorf("size %q: %v", s, err)
	}
	mult := map[string]float64{
		"": 1, "b": 1,
		"kb": 1e3, "mb": 1e6, "gb": 1e9,
		"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30,
	}[strings.ToLower(strings.TrimSpace(in[i:]))]
	if mult == 0 {
		return 0, fmt.Errorf("size %q: unknown unit (use B, kB, KiB, MB, MiB, GB or GiB)", s)
	}
	n := v * mult
	if n > math.MaxInt64/2 {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return int64(math.Round(n)), nil
}

// FormatDuration prints a duration for people: whole seconds from one
// second up (16m40s, 24h, 27h46m40s), days from two days up (7d, 2d3h),
// milliseconds below a second.
func FormatDuration(d time.Duration) string {
	if d < 0 {
		return "-" + FormatDuration(-d)
	}
	if d < time.Second {
		return d.Round(time.Millisecond).String()
	}
	d = d.Round(time.Second)
	var b strings.Builder
	if d >= 48*time.Hour {
		fmt.Fprintf(&b, "%dd", d/(24*time.Hour))
		d %= 24 * time.Hour
	}
	for _, u := range []struct {
		d    time.Duration
		name string
	}{{time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}} {
		if n := d / u.d; n > 0 {
			fmt.Fprintf(&b, "%d%s", n, u.name)
			d %= u.d
		}
	}
	return b.String()
}

// FormatCount prints n with thousands separators: 864,000.
func FormatCount(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// FormatNumber prints a non-integer quantity for people: grouped integers
// from 100 up, two decimals from 1, three significant digits below, and
// in exponent form from 1e15 (past exact integers, and past int64).
func FormatNumber(v float64) string {
	switch {
	case math.IsInf(v, 0) || math.IsNaN(v):
		return fmt.Sprint(v)
	case math.Abs(v) >= 1e15:
		return strconv.FormatFloat(v, 'g', 3, 64)
	case v >= 100 || v == math.Trunc(v):
		return FormatCount(int64(math.Round(v)))
	case v >= 1:
		return strconv.FormatFloat(math.Round(v*100)/100, 'f', -1, 64)
	default:
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
}

// FormatRate prints messages per second: 10/s, 0.167/s, 2,000/s.
func FormatRate(perSecond float64) string { return FormatNumber(perSecond) + "/s" }

// FormatBytes prints a byte count in binary units: 512 B, 1.5 KiB, 64 MiB.
func FormatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n), 0
	for v >= unit && i < 3 {
		v /= unit
		i++
	}
	return strconv.FormatFloat(math.Round(v*10)/10, 'f', -1, 64) + " " + []string{"B", "KiB", "MiB", "GiB"}[i]
}

func seconds(d time.Duration) float64 { return d.Seconds() }

func fromSeconds(s float64) time.Duration {
	if s >= float64(math.MaxInt64)/float64(time.Second) {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(s * float64(time.Second))
}
