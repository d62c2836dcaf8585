package kafkax

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// GroupStateDead is the state Kafka reports for a group that does not
// exist (or no longer does): no members and no committed offsets.
const GroupStateDead = "Dead"

// Group is a consumer group as flecht's operator commands see it, whichever
// rebalance protocol its members speak.
type Group struct {
	Group string `json:"group"`
	// State as the coordinator reports it: Empty, Stable,
	// PreparingRebalance, CompletingRebalance, Reconciling, Assigning, or
	// Dead when the group does not exist.
	State string `json:"state"`
	// Protocol is "classic" (JoinGroup/SyncGroup) or "consumer" (KIP-848).
	Protocol string        `json:"protocol,omitempty"`
	Members  []GroupMember `json:"members"`
}

// GroupMember is one live member of a group.
type GroupMember struct {
	MemberID   string            `json:"member_id"`
	InstanceID string            `json:"instance_id,omitempty"`
	ClientID   string            `json:"client_id"`
	Host       string            `json:"host"`
	Assigned   []TopicPartitions `json:"assigned,omitempty"`
}

// TopicPartitions is a topic and some of its partitions, sorted.
type TopicPartitions struct {
	Topic      string  `json:"topic"`
	Partitions []int32 `json:"partitions"`
}

// Exists reports whether the coordinator knows the group.
func (g *Group) Exists() bool { return g.State != GroupStateDead && g.State != "" }

// DescribeGroup describes one group through the classic DescribeGroups API
// and, when the coordinator says it is not a classic group, through
// ConsumerGroupDescribe (KIP-848). A group that does not exist is no error:
// its State is Dead and it has no members.
func DescribeGroup(ctx context.Context, adm *kadm.Client, group string) (*Group, error) {
	out := &Group{Group: group, State: GroupStateDead, Members: []GroupMember{}}
	described, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return nil, fmt.Errorf("describing group %q: %w", group, NeedsACL(err, "Describe on group "+group))
	}
	g, ok := described[group]
	if ok && g.Err != nil && !errors.Is(g.Err, kerr.GroupIDNotFound) {
		return nil, fmt.Errorf("describing group %q: %w", group, NeedsACL(g.Err, "Describe on group "+group))
	}
	if ok && g.Err == nil && g.State != GroupStateDead && g.State != "" {
		out.State, out.Protocol = g.State, "classic"
		for _, m := range g.Members {
			gm := GroupMember{MemberID: m.MemberID, ClientID: m.ClientID, Host: clientHost(m.ClientHost)}
			if m.InstanceID != nil {
				gm.InstanceID = *m.InstanceID
			}
			if c, ok := m.Assigned.AsConsumer(); ok {
				for _, t := range c.Topics {
					gm.Assigned = append(gm.Assigned, TopicPartitions{Topic: t.Topic, Partitions: t.Partitions})
				}
			}
			out.Members = append(out.Members, gm)
		}
		if len(out.Members) > 0 {
			out.sort()
			return out, nil
		}
	}

	// No classic member: the group may be a KIP-848 consumer group, which
	// the classic API reports as missing (or, on some brokers, as a
	// member-less group). Brokers without ConsumerGroupDescribe, and
	// classic groups, answer with an error that only means "no such
	// consumer group".
	cgs, err := adm.DescribeConsumerGroups(ctx, group)
	if err != nil {
		if noConsumerGroup(err) {
			return out, nil
		}
		return nil, fmt.Errorf("describing consumer group %q: %w", group, err)
	}
	cg, ok := cgs[group]
	if ok && cg.Err != nil && !noConsumerGroup(cg.Err) {
		return nil, fmt.Errorf("describing consumer group %q: %w", group, cg.Err)
	}
	if !ok || cg.Err != nil || cg.State == GroupStateDead || cg.State == "" {
		return out, nil
	}
	cgOut := &Group{Group: group, State: cg.State, Protocol: "consumer", Members: []GroupMember{}}
	for _, m := range cg.Members {
		gm := GroupMember{MemberID: m.MemberID, ClientID: m.ClientID, Host: clientHost(m.ClientHost)}
		if m.InstanceID != nil {
			gm.InstanceID = *m.InstanceID
		}
		for _, t := range m.Assignment.Sorted() {
			gm.Assigned = append(gm.Assigned, TopicPartitions{Topic: t.Topic, Partitions: t.Partitions})
		}
		cgOut.Members = append(cgOut.Members, gm)
	}
	cgOut.sort()
	return cgOut, nil
}

// clientHost drops the "/" that Java's InetAddress.toString puts before an
// address without a host name, so every view shows the host the same way.
func clientHost(h string) string { return strings.TrimPrefix(h, "/") }

func (g *Group) sort() {
	for i := range g.Members {
		m := &g.Members[i]
		sort.Slice(m.Assigned, func(a, b int) bool { return m.Assigned[a].Topic < m.Assigned[b].Topic })
		for _, tp := range m.Assigned {
			sort.Slice(tp.Partitions, func(a, b int) bool { return tp.Partitions[a] < tp.Partitions[b] })
		}
	}
	sort.Slice(g.Members, func(a, b int) bool {
		x, y := g.Members[a], g.Members[b]
		if x.ClientID != y.ClientID {
			return x.ClientID < y.ClientID
		}
		return x.MemberID < y.MemberID
	})
}

// noConsumerGroup reports whether a ConsumerGroupDescribe error only means
// that there is no KIP-848 group by that name: the group is unknown, it is
// a classic group, or the broker predates the API.
func noConsumerGroup(err error) bool {
	return errors.Is(err, kerr.GroupIDNotFound) || errors.Is(err, kerr.UnsupportedVersion) ||
		strings.Contains(err.Error(), "broker is too old")
}

// StableOffsets returns group's committed offset of each given partition
// once no transaction holds a commit of it pending (KIP-447's
// require_stable): after the transactional ID that commits them was fenced,
// that is the offset the fence settled on. A partition the group never
// committed is -1. A pending commit comes back as UNSTABLE_OFFSET_COMMIT,
// which Retriable accepts: ask again.
func StableOffsets(ctx context.Context, cl *kgo.Client, group string, partitions map[string][]int32) (map[string]map[int32]int64, error) {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group, req.RequireStable = group, true
	for topic, ps := range partitions {
		t := kmsg.NewOffsetFetchRequestTopic()
		t.Topic, t.Partitions = topic, ps
		req.Topics = append(req.Topics, t)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("fetching the committed offsets of group %q: %w", group, err)
	}
	out := map[string]map[int32]int64{}
	put := func(topic string, p int32, at int64, code int16) error {
		if err := kerr.ErrorForCode(code); err != nil {
			return fmt.Errorf("committed offset of %s/%d in group %q: %w", topic, p, group, err)
		}
		if out[topic] == nil {
			out[topic] = map[int32]int64{}
		}
		out[topic][p] = at
		return nil
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, fmt.Errorf("fetching the committed offsets of group %q: %w", group, err)
	}
	for _, g := range resp.Groups { // v8+
		if err := kerr.ErrorForCode(g.ErrorCode); err != nil {
			return nil, fmt.Errorf("fetching the committed offsets of group %q: %w", group, err)
		}
		for _, t := range g.Topics {
			for _, p := range t.Partitions {
				if err := put(t.Topic, p.Partition, p.Offset, p.ErrorCode); err != nil {
					return nil, err
				}
			}
		}
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := put(t.Topic, p.Partition, p.Offset, p.ErrorCode); err != nil {
				return nil, err
			}
		}
	}
	for topic, ps := range partitions {
		for _, p := range ps {
			if _, ok := out[topic][p]; !ok {
				return nil, fmt.Errorf("committed offset of %s/%d in group %q: not in the answer", topic, p, group)
			}
		}
	}
	return out, nil
}

// LeaveStatic removes static members of group by their instance IDs (a
// stage's --client-id), as a member stopping with --leave-group does: the
// group rebalances at once instead of after their session timeout. It
// returns the member IDs removed by instance ID.
func LeaveStatic(ctx context.Context, adm *kadm.Client, group string, instanceIDs []string) (map[string]string, error) {
	resp, err := adm.LeaveGroup(ctx, kadm.LeaveGroup(group).InstanceIDs(instanceIDs...).Reason("flecht group leave"))
	if err != nil {
		return nil, fmt.Errorf("leaving group %q: %w", group, err)
	}
	out := map[string]string{}
	for _, r := range resp.Sorted() {
		if r.Err != nil {
			return out, fmt.Errorf("removing %s from group %q: %w", r.InstanceID, group, r.Err)
		}
		out[r.InstanceID] = r.MemberID
	}
	return out, nil
}
