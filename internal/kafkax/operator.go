package kafkax

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/exitcode"
)

// What the operator's commands ask of a cluster, each one call.

// ClusterInfo is what `flecht cluster` reports.
type ClusterInfo struct {
	ClusterID  string       `json:"cluster_id"`
	Controller int32        `json:"controller"`
	Brokers    []BrokerInfo `json:"brokers"`
	Topics     int          `json:"topics"`
}

// BrokerInfo is one broker of the cluster.
type BrokerInfo struct {
	NodeID int32  `json:"node_id"`
	Host   string `json:"host"`
	Port   int32  `json:"port"`
	Rack   string `json:"rack,omitempty"`
}

// DescribeCluster reads the cluster's id, controller, brokers and topic
// count from its metadata.
func DescribeCluster(ctx context.Context, cl *kgo.Client) (*ClusterInfo, error) {
	md, err := kadm.NewClient(cl).Metadata(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading cluster metadata: %w", err)
	}
	info := &ClusterInfo{ClusterID: md.Cluster, Controller: md.Controller, Topics: len(md.Topics)}
	for _, b := range md.Brokers {
		bi := BrokerInfo{NodeID: b.NodeID, Host: b.Host, Port: b.Port}
		if b.Rack != nil {
			bi.Rack = *b.Rack
		}
		info.Brokers = append(info.Brokers, bi)
	}
	sort.Slice(info.Brokers, func(i, j int) bool { return info.Brokers[i].NodeID < info.Brokers[j].NodeID })
	return info, nil
}

// LeaveReport is what LeaveMembers found and did: what `flecht group
// leave` prints.
type LeaveReport struct {
	ApplicationID string `json:"application_id"`
	// Members are the members the instance IDs name, as found.
	Members  []GroupMember `json:"members"`
	Executed bool          `json:"executed"`
	// Removed maps each instance ID removed to its member ID.
	Removed    map[string]string `json:"removed"`
	GroupAfter string            `json:"group_state_after,omitempty"`
	// Watched is how long the group was watched after the removal, and
	// Rejoined maps each removed instance ID that came back meanwhile to
	// its new member: it was alive (it rejoined at its next heartbeat) and
	// holds its partitions again.
	WatchedS float64                `json:"watched_s,omitempty"`
	Rejoined map[string]GroupMember `json:"rejoined,omitempty"`
}

// LeaveOptions say what LeaveMembers does beyond reporting.
type LeaveOptions struct {
	// Execute removes the members (without it nothing changes).
	Execute bool
	// Watch is how long to watch the group after the removal for a
	// removed member that rejoins: a member still running rejoins at its
	// next heartbeat (3 s apart by default), so a removal only helps a
	// member that stopped. 0 does not watch.
	Watch time.Duration
	// Sleep waits between two looks at the group (nil: a timer).
	Sleep func(ctx context.Context, d time.Duration) error
}

// DefaultLeaveWatch is two heartbeat intervals of flecht's and Kafka's
// default (3 s) with a join's margin.
const DefaultLeaveWatch = 8 * time.Second

// LeaveMembers makes the static members with these instance IDs leave
// group app, as a member stopping with leave-group does (only with
// Execute; without, it reports whom it would remove). An instance ID that
// is no member of the group is refused, naming the members. After the
// removal it watches the group for o.Watch and reports each removed
// member that rejoined (Rejoined): it is alive, and the removal changed
// nothing but a rebalance.
func LeaveMembers(ctx context.Context, cl *kgo.Client, app string, ids []string, o LeaveOptions) (*LeaveReport, error) {
	adm := kadm.NewClient(cl)
	g, err := DescribeGroup(ctx, adm, app)
	if err != nil {
		return nil, err
	}
	rep := &LeaveReport{ApplicationID: app, Members: []GroupMember{}, Removed: map[string]string{}}
	var unknown []string
	for _, id := range ids {
		i := slices.IndexFunc(g.Members, func(m GroupMember) bool { return m.InstanceID == id })
		if i < 0 {
			unknown = append(unknown, id)
			continue
		}
		rep.Members = append(rep.Members, g.Members[i])
	}
	if len(unknown) > 0 {
		return nil, exitcode.RefusedError(fmt.Errorf("group %s has no static member %s (members: %s); nothing changed",
			app, strings.Join(unknown, ", "), MembersOrNone(g.Members)))
	}
	if o.Execute {
		if rep.Removed, err = LeaveStatic(ctx, adm, app, ids); err != nil {
			return nil, err
		}
		rep.Executed = true
		if after, err := DescribeGroup(ctx, adm, app); err == nil {
			rep.GroupAfter = after.State
		}
		if err := watchRejoin(ctx, adm, rep, o); err != nil {
			return nil, err
		}
	}
	return rep, nil
}

// leaveLook is how often watchRejoin looks at the group.
const leaveLook = 250 * time.Millisecond

// watchRejoin looks at the group until every removed member came back
// or o.Watch passed, and records who came back (by instance ID, with a
// member ID other than the one removed).
func watchRejoin(ctx context.Context, adm *kadm.Client, rep *LeaveReport, o LeaveOptions) error {
	if o.Watch <= 0 {
		return nil
	}
	sleep := o.Sleep
	if sleep == nil {
		sleep = func(ctx context.Context, d time.Duration) error {
			t := time.NewTimer(d)
			defer t.Stop()
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-t.C:
				return nil
			}
		}
	}
	rep.Rejoined = map[string]GroupMember{}
	for waited := time.Duration(0); waited < o.Watch && len(rep.Rejoined) < len(rep.Removed); waited += leaveLook {
		if err := sleep(ctx, leaveLook); err != nil {
			return err
		}
		rep.WatchedS = (waited + leaveLook).Seconds()
		g, err := DescribeGroup(ctx, adm, rep.ApplicationID)
		if err != nil {
			continue // a coordinator moving: look again
		}
		rep.GroupAfter = g.State
		for _, m := range g.Members {
			if old, removed := rep.Removed[m.InstanceID]; removed && m.MemberID != old {
				rep.Rejoined[m.InstanceID] = m
			}
		}
	}
	return nil
}

// MembersOrNone names the members, or says none.
func MembersOrNone(ms []GroupMember) string {
	if len(ms) == 0 {
		return "none"
	}
	return DescribeMembers(ms)
}

// DescribeMembers names members as "client-id on host", for refusals; a
// static member is marked so.
func DescribeMembers(ms []GroupMember) string {
	parts := make([]string, len(ms))
	for i, m := range ms {
		parts[i] = fmt.Sprintf("%s on %s", m.ClientID, m.Host)
		if m.InstanceID != "" {
			parts[i] += " (static)"
		}
	}
	return strings.Join(parts, ", ")
}

// PartitionCountOf is the partition count of topic (CommonPartitionCount
// of one topic).
func PartitionCountOf(ctx context.Context, cl *kgo.Client, topic string) (int, error) {
	return CommonPartitionCount(ctx, kadm.NewClient(cl), topic)
}

// GroupNames lists the cluster's consumer groups.
func GroupNames(ctx context.Context, cl *kgo.Client) ([]string, error) {
	groups, err := kadm.NewClient(cl).ListGroups(ctx)
	if err != nil {
		return nil, err
	}
	return groups.Groups(), nil
}

// TopicNames lists the cluster's topics but its internal ones (__…).
func TopicNames(ctx context.Context, cl *kgo.Client) ([]string, error) {
	topics, err := kadm.NewClient(cl).ListTopics(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, t := range topics.Names() {
		if !strings.HasPrefix(t, "__") {
			out = append(out, t)
		}
	}
	return out, nil
}
