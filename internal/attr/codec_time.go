package attr

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Date is a calendar date without a time or zone: the Go value of DATE.
type Date struct {
	Year  int
	Month time.Month
	Day   int
}

// DateOf returns the date of t in t's own location.
func DateOf(t time.Time) Date {
	y, m, d := t.Date()
	return Date{Year: y, Month: m, Day: d}
}

// In returns midnight of d in loc.
func (d Date) In(loc *time.Location) time.Time {
	return time.Date(d.Year, d.Month, d.Day, 0, 0, 0, 0, loc)
}

// String is the wire form, YYYY-MM-DD.
func (d Date) String() string {
	return fmt.Sprintf("%04d-%02d-%02d", d.Year, int(d.Month), d.Day)
}

func (d Date) valid() bool {
	if d.Year < 1 || d.Year > 9999 {
		return false
	}
	return DateOf(d.In(time.UTC)) == d
}

// TimeOfDay is a wall-clock time, optionally with a fixed UTC offset: the Go
// value of TIME.
type TimeOfDay struct {
	Hour, Minute, Second, Nanosecond int
	// HasOffset marks a zoned time; Offset is then seconds east of UTC.
	HasOffset bool
	Offset    int
}

// String is the wire form: HH:MM:SS, a fraction only when non-zero (6 digits
// when it is whole microseconds, else 9), and ±HH:MM when zoned. Unlike
// DATETIME a zero offset stays +00:00, as Python's time.isoformat writes it.
func (t TimeOfDay) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%02d:%02d:%02d", t.Hour, t.Minute, t.Second)
	writeFraction(&b, t.Nanosecond)
	if t.HasOffset {
		writeOffset(&b, t.Offset)
	}
	return b.String()
}

func (t TimeOfDay) valid() bool {
	return t.Hour >= 0 && t.Hour < 24 && t.Minute >= 0 && t.Minute < 60 &&
		t.Second >= 0 && t.Second < 60 && t.Nanosecond >= 0 && t.Nanosecond < 1e9 &&
		(!t.HasOffset || (t.Offset > -86400 && t.Offset < 86400))
}

// DATE is an ISO 8601 calendar date, exactly YYYY-MM-DD.
var DATE Codec[Date] = newCodec("DATE",
	func(d Date) (any, error) {
		if !d.valid() {
			return nil, fmt.Errorf("invalid date %04d-%02d-%02d", d.Year, int(d.Month), d.Day)
		}
		return d.String(), nil
	},
	func(w any) (Date, error) {
		s, ok := w.(string)
		if !ok {
			return Date{}, wrongType("date string", w)
		}
		d, ok := parseDate(s)
		if !ok {
			return Date{}, fmt.Errorf("not a YYYY-MM-DD date: %q", clip(s))
		}
		return d, nil
	})

// DATETIME is an RFC 3339 timestamp. Written as Python's isoformat writes it:
// seconds always, a fraction only when non-zero (6 digits for whole
// microseconds, 9 otherwise), Z when the zone is UTC, else ±HH:MM. Read with
// T or space as separator; an offset is required, because a naive timestamp
// names no instant. A +00:00 reads back as UTC and so re-encodes as Z, as in
// Python.
var DATETIME Codec[time.Time] = newCodec("DATETIME",
	func(t time.Time) (any, error) {
		if y := t.Year(); y < 1 || y > 9999 {
			return nil, fmt.Errorf("year %d is outside 0001-9999", y)
		}
		var b strings.Builder
		b.WriteString(t.Format("2006-01-02T15:04:05"))
		writeFraction(&b, t.Nanosecond())
		if name, off := t.Zone(); off == 0 && name == "UTC" {
			b.WriteByte('Z')
		} else {
			writeOffset(&b, off)
		}
		return b.String(), nil
	},
	func(w any) (time.Time, error) {
		s, ok := w.(string)
		if !ok {
			return time.Time{}, wrongType("datetime string", w)
		}
		t, err := parseDateTime(s)
		if err != nil {
			return time.Time{}, err
		}
		return t, nil
	})

// TIME is an ISO 8601 time of day, HH:MM:SS[.fraction][Z|±HH:MM].
var TIME Codec[TimeOfDay] = newCodec("TIME",
	func(t TimeOfDay) (any, error) {
		if !t.valid() {
			return nil, fmt.Errorf("invalid time of day %+v", t)
		}
		return t.String(), nil
	},
	func(w any) (TimeOfDay, error) {
		s, ok := w.(string)
		if !ok {
			return TimeOfDay{}, wrongType("time string", w)
		}
		t, rest, ok := parseClock(s)
		if ok && rest != "" {
			t.HasOffset = true
			t.Offset, ok = parseOffset(rest)
		}
		if !ok || !t.valid() {
			return TimeOfDay{}, fmt.Errorf("not an HH:MM:SS[.f][±HH:MM] time: %q", clip(s))
		}
		return t, nil
	})

func parseDate(s string) (Date, bool) {
	if len(s) != 10 || s[4] != '-' || s[7] != '-' {
		return Date{}, false
	}
	y, ok1 := digits(s[0:4])
	m, ok2 := digits(s[5:7])
	d, ok3 := digits(s[8:10])
	date := Date{Year: y, Month: time.Month(m), Day: d}
	if !ok1 || !ok2 || !ok3 || !date.valid() {
		return Date{}, false
	}
	return date, true
}

// parseClock reads HH:MM:SS[.f{1,9}] and returns what follows.
func parseClock(s string) (TimeOfDay, string, bool) {
	if len(s) < 8 || s[2] != ':' || s[5] != ':' {
		return TimeOfDay{}, "", false
	}
	h, ok1 := digits(s[0:2])
	m, ok2 := digits(s[3:5])
	sec, ok3 := digits(s[6:8])
	if !ok1 || !ok2 || !ok3 {
		return TimeOfDay{}, "", false
	}
	t := TimeOfDay{Hour: h, Minute: m, Second: sec}
	rest := s[8:]
	if strings.HasPrefix(rest, ".") {
		n := 1
		for n < len(rest) && isDigit(rest[n]) {
			n++
		}
		frac := rest[1:n]
		if len(frac) == 0 || len(frac) > 9 {
			return TimeOfDay{}, "", false
		}
		ns, _ := strconv.Atoi(frac + strings.Repeat("0", 9-len(frac)))
		t.Nanosecond = ns
		rest = rest[n:]
	}
	return t, rest, true
}

// parseOffset reads Z or ±HH:MM into seconds east of UTC.
func parseOffset(s string) (int, bool) {
	if s == "Z" {
		return 0, true
	}
	if len(s) != 6 || (s[0] != '+' && s[0] != '-') || s[3] != ':' {
		return 0, false
	}
	h, ok1 := digits(s[1:3])
	m, ok2 := digits(s[4:6])
	if !ok1 || !ok2 || h > 23 || m > 59 {
		return 0, false
	}
	off := h*3600 + m*60
	if s[0] == '-' {
		off = -off
	}
	return off, true
}

func parseDateTime(s string) (time.Time, error) {
	bad := func(why string) error {
		return fmt.Errorf("not an RFC 3339 datetime (%s): %q", why, clip(s))
	}
	if len(s) < 19 || (s[10] != 'T' && s[10] != ' ') {
		return time.Time{}, bad("want YYYY-MM-DDTHH:MM:SS")
	}
	d, ok := parseDate(s[:10])
	if !ok {
		return time.Time{}, bad("bad date")
	}
	c, rest, ok := parseClock(s[11:])
	if !ok || !c.valid() {
		return time.Time{}, bad("bad time")
	}
	if rest == "" {
		return time.Time{}, bad("missing UTC offset; naive datetimes name no instant")
	}
	off, ok := parseOffset(rest)
	if !ok {
		return time.Time{}, bad("bad UTC offset")
	}
	loc := time.UTC
	if off != 0 {
		loc = time.FixedZone("", off)
	}
	return time.Date(d.Year, d.Month, d.Day, c.Hour, c.Minute, c.Second, c.Nanosecond, loc), nil
}

func writeFraction(b *strings.Builder, ns int) {
	switch {
	case ns == 0:
	case ns%1000 == 0:
		fmt.Fprintf(b, ".%06d", ns/1000)
	default:
		fmt.Fprintf(b, ".%09d", ns)
	}
}

func writeOffset(b *strings.Builder, off int) {
	sign := byte('+')
	if off < 0 {
		sign, off = '-', -off
	}
	b.WriteByte(sign)
	fmt.Fprintf(b, "%02d:%02d", off/3600, off/60%60)
	if s := off % 60; s != 0 {
		fmt.Fprintf(b, ":%02d", s)
	}
}

func digits(s string) (int, bool) {
	n := 0
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return 0, false
		}
		n = n*10 + int(s[i]-'0')
	}
	return n, len(s) > 0
}

// clip keeps error messages short when a field holds something huge.
func clip(s string) string {
	const limit = 64
	if len(s) <= limit {
		return s
	}
	return s[:limit] + "…"
}
