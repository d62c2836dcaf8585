// Package textfmt turns values into text for people: numbers, counts,
// durations and sizes, quoted lists, and text from outside the process
// made safe for a terminal or a shell. Every command and domain package
// formats through it, so one quantity reads the same everywhere.
package textfmt

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

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

// GroupDigits writes n with thousands separators: 864000 → "864,000".
func GroupDigits(n int64) string {
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
		return GroupDigits(int64(math.Round(v)))
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
