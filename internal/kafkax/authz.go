package kafkax

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Unauthorized reports whether err is Kafka refusing the principal an
// operation on a topic, group, transactional ID or the cluster.
func Unauthorized(err error) bool {
	return errors.Is(err, kerr.TopicAuthorizationFailed) || errors.Is(err, kerr.GroupAuthorizationFailed) ||
		errors.Is(err, kerr.TransactionalIDAuthorizationFailed) || errors.Is(err, kerr.ClusterAuthorizationFailed)
}

// NeedsACL names the ACL an authorization error lacks, need as "Write on
// topic sensors.refined" (docs/security.md); any other error is returned
// as it is.
func NeedsACL(err error, need string) error {
	if !Unauthorized(err) {
		return err
	}
	return fmt.Errorf("not authorized (needs %s): %w", need, err)
}

// ProduceError names the topic a record was refused on and, when the
// principal may not write it, the ACL that is missing.
func ProduceError(topic string, err error) error {
	if errors.Is(err, kerr.TopicAuthorizationFailed) {
		return fmt.Errorf("writing to topic %s: %w", topic, NeedsACL(err, "Write on topic "+topic))
	}
	return fmt.Errorf("writing to topic %s: %w", topic, err)
}

// ListTopicsEach is adm.ListTopics with an authorization failure kept per
// topic, where kadm fails the whole request: a topic the principal may
// not describe comes back with Err TOPIC_AUTHORIZATION_FAILED, so the
// caller can name it (and the others still answer).
func ListTopicsEach(ctx context.Context, adm *kadm.Client, topics ...string) (kadm.TopicDetails, error) {
	details, err := adm.ListTopics(ctx, topics...)
	if err == nil || len(topics) == 0 || !errors.Is(err, kerr.TopicAuthorizationFailed) {
		return details, err
	}
	out := kadm.TopicDetails{}
	for _, t := range topics {
		one, err := adm.ListTopics(ctx, t)
		switch {
		case errors.Is(err, kerr.TopicAuthorizationFailed):
			out[t] = kadm.TopicDetail{Topic: t, Err: err}
		case err != nil:
			return nil, err
		default:
			maps.Copy(out, one)
		}
	}
	return out, nil
}

// DescribeTopicConfigsEach is adm.DescribeTopicConfigs with an
// authorization failure kept per topic, as ListTopicsEach.
func DescribeTopicConfigsEach(ctx context.Context, adm *kadm.Client, topics ...string) (kadm.ResourceConfigs, error) {
	rcs, err := adm.DescribeTopicConfigs(ctx, topics...)
	if err == nil || len(topics) == 0 || !errors.Is(err, kerr.TopicAuthorizationFailed) {
		return rcs, err
	}
	out := kadm.ResourceConfigs{}
	for _, t := range topics {
		one, err := adm.DescribeTopicConfigs(ctx, t)
		switch {
		case errors.Is(err, kerr.TopicAuthorizationFailed):
			out = append(out, kadm.ResourceConfig{Name: t, Err: err})
		case err != nil:
			return nil, err
		default:
			out = append(out, one...)
		}
	}
	return out, nil
}
