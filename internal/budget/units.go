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

func seconds(d time.Duration) float64 { return d.Seconds() }

func fromSeconds(s float64) time.Duration {
	if s >= float64(math.MaxInt64)/float64(time.Second) {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(s * float64(time.Second))
}
