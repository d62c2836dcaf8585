package textfmt

import (
	"testing"
	"time"
)

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
		if got := GroupDigits(n); got != want {
			t.Errorf("GroupDigits(%d) = %q, want %q", n, got, want)
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

func TestGroupDigits(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 864000: "864,000", -1234567: "-1,234,567"} {
		if got := GroupDigits(n); got != want {
			t.Errorf("GroupDigits(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestPluralAndLists(t *testing.T) {
	if got := Plural(1, "task"); got != "1 task" {
		t.Error(got)
	}
	if got := Plural(2000, "reading"); got != "2,000 readings" {
		t.Error(got)
	}
	if got := PluralForm(2, "entry", "entries"); got != "entries" {
		t.Error(got)
	}
	if got := QuoteList([]string{"a", "b", "c"}); got != `"a", "b", "c"` {
		t.Error(got)
	}
	if got := QuoteChoices([]string{"a", "b", "c"}); got != `"a", "b" or "c"` {
		t.Error(got)
	}
	if got := QuoteChoices([]string{"a"}); got != `"a"` {
		t.Error(got)
	}
}
