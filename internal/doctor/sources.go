package doctor

import (
	"context"
	"errors"
	"net/http"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/lint"
	"github.com/flecht-dev/flecht/internal/promscrape"
	"github.com/flecht-dev/flecht/internal/status"
)

// ClusterSources gathers from a Kafka client and the instances' metrics
// endpoints over HTTP.
func ClusterSources(cl *kgo.Client, hc *http.Client) Sources {
	if hc == nil {
		hc = &http.Client{Timeout: 10 * time.Second}
	}
	return Sources{
		Status: func(ctx context.Context, req status.Request) (*status.Sample, error) {
			return status.Take(ctx, cl, req)
		},
		Topics: func(ctx context.Context, spec lint.TopicsSpec) (*lint.TopicsReport, error) {
			return lint.Topics(ctx, cl, spec)
		},
		Scrape: func(ctx context.Context, u string) (*promscrape.Sample, error) { return promscrape.Scrape(ctx, hc, u) },
		Unread: func(ctx context.Context, ranges map[status.TP][2]int64) (bool, error) {
			return unread(ctx, cl, ranges)
		},
		DeadLettered: func(ctx context.Context, topic string, since time.Time) (int, error) {
			return countSince(ctx, cl, topic, since)
		},
		Group: func(ctx context.Context, app string) (*kafkax.Group, error) {
			return kafkax.DescribeGroup(ctx, kadm.NewClient(cl), app)
		},
		Sleep: func(ctx context.Context, d time.Duration) error {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(d):
				return nil
			}
		},
	}
}

// errFound ends a read at the first record it finds.
var errFound = errors.New("found a record")

// unread reads the ranges read_committed, as a consumer would, and reports
// whether any holds a record: transaction markers and aborted records are
// not delivered. A record at or past a range's end (written after the
// sample) does not count. A range that an open transaction keeps
// undecided (its last stable offset below the range's end) may hold
// records the stage waits for, so it counts as unread.
func unread(ctx context.Context, cl *kgo.Client, ranges map[status.TP][2]int64) (bool, error) {
	topics := map[string]bool{}
	starts := map[kafkax.TopicPartition]int64{}
	for tp, r := range ranges {
		topics[tp.Topic] = true
		starts[tp] = r[0]
	}
	names := make([]string, 0, len(topics))
	for t := range topics {
		names = append(names, t)
	}
	sort.Strings(names)
	res, err := kafkax.ReadFrom(ctx, cl, names, kafkax.FromOffsets(starts), nil, func(r *kgo.Record) error {
		if r.Offset < ranges[status.TP{Topic: r.Topic, Partition: r.Partition}][1] {
			return errFound
		}
		return nil
	})
	if errors.Is(err, errFound) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	for tp, r := range ranges {
		if b, ok := res.Bounds[tp]; !ok || b.End < r[1] {
			return true, nil
		}
	}
	return false, nil
}

// countSince counts the records of topic written at or after since, as a
// read_committed reader sees them (transaction markers and aborted
// records are not records).
func countSince(ctx context.Context, cl *kgo.Client, topic string, since time.Time) (int, error) {
	starts, err := kafkax.OffsetsAfter(ctx, kadm.NewClient(cl), since.UnixMilli(), topic)
	if err != nil {
		return 0, err
	}
	n := 0
	_, err = kafkax.ReadFrom(ctx, cl, []string{topic}, kafkax.FromOffsets(starts), nil, func(*kgo.Record) error {
		n++
		return nil
	})
	return n, err
}
