package kafkax

import (
	"encoding/json"
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

// TaskBalancersWith are TaskBalancers whose cooperative assignment also
// places standby replicas as sb asks. Under range, which knows nothing of
// standbys, a member keeps none.
func TaskBalancersWith(sb Standbys) kgo.GroupOpt {
	return kgo.Balancers(CooperativeTasksWith(sb), noStandbys{kgo.RangeBalancer(), sb.Assigned, sb.WarmingUp})
}

// noStandbys is a balancer that places no standbys: a member it assigns
// drops those of an earlier assignment.
type noStandbys struct {
	kgo.GroupBalancer
	assigned, warmingUp func(tasks []int32)
}

func (n noStandbys) ParseSyncAssignment(assignment []byte) (map[string][]int32, error) {
	tasks, err := n.GroupBalancer.ParseSyncAssignment(assignment)
	if err == nil && n.assigned != nil {
		n.assigned(nil)
	}
	if err == nil && n.warmingUp != nil {
		n.warmingUp(nil)
	}
	return tasks, err
}

// Standbys asks the cooperative assignment for standby replicas: each
// task's state kept warm on Replicas other members, never on the member
// that runs it. The group's leader places them; each member learns its
// own in its assignment.
type Standbys struct {
	// Replicas is how many members besides the active one keep each
	// task's state (the leader's setting counts).
	Replicas int
	// Held lists the tasks this member keeps a standby of now, so that the
	// leader leaves them where their state is warm.
	Held func() []int32
	// Assigned receives the tasks this member is to keep standbys of,
	// with every assignment (empty when none).
	Assigned func(tasks []int32)
	// WarmUp makes the leader move a task to a member only where its
	// state is warm: a task that is to move for balance (a member joined)
	// stays with its owner, and the member that is to take it keeps a
	// standby of it (a warm-up) until that is warm; the member then asks
	// for a rebalance (KIP-441's probing rebalance, asked for by the
	// member that is ready), which moves it. Tasks without an owner move
	// at once.
	WarmUp bool
	// WarmingUp receives, with every assignment, the standbys among
	// Assigned's that are warm-ups: tasks this member is to take once warm.
	WarmingUp func(tasks []int32)
}

// taskUserData is the user data of the task protocol's join metadata (the
// standbys a member holds) and of its assignment (the standbys it is to
// hold, and which of them are warm-ups). Version 1; a member that cannot
// read it holds and is given none.
type taskUserData struct {
	Version  int     `json:"v"`
	Standbys []int32 `json:"standbys,omitempty"`
	WarmUps  []int32 `json:"warmups,omitempty"`
}

func encodeTaskUserData(standbys, warmUps []int32) []byte {
	if len(standbys) == 0 {
		return nil
	}
	d := taskUserData{Version: 1, Standbys: slices.Sorted(slices.Values(standbys))}
	if len(warmUps) > 0 {
		d.WarmUps = slices.Sorted(slices.Values(warmUps))
	}
	b, _ := json.Marshal(d)
	return b
}

// decodeTaskUserData reads another member's user data; anything it cannot
// read is no standbys, never an error: the member is still a member.
func decodeTaskUserData(b []byte) taskUserData {
	var d taskUserData
	if len(b) == 0 || json.Unmarshal(b, &d) != nil || d.Version != 1 {
		return taskUserData{}
	}
	return d
}

// CooperativeTasks assigns a stage's tasks: task p is partition p of
// every input topic, and a member gets all of a task or none of it. Each
// member keeps the tasks it owns up to its fair share, the rest go to the
// members below theirs in task order, and a task that moves is left out
// of the first assignment (KIP-429) so its owner revokes it, commits, and
// rejoins before the next owner fences it.
func CooperativeTasks() kgo.GroupBalancer { return taskBalancer{} }

// CooperativeTasksWith is CooperativeTasks placing standbys as sb asks.
func CooperativeTasksWith(sb Standbys) kgo.GroupBalancer { return taskBalancer{standbys: sb} }

type taskBalancer struct{ standbys Standbys }

func (taskBalancer) ProtocolName() string { return TaskProtocol }

func (taskBalancer) IsCooperative() bool { return true }

func (t taskBalancer) JoinGroupMetadata(interests []string, current map[string][]int32, generation int32) []byte {
	meta := kmsg.NewConsumerMemberMetadata()
	if t.standbys.Held != nil {
		meta.UserData = encodeTaskUserData(t.standbys.Held(), nil)
	}
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

func (t taskBalancer) ParseSyncAssignment(assignment []byte) (map[string][]int32, error) {
	tasks, err := kgo.ParseConsumerSyncAssignment(assignment)
	if err != nil || t.standbys.Assigned == nil {
		return tasks, err
	}
	var a kmsg.ConsumerMemberAssignment
	if err := a.ReadFrom(assignment); err != nil {
		return nil, err
	}
	d := decodeTaskUserData(a.UserData)
	t.standbys.Assigned(d.Standbys)
	if t.standbys.WarmingUp != nil {
		t.standbys.WarmingUp(d.WarmUps)
	}
	return tasks, nil
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
	// held are the standbys it keeps now (its join metadata's user data);
	// standbys the ones it is to keep, and warmUps those of them it is to
	// take once warm (they count in its share meanwhile).
	held     []int32
	standbys []int32
	warmUps  []int32
	// incoming are its planned tasks that another member owns now: the
	// first cooperative round leaves them out until that member revoked
	// them. With warm-ups it keeps their standbys meanwhile, so that the
	// next round, where they have no owner, finds them warm here.
	incoming []int32
}

func (t taskBalancer) Balance(b *kgo.ConsumerBalancer, partitions map[string]int32) kgo.IntoSyncAssignment {
	plan := b.NewPlan()
	standbys, warmUps := map[string][]int32{}, map[string][]int32{}
	warmUp := t.standbys.WarmUp && t.standbys.Replicas > 0
	for _, set := range topicSets(b) {
		members, n := balanceTasks(b, plan, set.topics, set.members, partitions, warmUp)
		placeStandbys(members, n, t.standbys.Replicas, standbys)
		for _, m := range members {
			if len(m.warmUps) > 0 {
				warmUps[m.join.MemberID] = append(warmUps[m.join.MemberID], m.warmUps...)
			}
		}
	}
	plan.AdjustCooperative(b)
	if t.standbys.Replicas <= 0 {
		return plan
	}
	return withStandbys{plan, standbys, warmUps}
}

// withStandbys is a plan whose assignments carry each member's standbys.
type withStandbys struct {
	plan              *kgo.BalancePlan
	standbys, warmUps map[string][]int32 // by member ID
}

func (w withStandbys) IntoSyncAssignment() []kmsg.SyncGroupRequestGroupAssignment {
	out := w.plan.IntoSyncAssignment()
	for i := range out {
		sb := w.standbys[out[i].MemberID]
		if len(sb) == 0 {
			continue
		}
		var a kmsg.ConsumerMemberAssignment
		if err := a.ReadFrom(out[i].MemberAssignment); err != nil {
			continue // our own bytes: cannot happen
		}
		a.UserData = encodeTaskUserData(sb, w.warmUps[out[i].MemberID])
		out[i].MemberAssignment = a.AppendTo(nil)
	}
	return out
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

// balanceTasks plans the tasks of one topic set, and returns its members
// with their tasks and the number of tasks. With warmUp, a task that is
// to move away from its owner for balance moves only to a member that
// holds it warm; otherwise its owner keeps it and a member below its
// share is to warm it up.
func balanceTasks(b *kgo.ConsumerBalancer, plan *kgo.BalancePlan, topics []string, idx []int, partitions map[string]int32, warmUp bool) ([]*member, int32) {
	var n int32
	for _, t := range topics {
		n = max(n, partitions[t])
	}
	if n == 0 || len(idx) == 0 {
		return nil, 0
	}
	inSet := map[string]bool{}
	for _, t := range topics {
		inSet[t] = true
	}
	members := make([]*member, len(idx))
	for i, x := range idx {
		join, meta := b.MemberAt(x)
		members[i] = &member{join: join, meta: meta, held: decodeTaskUserData(meta.UserData).Standbys}
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

	if warmUp {
		givesAwayWarmFirst(members)
	}
	taken := make([]bool, n)
	for _, m := range members {
		m.tasks = slices.Clone(m.owned[:min(len(m.owned), m.quota)])
		for _, p := range m.tasks {
			taken[p] = true
		}
	}
	// A task without an owner goes first to a member below its share
	// that keeps a standby of it: its state is warm there.
	for p := range n {
		if taken[p] {
			continue
		}
		for _, m := range members {
			if len(m.tasks) < m.quota && slices.Contains(m.held, p) {
				taken[p] = true
				m.tasks = append(m.tasks, p)
				break
			}
		}
	}
	if warmUp {
		warmUpMoves(members, owner, taken)
	}
	next := int32(0)
	for _, m := range members {
		for len(m.tasks)+len(m.warmUps) < m.quota {
			for next < n && taken[next] {
				next++
			}
			if next == n {
				break // cannot happen: the quotas add up to n
			}
			taken[next] = true
			m.tasks = append(m.tasks, next)
		}
	}

	if warmUp {
		for i, m := range members {
			for _, p := range m.tasks {
				if owner[p] >= 0 && owner[p] != i {
					m.incoming = append(m.incoming, p)
				}
			}
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
	return members, n
}

// givesAwayWarmFirst orders each member's owned tasks so that, of those
// past its share, it gives away first the ones another member below its
// share holds warm: the freshest copy elsewhere takes the task.
func givesAwayWarmFirst(members []*member) {
	warmElsewhere := func(self *member, p int32) bool {
		for _, m := range members {
			if m != self && len(m.owned) < m.quota && slices.Contains(m.held, p) {
				return true
			}
		}
		return false
	}
	for _, m := range members {
		if len(m.owned) <= m.quota {
			continue
		}
		slices.SortStableFunc(m.owned, func(a, b int32) int {
			wa, wb := warmElsewhere(m, a), warmElsewhere(m, b)
			switch {
			case wa == wb:
				return int(a - b)
			case wb:
				return -1
			default:
				return 1
			}
		})
	}
}

// warmUpMoves keeps each task that is to leave its owner, and has no warm
// copy on a member below its share, with that owner for now, and makes it
// a warm-up of the member below its share with the most room left (the
// task counts in that member's share, so no other task fills it).
func warmUpMoves(members []*member, owner []int, taken []bool) {
	for p, o := range owner {
		if o < 0 || taken[p] {
			continue
		}
		to := -1
		for i, m := range members {
			if room := m.quota - len(m.tasks) - len(m.warmUps); room > 0 && i != o &&
				(to < 0 || room > members[to].quota-len(members[to].tasks)-len(members[to].warmUps)) {
				to = i
			}
		}
		if to < 0 {
			continue // no room anywhere: cannot happen, the quotas add up
		}
		taken[p] = true
		members[o].tasks = append(members[o].tasks, int32(p))
		members[to].warmUps = append(members[to].warmUps, int32(p))
	}
}

// placeStandbys gives each of the n tasks up to replicas standbys among
// the members that do not run it (as planned, before a moving task's
// first round leaves it out), into out by member ID. Three aims, in this
// order: a member's tasks have their standbys on different members (so
// that when it fails, its tasks go to several members, each warm),
// every member keeps as many standbys as the next (within one), and a
// standby stays where its state is warm (a standby the member keeps, or
// the task it runs now and gives up).
func placeStandbys(members []*member, n int32, replicas int, out map[string][]int32) {
	if replicas <= 0 || len(members) < 2 {
		return
	}
	pl := newStandbyPlan(members, n, min(replicas, len(members)-1))
	// The tasks in turns of their members (the first task of each, then
	// the second of each, ...), so that no member's tasks, which it
	// cannot take standbys of, all come last.
	var order []int32
	for j, more := 0, true; more; j++ {
		more = false
		for _, m := range members {
			if j < len(m.tasks) {
				order, more = append(order, m.tasks[j]), true
			}
		}
	}
	for _, p := range order {
		a := pl.active[p]
		var chosen []int
		for b, m := range members {
			if len(chosen) < pl.replicas && pl.allowed(b, p) && len(m.standbys) < pl.fair && pl.spread[b][a] < pl.spreadCap[a] &&
				(slices.Contains(m.held, p) || slices.Contains(m.owned, p)) {
				chosen = append(chosen, b)
			}
		}
		for len(chosen) < pl.replicas {
			best := -1
			for b := range members {
				if pl.allowed(b, p) && !slices.Contains(chosen, b) && (best < 0 || pl.better(b, best, a)) {
					best = b
				}
			}
			chosen = append(chosen, best)
		}
		for _, b := range chosen {
			pl.add(b, p)
		}
	}
	pl.even()
	for _, m := range members {
		for _, p := range slices.Concat(m.warmUps, m.incoming) {
			if !slices.Contains(m.standbys, p) {
				m.standbys = append(m.standbys, p)
			}
		}
		if len(m.standbys) > 0 {
			out[m.join.MemberID] = append(out[m.join.MemberID], m.standbys...)
		}
	}
}

// standbyPlan is the standby placement of one topic set under way;
// members are named by index.
type standbyPlan struct {
	members  []*member
	replicas int
	fair     int   // standbys per member, rounded up
	active   []int // by task: the member that runs it
	// spread[b][a] counts b's standbys of tasks a runs; spreadCap[a] is
	// the most any one member should keep of a's.
	spread    [][]int
	spreadCap []int
}

func newStandbyPlan(members []*member, n int32, replicas int) *standbyPlan {
	pl := &standbyPlan{members: members, replicas: replicas, active: make([]int, n),
		fair: (int(n)*replicas + len(members) - 1) / len(members), spreadCap: make([]int, len(members))}
	for a, m := range members {
		for _, p := range m.tasks {
			pl.active[p] = a
		}
		pl.spread = append(pl.spread, make([]int, len(members)))
		pl.spreadCap[a] = (len(m.tasks)*replicas + len(members) - 2) / (len(members) - 1)
	}
	return pl
}

// allowed reports whether member b may keep task p's standby now.
func (pl *standbyPlan) allowed(b int, p int32) bool {
	return pl.active[p] != b && !slices.Contains(pl.members[b].standbys, p)
}

// better reports whether b is a better standby than c for a task a runs:
// fewer standbys of a's tasks, then fewer standbys, then nearer after a in
// the members' order.
func (pl *standbyPlan) better(b, c, a int) bool {
	if sb, sc := pl.spread[b][a], pl.spread[c][a]; sb != sc {
		return sb < sc
	}
	if lb, lc := len(pl.members[b].standbys), len(pl.members[c].standbys); lb != lc {
		return lb < lc
	}
	k := len(pl.members)
	return (b-a+k)%k < (c-a+k)%k
}

func (pl *standbyPlan) add(b int, p int32) {
	pl.members[b].standbys = append(pl.members[b].standbys, p)
	pl.spread[b][pl.active[p]]++
}

// even moves standbys from the members with the most to those with the
// fewest until they differ by one at most, or none may move without
// putting more of one member's tasks on another than its share. It moves
// what is not warm where it is first.
func (pl *standbyPlan) even() {
	for {
		lo, hi := 0, 0
		for b, m := range pl.members {
			if len(m.standbys) < len(pl.members[lo].standbys) {
				lo = b
			}
			if len(m.standbys) > len(pl.members[hi].standbys) {
				hi = b
			}
		}
		fewest, most := len(pl.members[lo].standbys), len(pl.members[hi].standbys)
		if most-fewest <= 1 || !pl.moveOne(fewest, most) {
			return
		}
	}
}

func (pl *standbyPlan) moveOne(fewest, most int) bool {
	for tier := range 2 {
		for from, fm := range pl.members {
			if len(fm.standbys) != most {
				continue
			}
			for to, tm := range pl.members {
				if len(tm.standbys) != fewest {
					continue
				}
				for i, p := range fm.standbys {
					a := pl.active[p]
					if !pl.allowed(to, p) || pl.spread[to][a] >= pl.spreadCap[a] ||
						tier == 0 && slices.Contains(fm.held, p) {
						continue
					}
					fm.standbys = slices.Delete(fm.standbys, i, i+1)
					pl.spread[from][a]--
					pl.add(to, p)
					return true
				}
			}
		}
	}
	return false
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
