package kafkax

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// MissingTopicsError names topics that do not exist. A missing topic is
// always an error, never an empty result.
type MissingTopicsError struct{ Topics []string }

func (e *MissingTopicsError) Error() string {
	if len(e.Topics) == 1 {
		return fmt.Sprintf("topic %q does not exist", e.Topics[0])
	}
	return fmt.Sprintf("topics %s do not exist", strings.Join(quoteAll(e.Topics), ", "))
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}

// DescribeTopics returns metadata for the named topics and fails with a
// MissingTopicsError naming every topic that does not exist.
func DescribeTopics(ctx context.Context, adm *kadm.Client, topics ...string) (kadm.TopicDetails, error) {
	if len(topics) == 0 {
		return kadm.TopicDetails{}, nil
	}
	details, err := ListTopicsEach(ctx, adm, topics...)
	if err != nil {
		return nil, fmt.Errorf("describing topics %s: %w", strings.Join(topics, ", "), NeedsACL(err, "Describe on each of them"))
	}
	var missing []string
	for _, t := range topics {
		d, ok := details[t]
		if !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
			missing = append(missing, t)
			continue
		}
		if d.Err != nil {
			return nil, fmt.Errorf("describing topic %q: %w", t, NeedsACL(d.Err, "Describe on topic "+t))
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return nil, &MissingTopicsError{Topics: missing}
	}
	return details, nil
}

// PartitionCountMismatchError says topics that must be co-partitioned are not.
type PartitionCountMismatchError struct{ Counts map[string]int }

func (e *PartitionCountMismatchError) Error() string {
	return "topics must have equal partition counts: " + DescribeCounts(e.Counts)
}

// EqualCounts reports whether every topic has the same partition count.
func EqualCounts(counts map[string]int) bool {
	n := -1
	for _, c := range counts {
		if n >= 0 && c != n {
			return false
		}
		n = c
	}
	return true
}

// DescribeCounts lists partition counts as "a has 3, b has 4", by name.
func DescribeCounts(counts map[string]int) string {
	names := make([]string, 0, len(counts))
	for t := range counts {
		names = append(names, t)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, t := range names {
		parts[i] = fmt.Sprintf("%s has %d", t, counts[t])
	}
	return strings.Join(parts, ", ")
}

// CommonPartitionCount returns the partition count shared by all topics, or
// an error naming each topic's count when they differ.
func CommonPartitionCount(ctx context.Context, adm *kadm.Client, topics ...string) (int, error) {
	details, err := DescribeTopics(ctx, adm, topics...)
	if err != nil {
		return 0, err
	}
	counts := map[string]int{}
	n := -1
	equal := true
	for _, t := range topics {
		c := len(details[t].Partitions)
		counts[t] = c
		if n == -1 {
			n = c
		} else if c != n {
			equal = false
		}
	}
	if !equal {
		return 0, &PartitionCountMismatchError{Counts: counts}
	}
	return n, nil
}

// TopicConfigs returns the effective configuration of a topic (explicit
// values and broker defaults alike).
func TopicConfigs(ctx context.Context, adm *kadm.Client, topic string) (map[string]string, error) {
	rcs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("describing configs of %q: %w", topic, err)
	}
	rc, err := rcs.On(topic, nil)
	if err != nil {
		return nil, fmt.Errorf("describing configs of %q: %w", topic, err)
	}
	if rc.Err != nil {
		if errors.Is(rc.Err, kerr.UnknownTopicOrPartition) {
			return nil, &MissingTopicsError{Topics: []string{topic}}
		}
		return nil, fmt.Errorf("describing configs of %q: %w", topic, rc.Err)
	}
	out := make(map[string]string, len(rc.Configs))
	for _, c := range rc.Configs {
		out[c.Key] = c.MaybeValue()
	}
	return out, nil
}

// CreateTopic creates a topic; an existing topic is not an error when
// its partition count matches (so callers can "ensure" a topic).
func CreateTopic(ctx context.Context, adm *kadm.Client, topic string, partitions int32, configs map[string]string) error {
	cfg := map[string]*string{}
	for k, v := range configs {
		cfg[k] = &v
	}
	resp, err := adm.CreateTopic(ctx, partitions, -1, cfg, topic)
	if err == nil {
		err = resp.Err
	}
	if errors.Is(err, kerr.TopicAlreadyExists) {
		// Another process may have created it a moment ago: wait until
		// this client's metadata shows it before reading its count.
		if werr := WaitTopic(ctx, adm, topic, true); werr != nil {
			return werr
		}
		n, cerr := CommonPartitionCount(ctx, adm, topic)
		if cerr != nil {
			return cerr
		}
		if n != int(partitions) {
			return fmt.Errorf("topic %q exists with %d partitions, want %d", topic, n, partitions)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("creating topic %q: %w", topic, err)
	}
	return WaitTopic(ctx, adm, topic, true)
}

// WaitTopic waits until the cluster's metadata (as this client sees it,
// cache included) lists the topic, or stops listing it, so that the next
// step cannot trip over a half-created or half-deleted topic.
func WaitTopic(ctx context.Context, adm *kadm.Client, topic string, exists bool) error {
	deadline, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		_, err := DescribeTopics(deadline, adm, topic)
		var missing *MissingTopicsError
		switch {
		case err == nil && exists, errors.As(err, &missing) && !exists:
			return nil
		case ctx.Err() != nil:
			return ctx.Err() // the caller gave up: not a timeout of ours
		case err != nil && !errors.As(err, &missing):
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.Done():
			state := "appear"
			if !exists {
				state = "disappear"
			}
			return fmt.Errorf("topic %q did not %s within 30s", topic, state)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// FormatPartitions shows partitions by topic for a log line or a message,
// topics sorted: "sensors.raw:0,1 sensors.cfg:2".
func FormatPartitions(m map[string][]int32) string {
	topics := make([]string, 0, len(m))
	for t := range m {
		topics = append(topics, t)
	}
	sort.Strings(topics)
	parts := make([]string, 0, len(topics))
	for _, t := range topics {
		ps := slices.Clone(m[t])
		slices.Sort(ps)
		nums := make([]string, len(ps))
		for i, p := range ps {
			nums[i] = strconv.Itoa(int(p))
		}
		parts = append(parts, t+":"+strings.Join(nums, ","))
	}
	return strings.Join(parts, " ")
}
