package transformer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/kafkax"
)

// missingTopicGrace is how long a missing topic is asked about again on a
// cluster of several brokers: a topic created a moment ago may not have
// reached the broker asked yet. A single KRaft broker, too, learns a topic
// from its metadata log a moment after CreateTopics returned, so it gets
// a shorter grace; past both, a missing topic is missing.
const (
	missingTopicGrace       = 10 * time.Second
	missingTopicGraceSingle = 2 * time.Second
)

// prepare runs the start-up checks — the cluster answers, the topics and
// their partition counts, the changelog, the config topics' bootstrap —
// and runs them again while they fail on what a node's failure or restart
// causes, for up to the start-up timeout. What retrying cannot fix (a
// missing topic, unequal partition counts, a refused login) fails at once,
// and so does a cluster none of whose bootstrap brokers ever answered: a
// wrong address is the likelier cause, and the error says where it looked.
// A stop asked for meanwhile returns errStopped.
func (r *Runner) prepare(ctx context.Context, admin *kgo.Client) error {
	start := time.Now()
	bo := kafkax.Backoff{Min: restartMin, Max: restartMax}
	reached := false
	for {
		err := r.checkOnce(ctx, admin, &reached)
		if err == nil {
			if bo.Attempts() > 0 {
				r.log.Info("the start-up checks passed: Kafka answers again", "failed_attempts", bo.Attempts(),
					"took", time.Since(start).Round(time.Millisecond))
			}
			return nil
		}
		if ctx.Err() != nil {
			return errStopped
		}
		if !reached || !r.startupRetriable(ctx, admin, err, time.Since(start)) {
			return err
		}
		if time.Since(start) >= r.startupTimeout {
			return fmt.Errorf("%w (the start-up checks were tried %d times over %s; the cluster kept failing them: check that it is up and whole, then start again)",
				err, bo.Attempts()+1, time.Since(start).Round(time.Second))
		}
		if bo.Wait(ctx, r.log, "the start-up checks", err) != nil {
			return errStopped
		}
	}
}

// errStopped: the stage was asked to stop before it started.
var errStopped = errors.New("stopped before the start-up checks passed")

// checkOnce runs the start-up checks once; reached is set once a broker
// answered.
func (r *Runner) checkOnce(ctx context.Context, admin *kgo.Client, reached *bool) error {
	if err := r.cluster.Ping(ctx, admin); err != nil {
		return err
	}
	*reached = true
	r.counts = kafkax.NewPartitionCounts(kadm.NewClient(admin))
	if err := r.prepareTopics(ctx, kadm.NewClient(admin)); err != nil {
		return err
	}
	return r.configs.Bootstrap(ctx, r.cluster, r.clientID)
}

// startupRetriable reports whether a failed start-up check is worth
// another try: Kafka did not answer or was changing, or a topic is missing
// for a little while (longer on a cluster of several brokers).
func (r *Runner) startupRetriable(ctx context.Context, admin *kgo.Client, err error, since time.Duration) bool {
	var (
		unreachable *kafkax.UnreachableError
		tlsErr      *kafkax.TLSError
		authErr     *kafkax.AuthError
		missing     *kafkax.MissingTopicsError
	)
	switch {
	case errors.As(err, &tlsErr), errors.As(err, &authErr), kafkax.Fatal(err):
		return false
	case errors.As(err, &unreachable):
		return true // it answered before: a node down, or all of them
	case errors.As(err, &missing):
		if since < missingTopicGraceSingle {
			return true
		}
		if since >= missingTopicGrace {
			return false
		}
		md, merr := kadm.NewClient(admin).BrokerMetadata(ctx)
		return merr == nil && len(md.Brokers) > 1
	}
	return kafkax.Retriable(err)
}
