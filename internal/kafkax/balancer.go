package kafkax

import (
	"fmt"
	"slices"
	"sort"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TaskProtocol names the cooperative task assignment in the group
// protocol: only flecht offers it, so a group that holds any other member
// (a Flechtwerk replica, an older flecht) falls back to range.
const TaskProtocol = "flecht-cooperative-tasks"

// TaskBalancers are the assignments a stage's members offer, best first:
// cooperative task assignment where every member supports it, range (what
// every Flechtwerk replica speaks, and every task's co-partitioning)
// otherwise. Under range every rebalance revokes every task, also those
// that stay; under the cooperative one only the tasks that move are
// revoked, and the others keep running, open transactions and all.
func TaskBalancers() kgo.GroupOpt {
	return kgo.Balancers(CooperativeTasks(), kgo.RangeBalancer())
}

// CooperativeTasks assigns a stage's tasks: task p is partition p of
// every input topic, and a member gets all of a task or none of it. Each
// member keeps the tasks it owns up to its fair share, the rest go to the
// members below theirs in task order, and a task that moves is left out
// of the first assignment (KIP-429) so its owner revokes it, commits, and
// rejoins before the next owner fences it.
func CooperativeTasks() kgo.GroupBalancer { return taskBalancer{} }

type taskBalancer struct{}

func (taskBalancer) ProtocolName() string { return TaskProtocol }

func (taskBalancer) IsCooperative() bool { return true }

func (taskBalancer) JoinGroupMetadata(interests []string, current map[string][]int32, generation int32) []byte {
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Version = 2 // owned partitions (v1) and their generation (v2)
	meta.Topics = interests
	meta.Generation = generation
	topics := make([]string, 0, len(current))
	for t := range current {
		topics = append(topics, t)
	}
	sort.Strings(topics) // deterministic bytes: the broker compares them
	for _, t := range topics {
		owned := kmsg.NewConsumerMemberMetadataOwnedPartition()
		owned.Topic = t
		owned.Partitions = slices.Sorted(slices.Values(current[t]))
		meta.OwnedPartitions = append(meta.OwnedPartitions, owned)
	}
	return meta.AppendTo(nil)
}

func (taskBalancer) ParseSyncAssignment(assignment []byte) (map[string][]int32, error) {
	return kgo.ParseConsumerSyncAssignment(assignment)
}

func (t taskBalancer) MemberBalancer(members []kmsg.JoinGroupResponseMember) (kgo.GroupMemberBalancer, map[string]struct{}, error) {
	b, err := kgo.NewConsumerBalancer(t, members)
	return b, b.MemberTopics(), err
}

// member is one group member as the balance sees it.
type member struct {
	join  *kmsg.JoinGroupResponseMember
	meta  *kmsg.ConsumerMemberMetadata
	owned []int32 // tasks of the topic set it rightfully claims, ascending
	quota int
	tasks []int32
}

func (taskBalancer) Balance(b *kgo.ConsumerBalancer, partitions map[string]int32) kgo.IntoSyncAssignment {
	plan := b.NewPlan()
	for _, set := range topicSets(b) {
		balanceTasks(b, plan, set.topics, set.members, partitions)
	}
	plan.AdjustCooperative(b)
	return plan
}

// topicSet is topics with the same interested members: their partitions
// p form task p. Members of one stage share one set; different sets exist
// only while a change of input topics rolls out.
type topicSet struct {
	topics  []string
	members []int // indexes into b.Members(), in the balancer's order
}

func topicSets(b *kgo.ConsumerBalancer) []topicSet {
	interested := map[string][]int{}
	i := 0
	b.EachMember(func(_ *kmsg.JoinGroupResponseMember, meta *kmsg.ConsumerMemberMetadata) {
		for _, t := range meta.Topics {
			if !slices.Contains(interested[t], i) {
				interested[t] = append(interested[t], i)
			}
		}
		i++
	})
	byMembers := map[string]*topicSet{}
	var keys []string
	for t, ms := range interested {
		k := fmt.Sprint(ms)
		s, ok := byMembers[k]
		if !ok {
			s = &topicSet{members: ms}
			byMembers[k] = s
			keys = append(keys, k)
		}
		s.topics = append(s.topics, t)
	}
	sort.Strings(keys)
	out := make([]topicSet, 0, len(keys))
	for _, k := range keys {
		s := byMembers[k]
		sort.Strings(s.topics)
		out = append(out, *s)
	}
	return out
}

// balanceTasks plans the tasks of one topic set.
func balanceTasks(b *kgo.ConsumerBalancer, plan *kgo.BalancePlan, topics []string, idx []int, partitions map[string]int32) {
	var n int32
	for _, t := range topics {
		n = max(n, partitions[t])
	}
	if n == 0 || len(idx) == 0 {
		return
	}
	inSet := map[string]bool{}
	for _, t := range topics {
		inSet[t] = true
	}
	members := make([]*member, len(idx))
	for i, x := range idx {
		join, meta := b.MemberAt(x)
		members[i] = &member{join: join, meta: meta}
	}

	// A task's rightful owner is the member claiming it at the highest
	// generation (a member that missed rebalances may still claim what
	// another has since been given); the first such member on a tie.
	owner := make([]int, n)
	gen := make([]int32, n)
	for p := range owner {
		owner[p], gen[p] = -1, -1
	}
	for i, m := range members {
		for _, op := range m.meta.OwnedPartitions {
			if !inSet[op.Topic] {
				continue
			}
			for _, p := range op.Partitions {
				if p < 0 || p >= n {
					continue
				}
				if m.meta.Generation > gen[p] {
					owner[p], gen[p] = i, m.meta.Generation
				}
			}
		}
	}
	for p, i := range owner {
		if i >= 0 {
			members[i].owned = append(members[i].owned, int32(p))
		}
	}

	// Fair shares: the extra task of an uneven split goes to the members
	// that own the most already, so that fewer tasks move.
	base, extra := int(n)/len(members), int(n)%len(members)
	byOwned := slices.Clone(members)
	slices.SortStableFunc(byOwned, func(a, b *member) int { return len(b.owned) - len(a.owned) })
	for i, m := range byOwned {
		m.quota = base
		if i < extra {
			m.quota++
		}
	}

	taken := make([]bool, n)
	for _, m := range members {
		m.tasks = slices.Clone(m.owned[:min(len(m.owned), m.quota)])
		for _, p := range m.tasks {
			taken[p] = true
		}
	}
	next := int32(0)
	for _, m := range members {
		for len(m.tasks) < m.quota {
			for taken[next] {
				next++
			}
			taken[next] = true
			m.tasks = append(m.tasks, next)
		}
	}

	for _, m := range members {
		slices.Sort(m.tasks)
		for _, t := range topics {
			var ps []int32
			for _, p := range m.tasks {
				if p < partitions[t] {
					ps = append(ps, p)
				}
			}
			if len(ps) > 0 {
				plan.AddPartitions(m.join, t, ps)
			}
		}
	}
}

// AnyPartition reports whether parts names a partition: under a
// cooperative assignment every session's end calls the revoke callback,
// mostly with nothing revoked.
func AnyPartition(parts map[string][]int32) bool {
	for _, ps := range parts {
		if len(ps) > 0 {
			return true
		}
	}
	return false
}
