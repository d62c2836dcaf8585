package budget

import (
	"context"
	"errors"
	"math"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/devenv/devenvtest"
)

// pattern returns timestamps at rate/s from start for d.
func pattern(start time.Time, d time.Duration, rate int) []time.Time {
	n := int(d.Seconds()) * rate
	out := make([]time.Time, n)
	step := time.Second / time.Duration(rate)
	for i := range out {
		out[i] = start.Add(time.Duration(i) * step)
	}
	return out
}

func TestRateCounterFindsAnUnalignedBurst(t *testing.T) {
	from := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	to := from.Add(10 * time.Minute)
	c, err := NewRateCounter(from, to, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// 10/s throughout, plus a one-minute burst of 190/s more starting at a
	// time no fixed one-minute window would catch whole.
	burstAt := from.Add(4*time.Minute + 29*time.Second + 300*time.Millisecond)
	for _, ts := range pattern(from, 10*time.Minute, 10) {
		c.Add(ts)
	}
	for _, ts := range pattern(burstAt, time.Minute, 190) {
		c.Add(ts)
	}
	peak, at := c.Peak()
	if math.Abs(peak-200)/200 > 0.02 {
		t.Errorf("peak %v, want 200/s within 2%%", peak)
	}
	if d := at.Sub(burstAt); d < -2*time.Second || d > 2*time.Second {
		t.Errorf("peak window at %v, burst at %v", at, burstAt)
	}
	wantMean := float64(6000+11400) / 600
	if mean := c.Mean(); math.Abs(mean-wantMean) > 1e-9 {
		t.Errorf("mean %v, want %v", mean, wantMean)
	}
	if c.records != 17400 || c.outOfRange != 0 {
		t.Errorf("records %d out of range %d", c.records, c.outOfRange)
	}
}

func TestRateCounterEdges(t *testing.T) {
	from := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := NewRateCounter(from, from.Add(time.Minute), time.Hour); err == nil || !strings.Contains(err.Error(), "shorter than the window") {
		t.Errorf("window longer than span: %v", err)
	}
	if _, err := NewRateCounter(from, from.Add(time.Hour), 0); err == nil {
		t.Error("zero window accepted")
	}
	c, _ := NewRateCounter(from, from.Add(time.Hour), time.Minute)
	c.Add(from.Add(-time.Second))  // before
	c.Add(from.Add(2 * time.Hour)) // after
	c.Add(from)                    // first instant
	c.Add(from.Add(time.Hour))     // last instant
	if c.records != 2 || c.outOfRange != 2 {
		t.Errorf("records %d out of range %d", c.records, c.outOfRange)
	}
	// Mean over the span from the first record (a topic younger than the
	// span), but never over less than one window.
	c, _ = NewRateCounter(from, from.Add(time.Hour), time.Minute)
	for range 120 {
		c.Add(from.Add(time.Hour - time.Second))
	}
	if m := c.Mean(); m != 2 {
		t.Errorf("mean %v, want 120 over one window = 2/s", m)
	}
	// A year at one-minute windows stays within the bucket budget.
	c, _ = NewRateCounter(from, from.Add(365*24*time.Hour), time.Minute)
	if len(c.buckets) > maxBuckets+1 || c.res < time.Second {
		t.Errorf("%d buckets at %v", len(c.buckets), c.res)
	}
	c.Add(from.Add(365 * 24 * time.Hour))
	if p, _ := c.Peak(); p != 1.0/60 {
		t.Errorf("peak %v", p)
	}
}

func TestMeasureReadsOnlyTheWindow(t *testing.T) {
	env := devenvtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := devenvtest.KafkaClient(t, env, kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 3, 1, nil, "raw"); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	var recs []*kgo.Record
	// Old records, before --since: never read.
	for _, ts := range pattern(now.Add(-3*time.Hour), time.Minute, 10) {
		recs = append(recs, &kgo.Record{Topic: "raw", Key: []byte("old"), Timestamp: ts})
	}
	// 20 minutes at 5/s with a 2-minute burst at 50/s.
	start := now.Add(-30 * time.Minute)
	for _, ts := range pattern(start, 20*time.Minute, 5) {
		recs = append(recs, &kgo.Record{Topic: "raw", Timestamp: ts})
	}
	for _, ts := range pattern(start.Add(7*time.Minute+13*time.Second), 2*time.Minute, 45) {
		recs = append(recs, &kgo.Record{Topic: "raw", Timestamp: ts})
	}
	// Sorted by time, as a bridge writes them.
	sortRecords(recs)
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	var planned, added int64
	m, err := Measure(ctx, cl, "raw", time.Hour, time.Minute, now, func(n int64) { planned = n }, func(n int64) { added += n })
	if err != nil {
		t.Fatal(err)
	}
	want := int64(20*60*5 + 2*60*45)
	if m.Records != want || m.OffsetsRead != want || planned != want || added != want {
		t.Errorf("records %d, offsets %d, planned %d, added %d; want %d each (the old minute is skipped)", m.Records, m.OffsetsRead, planned, added, want)
	}
	if math.Abs(m.PeakPerS-50)/50 > 0.03 {
		t.Errorf("peak %v, want 50/s", m.PeakPerS)
	}
	if m.FirstRecord == nil || m.FirstRecord.Sub(start).Abs() > time.Millisecond {
		t.Errorf("first record %v, want %v", m.FirstRecord, start)
	}
	if _, err := Measure(ctx, cl, "nope", time.Hour, time.Minute, now, nil, nil); err == nil || !strings.Contains(err.Error(), `"nope" does not exist`) {
		t.Errorf("missing topic: %v", err)
	}
	if _, err := Measure(ctx, cl, "raw", time.Minute, time.Hour, now, nil, nil); err == nil || !strings.Contains(err.Error(), "shorter than the window") {
		t.Errorf("window > since: %v", err)
	}
}

func sortRecords(rs []*kgo.Record) {
	sort.SliceStable(rs, func(i, j int) bool { return rs[i].Timestamp.Before(rs[j].Timestamp) })
}

// However long the span, a window is a whole number of buckets, so the
// peak of a steady rate is that rate; a window finer than the span
// allows is refused rather than measured wrong.
func TestRateCounterCoarseSpans(t *testing.T) {
	to := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	for _, tc := range []struct {
		since, window time.Duration
	}{
		{365 * day, time.Minute}, // 15.8s buckets: 3 of 20s
		{7 * day, time.Second},   // 302.4ms buckets: 3 of 333ms
		{7 * day, time.Minute},
		{30 * day, 2 * time.Second},
	} {
		c, err := NewRateCounter(to.Add(-tc.since), to, tc.window)
		if err != nil {
			t.Fatalf("since %v window %v: %v", tc.since, tc.window, err)
		}
		if n := len(c.buckets); n > maxBuckets+1 {
			t.Errorf("since %v: %d buckets", tc.since, n)
		}
		if got := time.Duration(c.perWindow) * c.res; tc.window-got > time.Duration(c.perWindow) {
			t.Errorf("since %v window %v: %d buckets of %v cover %v", tc.since, tc.window, c.perWindow, c.res, got)
		}
		// Ten minutes at 100/s, a while ago.
		for _, ts := range pattern(to.Add(-3*day+7*time.Second), 10*time.Minute, 100) {
			c.Add(ts)
		}
		if peak, _ := c.Peak(); math.Abs(peak-100) > 1.5 {
			t.Errorf("since %v window %v: peak %v/s, want 100/s", tc.since, tc.window, peak)
		}
	}

	for _, tc := range []struct {
		since, window time.Duration
		want          string
	}{
		{7 * day, 10 * time.Millisecond, "window 10ms is finer than span 7d can resolve in 2,000,000 buckets: give window 303ms or more, or span 5h33m20s or less"},
		{30 * day, time.Second, "window 1s is finer than span 30d can resolve in 2,000,000 buckets: give window 2s or more, or span 23d3h33m20s or less"},
	} {
		_, err := NewRateCounter(to.Add(-tc.since), to, tc.window)
		var we *WindowError
		if !errors.As(err, &we) || err.Error() != tc.want {
			t.Errorf("since %v window %v:\n got %v\nwant %s", tc.since, tc.window, err, tc.want)
		}
		if CheckWindow(tc.since, we.MinWindow()) != nil || CheckWindow(we.MaxSpan(), tc.window) != nil {
			t.Errorf("the suggested window %v or span %v is refused too", we.MinWindow(), we.MaxSpan())
		}
	}
}

// A --since reaching before 1970 starts at the epoch: Kafka has no
// earlier timestamps to look up, and refuses a negative one.
func TestMeasureFromClampsToTheEpoch(t *testing.T) {
	now := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
	if got := MeasureFrom(now, 100000*24*time.Hour); !got.Equal(time.Unix(0, 0)) {
		t.Errorf("from %v", got)
	}
	if got := MeasureFrom(now, time.Hour); !got.Equal(now.Add(-time.Hour)) {
		t.Errorf("from %v", got)
	}
}
