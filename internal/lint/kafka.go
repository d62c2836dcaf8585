package lint

import (
	"context"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/kafkax"
)

// SampleTopics reads the topics (from where start says, per partition;
// read_committed) through a Checker and returns its report. The topics'
// partition counts come from the cluster. planned and add report progress
// and may be nil.
func SampleTopics(ctx context.Context, cl *kgo.Client, o Options, start kafkax.StartFunc, planned, add func(int64)) (*Report, error) {
	details, err := kafkax.DescribeTopics(ctx, kadm.NewClient(cl), o.Topics...)
	if err != nil {
		return nil, err
	}
	o.Partitions = map[string]int{}
	for _, t := range o.Topics {
		o.Partitions[t] = len(details[t].Partitions)
	}
	c := NewChecker(o)
	_, err = kafkax.ReadFrom(ctx, cl, o.Topics, start, planned, func(r *kgo.Record) error {
		c.Add(Record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Key: r.Key, Value: r.Value})
		if add != nil {
			add(1)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sampling %s: %w", strings.Join(o.Topics, ", "), err)
	}
	return c.Report(), nil
}
