package doctor

import (
	"context"
	"net/http"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

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
