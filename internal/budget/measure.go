package budget

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/textfmt"
)

// Measurement is a message rate measured from a topic's record timestamps.
type Measurement struct {
	Topic   string    `json:"topic"`
	SinceS  float64   `json:"since_s"`
	WindowS float64   `json:"window_s"`
	From    time.Time `json:"from"`
	To      time.Time `json:"to"`
	// Records counts the records whose timestamps fell in [from, to];
	// OutOfRange those read but stamped outside it.
	Records    int64 `json:"records"`
	OutOfRange int64 `json:"out_of_range"`
	// PeakPerS is the highest rate over any window of the given length
	// (sliding, to within ResolutionS); MeanPerS the average over the
	// measured span (from the first record when the topic is younger).
	PeakPerS        float64    `json:"peak_per_s"`
	PeakWindowStart *time.Time `json:"peak_window_start,omitempty"`
	MeanPerS        float64    `json:"mean_per_s"`
	FirstRecord     *time.Time `json:"first_record,omitempty"`
	ResolutionS     float64    `json:"resolution_s"`
	OffsetsRead     int64      `json:"offsets_read"`

	counter *RateCounter
}

// Backlog replays the measured arrivals against a drain of capacity per
// second (see RateCounter.Backlog); ok is false without counted data.
func (m *Measurement) Backlog(capacity float64) (most float64, at time.Time, ok bool) {
	if m == nil || m.counter == nil || m.counter.records == 0 {
		return 0, time.Time{}, false
	}
	most, at = m.counter.Backlog(capacity)
	return most, at, true
}

// MeasureFrom is where a measurement over the last since starts: no
// earlier than the Unix epoch, before which Kafka has no timestamps to
// look up (and refuses a negative one).
func MeasureFrom(now time.Time, since time.Duration) time.Time {
	from := now.Add(-since)
	if epoch := time.Unix(0, 0); from.Before(epoch) {
		return epoch
	}
	return from
}

// maxBuckets bounds the memory of a rate count (8 bytes a bucket).
const maxBuckets = 2_000_000

// RateCounter counts timestamps into fine buckets and finds the busiest
// window of a given length by sliding over them, so a burst is measured
// whole however it falls against the clock. A window is a whole number of
// buckets, so what it counts is exactly its length.
type RateCounter struct {
	from, to   time.Time
	window     time.Duration
	res        time.Duration
	perWindow  int // buckets per window
	buckets    []int64
	records    int64
	outOfRange int64
	first      time.Time
}

// minResolution is the finest bucket a span allows within maxBuckets (and
// no finer than 1ms).
func minResolution(span time.Duration) time.Duration {
	return max((span+maxBuckets-1)/maxBuckets, time.Millisecond)
}

// WindowError says that windows of a length cannot be measured over a
// span: the span allows no bucket that fine. WindowName and SpanName name
// the two in the message (default "window" and "span"; a command sets
// its flags).
type WindowError struct {
	Span, Window, Resolution time.Duration
	WindowName, SpanName     string
}

func (e *WindowError) Error() string {
	wn, sn := cmp.Or(e.WindowName, "window"), cmp.Or(e.SpanName, "span")
	return fmt.Sprintf("%s %s is finer than %s %s can resolve in %s buckets: give %s %s or more, or %s %s or less",
		wn, textfmt.FormatDuration(e.Window), sn, textfmt.FormatDuration(e.Span), textfmt.GroupDigits(maxBuckets),
		wn, textfmt.FormatDuration(e.MinWindow()), sn, textfmt.FormatDuration(e.MaxSpan()))
}

// MinWindow is the shortest window the span allows, rounded up to what
// textfmt.FormatDuration prints exactly (ms below a second, else seconds).
func (e *WindowError) MinWindow() time.Duration {
	unit := time.Millisecond
	if e.Resolution > time.Second {
		unit = time.Second
	}
	return (e.Resolution + unit - 1) / unit * unit
}

// MaxSpan is the longest span the window allows, rounded down to seconds.
func (e *WindowError) MaxSpan() time.Duration {
	return (e.Window * maxBuckets).Truncate(time.Second)
}

// CheckWindow tells whether windows of the given length can be measured
// over span (a *WindowError when the span is too long for them).
func CheckWindow(span, window time.Duration) error {
	if res := minResolution(span); window < res {
		return &WindowError{Span: span, Window: window, Resolution: res}
	}
	return nil
}

// NewRateCounter counts timestamps in [from, to] for windows of the given
// length. A window is up to 60 buckets (of at least 1ms), fewer when the
// span would need more than maxBuckets; a window shorter than one bucket
// the span allows is refused.
func NewRateCounter(from, to time.Time, window time.Duration) (*RateCounter, error) {
	if window <= 0 {
		return nil, fmt.Errorf("the window must be positive")
	}
	span := to.Sub(from)
	if span < window {
		return nil, fmt.Errorf("the span measured (%s) is shorter than the window (%s)", textfmt.FormatDuration(span), textfmt.FormatDuration(window))
	}
	if err := CheckWindow(span, window); err != nil {
		return nil, err
	}
	k := min(60, window/minResolution(span))
	res := window / k
	return &RateCounter{from: from, to: to, window: window, res: res, perWindow: int(k), buckets: make([]int64, span/res+1)}, nil
}

// Add counts one record's timestamp.
func (c *RateCounter) Add(ts time.Time) {
	if ts.Before(c.from) || ts.After(c.to) {
		c.outOfRange++
		return
	}
	c.records++
	if c.first.IsZero() || ts.Before(c.first) {
		c.first = ts
	}
	c.buckets[ts.Sub(c.from)/c.res]++
}

// Peak returns the highest count in any window (as a rate per second) and
// where that window starts.
func (c *RateCounter) Peak() (perSecond float64, start time.Time) {
	k := c.perWindow
	var sum, best int64
	bestAt := 0
	for i, n := range c.buckets {
		sum += n
		if i >= k {
			sum -= c.buckets[i-k]
		}
		if sum > best {
			best, bestAt = sum, max(i-k+1, 0)
		}
	}
	return float64(best) / (time.Duration(k) * c.res).Seconds(), c.from.Add(time.Duration(bestAt) * c.res)
}

// Backlog replays the counted arrivals against a drain of capacity per
// second, bucket by bucket, and returns the largest backlog and the start
// of the bucket where it peaked: what a queue in front of a consumer that
// fast would have had to hold.
func (c *RateCounter) Backlog(capacity float64) (most float64, at time.Time) {
	drain := capacity * c.res.Seconds()
	var q float64
	for i, n := range c.buckets {
		q = max(q+float64(n)-drain, 0)
		if q > most {
			most, at = q, c.from.Add(time.Duration(i)*c.res)
		}
	}
	return most, at
}

// Mean is the average rate over the span, from the first record when that
// is later than the span's start (a topic younger than --since), but over
// no less than one window.
func (c *RateCounter) Mean() float64 {
	if c.records == 0 {
		return 0
	}
	span := c.to.Sub(c.first)
	if span < c.window {
		span = c.window
	}
	return float64(c.records) / span.Seconds()
}

// Measure reads the records of topic stamped in the last since (up to now)
// and reports the peak rate over windows of the given length and the mean.
// It asks the broker's time index where each partition's window starts and
// reads only from there. planned and add report progress (may be nil).
func Measure(ctx context.Context, cl *kgo.Client, topic string, since, window time.Duration, now time.Time, planned func(int64), add func(int64)) (*Measurement, error) {
	from := MeasureFrom(now, since)
	counter, err := NewRateCounter(from, now, window)
	if err != nil {
		return nil, fmt.Errorf("--since %s --window %s: %v", textfmt.FormatDuration(since), textfmt.FormatDuration(window), err)
	}
	starts, err := kafkax.OffsetsAfter(ctx, kadm.NewClient(cl), from.UnixMilli(), topic)
	if err != nil {
		return nil, err
	}
	res, err := kafkax.ReadFrom(ctx, cl, []string{topic}, kafkax.FromOffsets(starts), planned, func(r *kgo.Record) error {
		counter.Add(r.Timestamp)
		if add != nil {
			add(1)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("measuring %s: %w", topic, err)
	}
	m := &Measurement{
		Topic:       topic,
		SinceS:      now.Sub(from).Seconds(),
		WindowS:     window.Seconds(),
		From:        from.UTC(),
		To:          now.UTC(),
		Records:     counter.records,
		OutOfRange:  counter.outOfRange,
		MeanPerS:    counter.Mean(),
		ResolutionS: counter.res.Seconds(),
		counter:     counter,
	}
	for _, b := range res.Bounds {
		m.OffsetsRead += b.End - b.Start
	}
	if counter.records > 0 {
		peak, at := counter.Peak()
		at, first := at.UTC(), counter.first.UTC()
		m.PeakPerS, m.PeakWindowStart, m.FirstRecord = peak, &at, &first
	}
	return m, nil
}
