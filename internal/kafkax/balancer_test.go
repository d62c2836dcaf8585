package kafkax

import (
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// joiner is a member as it joins: what it subscribes to and owns.
type joiner struct {
	id     string
	topics []string
	owned  map[string][]int32
	gen    int32
}

// balance runs the cooperative task balancer as a group leader would and
// returns each member's assignment.
func balance(t *testing.T, partitions map[string]int32, joiners ...joiner) map[string]map[string][]int32 {
	t.Helper()
	bal := CooperativeTasks()
	var members []kmsg.JoinGroupResponseMember
	for _, j := range joiners {
		m := kmsg.NewJoinGroupResponseMember()
		m.MemberID = j.id
		m.ProtocolMetadata = bal.JoinGroupMetadata(j.topics, j.owned, j.gen)
		members = append(members, m)
	}
	mb, _, err := bal.MemberBalancer(members)
	if err != nil {
		t.Fatal(err)
	}
	into, err := mb.(kgo.GroupMemberBalancerOrError).BalanceOrError(partitions)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string][]int32{}
	for _, a := range into.IntoSyncAssignment() {
		got, err := bal.ParseSyncAssignment(a.MemberAssignment)
		if err != nil {
			t.Fatal(err)
		}
		out[a.MemberID] = got
	}
	return out
}

func tasksOf(a map[string][]int32, topic string) string { return fmt.Sprint(a[topic]) }

func TestCooperativeTasksFreshGroupSplitsLikeRange(t *testing.T) {
	in := []string{"a", "b"}
	got := balance(t, map[string]int32{"a": 5, "b": 5},
		joiner{id: "m1", topics: in}, joiner{id: "m2", topics: in})
	for _, topic := range in {
		if tasksOf(got["m1"], topic) != "[0 1 2]" || tasksOf(got["m2"], topic) != "[3 4]" {
			t.Errorf("topic %s: m1 %v, m2 %v; want [0 1 2] and [3 4]", topic, got["m1"][topic], got["m2"][topic])
		}
	}
}

// A member joining takes tasks only from the member that owns more than
// its share; and in the first round it gets none: the owner revokes them
// first.
func TestCooperativeTasksJoinMovesOnlyWhatMust(t *testing.T) {
	in := []string{"a", "b"}
	owned := map[string][]int32{"a": {0, 1, 2, 3}, "b": {0, 1, 2, 3}}
	first := balance(t, map[string]int32{"a": 4, "b": 4},
		joiner{id: "m1", topics: in, owned: owned, gen: 3}, joiner{id: "m2", topics: in})
	if tasksOf(first["m1"], "a") != "[0 1]" || tasksOf(first["m1"], "b") != "[0 1]" {
		t.Errorf("m1 keeps %v, want tasks [0 1] of both topics", first["m1"])
	}
	if len(first["m2"]) != 0 {
		t.Errorf("m2 got %v in the round its tasks are still being revoked", first["m2"])
	}
	// The rejoin after m1's revoke hands them over.
	second := balance(t, map[string]int32{"a": 4, "b": 4},
		joiner{id: "m1", topics: in, owned: first["m1"], gen: 4}, joiner{id: "m2", topics: in, gen: 4})
	if !reflect.DeepEqual(second["m1"], first["m1"]) {
		t.Errorf("m1's tasks changed in the second round: %v, then %v", first["m1"], second["m1"])
	}
	if tasksOf(second["m2"], "a") != "[2 3]" || tasksOf(second["m2"], "b") != "[2 3]" {
		t.Errorf("m2 got %v, want tasks [2 3] of both topics", second["m2"])
	}
}

// When a member leaves, its tasks go to the others and nobody else's task
// moves (range would shift the ranges: task 2 from m1 to m2 here).
func TestCooperativeTasksLeaveKeepsTheRest(t *testing.T) {
	in := []string{"a"}
	got := balance(t, map[string]int32{"a": 6},
		joiner{id: "m1", topics: in, owned: map[string][]int32{"a": {0, 1}}, gen: 5},
		joiner{id: "m3", topics: in, owned: map[string][]int32{"a": {4, 5}}, gen: 5})
	if tasksOf(got["m1"], "a") != "[0 1 2]" || tasksOf(got["m3"], "a") != "[3 4 5]" {
		t.Errorf("m1 %v, m3 %v; want [0 1 2] and [3 4 5]", got["m1"]["a"], got["m3"]["a"])
	}
}

// An uneven split leaves the extra task with the member that already owns
// it, and a stale claim (a lower generation) loses to the current owner.
func TestCooperativeTasksUnevenAndStaleClaims(t *testing.T) {
	in := []string{"a"}
	got := balance(t, map[string]int32{"a": 3},
		joiner{id: "m1", topics: in, owned: map[string][]int32{"a": {2}}, gen: 7},
		joiner{id: "m2", topics: in, owned: map[string][]int32{"a": {0, 1, 2}}, gen: 6})
	if tasksOf(got["m2"], "a") != "[0 1]" || tasksOf(got["m1"], "a") != "[2]" {
		t.Errorf("m1 %v, m2 %v; want [2] (its current claim) and [0 1]", got["m1"]["a"], got["m2"]["a"])
	}
}

// Members that subscribe to different topics (a change of input topics
// rolling out) have each topic assigned among its own subscribers only.
func TestCooperativeTasksDifferentSubscriptions(t *testing.T) {
	got := balance(t, map[string]int32{"a": 2, "b": 2},
		joiner{id: "m1", topics: []string{"a", "b"}}, joiner{id: "m2", topics: []string{"a"}})
	if tasksOf(got["m1"], "b") != "[0 1]" {
		t.Errorf("b went to %v and %v; only m1 reads it", got["m1"]["b"], got["m2"]["b"])
	}
	if tasksOf(got["m1"], "a") != "[0]" || tasksOf(got["m2"], "a") != "[1]" {
		t.Errorf("a: m1 %v, m2 %v; want [0] and [1]", got["m1"]["a"], got["m2"]["a"])
	}
	if _, ok := got["m2"]["b"]; ok {
		t.Errorf("m2 got topic b it does not read: %v", got["m2"])
	}
}

// More members than tasks: every task is assigned once, the spare member
// gets nothing.
func TestCooperativeTasksMoreMembersThanTasks(t *testing.T) {
	in := []string{"a"}
	got := balance(t, map[string]int32{"a": 2},
		joiner{id: "m1", topics: in}, joiner{id: "m2", topics: in}, joiner{id: "m3", topics: in})
	seen := map[int32]int{}
	for _, a := range got {
		for _, p := range a["a"] {
			seen[p]++
		}
	}
	if !reflect.DeepEqual(seen, map[int32]int{0: 1, 1: 1}) {
		t.Errorf("tasks assigned %v, want 0 and 1 once each (%v)", seen, got)
	}
}

func TestCooperativeTasksProtocolAndMetadata(t *testing.T) {
	bal := CooperativeTasks()
	if !bal.IsCooperative() || bal.ProtocolName() != TaskProtocol {
		t.Fatalf("%s cooperative=%v", bal.ProtocolName(), bal.IsCooperative())
	}
	// Equal inputs give equal bytes: the broker compares a static
	// member's metadata on its rejoin.
	a := bal.JoinGroupMetadata([]string{"x"}, map[string][]int32{"x": {2, 0}, "w": {1}}, 1)
	b := bal.JoinGroupMetadata([]string{"x"}, map[string][]int32{"w": {1}, "x": {0, 2}}, 1)
	if string(a) != string(b) {
		t.Error("the join metadata depends on map order")
	}
}

// standbyJoiner is a joiner that holds standbys (held) and may send user
// data that is not ours (raw).
type standbyJoiner struct {
	joiner
	held []int32
	raw  []byte
}

// balanceStandbys runs the balancer with replicas standbys as a leader
// would and returns each member's tasks (of topic "a") and standbys.
func balanceStandbys(t *testing.T, tasks int32, replicas int, joiners ...standbyJoiner) (map[string][]int32, map[string][]int32) {
	t.Helper()
	active, standby, _ := balanceWarmUps(t, tasks, replicas, false, joiners...)
	return active, standby
}

// balanceWarmUps is balanceStandbys with warm-ups on or off; it also
// returns each member's warm-ups.
func balanceWarmUps(t *testing.T, tasks int32, replicas int, warmUp bool, joiners ...standbyJoiner) (active, standby, warmUps map[string][]int32) {
	t.Helper()
	var members []kmsg.JoinGroupResponseMember
	for _, j := range joiners {
		held := j.held
		bal := CooperativeTasksWith(Standbys{Replicas: replicas, Held: func() []int32 { return held }})
		m := kmsg.NewJoinGroupResponseMember()
		m.MemberID = j.id
		m.ProtocolMetadata = bal.JoinGroupMetadata([]string{"a"}, j.owned, j.gen)
		if j.raw != nil {
			var meta kmsg.ConsumerMemberMetadata
			if err := meta.ReadFrom(m.ProtocolMetadata); err != nil {
				t.Fatal(err)
			}
			meta.UserData = j.raw
			m.ProtocolMetadata = meta.AppendTo(nil)
		}
		members = append(members, m)
	}
	var got, warming []int32
	leader := CooperativeTasksWith(Standbys{Replicas: replicas, WarmUp: warmUp,
		Assigned: func(s []int32) { got = s }, WarmingUp: func(s []int32) { warming = s }})
	mb, _, err := leader.MemberBalancer(members)
	if err != nil {
		t.Fatal(err)
	}
	into, err := mb.(kgo.GroupMemberBalancerOrError).BalanceOrError(map[string]int32{"a": tasks})
	if err != nil {
		t.Fatal(err)
	}
	active, standby, warmUps = map[string][]int32{}, map[string][]int32{}, map[string][]int32{}
	for _, a := range into.IntoSyncAssignment() {
		got = []int32{-1} // Assigned must be called, also with none
		parsed, err := leader.ParseSyncAssignment(a.MemberAssignment)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Equal(got, []int32{-1}) {
			t.Fatalf("%s: Assigned not called", a.MemberID)
		}
		active[a.MemberID], standby[a.MemberID], warmUps[a.MemberID] = parsed["a"], got, warming
	}
	return active, standby, warmUps
}

// checkStandbys fails unless every task has exactly want standbys, none
// on the member that runs it.
func checkStandbys(t *testing.T, tasks int32, want int, active, standby map[string][]int32) {
	t.Helper()
	count := map[int32]int{}
	for id, sb := range standby {
		for _, p := range sb {
			if slices.Contains(active[id], p) {
				t.Errorf("%s runs task %d and keeps its standby", id, p)
			}
			count[p]++
		}
	}
	for p := range tasks {
		if count[p] != want {
			t.Errorf("task %d has %d standbys, want %d (active %v, standbys %v)", p, count[p], want, active, standby)
		}
	}
}

func TestStandbysNeverWithTheirTaskAndSpreadEvenly(t *testing.T) {
	three := []standbyJoiner{{joiner: joiner{id: "m1"}}, {joiner: joiner{id: "m2"}}, {joiner: joiner{id: "m3"}}}
	active, standby := balanceStandbys(t, 6, 1, three...)
	checkStandbys(t, 6, 1, active, standby)
	for id, sb := range standby {
		if len(sb) != 2 {
			t.Errorf("%s keeps %d standbys, want 2 of 6: %v", id, len(sb), standby)
		}
	}
	// More replicas than other members: every other member, no more.
	active, standby = balanceStandbys(t, 6, 5, three...)
	checkStandbys(t, 6, 2, active, standby)
	// One member alone keeps none.
	_, standby = balanceStandbys(t, 4, 1, three[0])
	if len(standby["m1"]) != 0 {
		t.Errorf("a lone member keeps standbys %v", standby["m1"])
	}
	// No replicas asked: no user data at all, as before standbys.
	_, standby = balanceStandbys(t, 4, 0, three...)
	for id, sb := range standby {
		if len(sb) != 0 {
			t.Errorf("%s keeps %v without replicas", id, sb)
		}
	}
}

func TestStandbysStayWhereTheirStateIsWarm(t *testing.T) {
	owned := func(ps ...int32) map[string][]int32 { return map[string][]int32{"a": ps} }
	// m1 ran 0-2 and m2 3-5, m3 joins (and takes 2 and 5); m3 kept the
	// standbys of 0 and 3, m1 that of 4: the rebalance leaves them there.
	// (Two standbys of m1's tasks on m3 would not: a member's tasks have
	// their standbys on different members first.)
	active, standby := balanceStandbys(t, 6, 1,
		standbyJoiner{joiner: joiner{id: "m1", owned: owned(0, 1, 2), gen: 3}, held: []int32{4}},
		standbyJoiner{joiner: joiner{id: "m2", owned: owned(3, 4, 5), gen: 3}},
		standbyJoiner{joiner: joiner{id: "m3", gen: 3}, held: []int32{0, 3}})
	checkStandbys(t, 6, 1, active, standby)
	for _, want := range []struct {
		id string
		p  int32
	}{{"m3", 0}, {"m3", 3}, {"m1", 4}} {
		if !slices.Contains(standby[want.id], want.p) {
			t.Errorf("the standby of task %d left %s, where it was warm: %v (active %v)", want.p, want.id, standby, active)
		}
	}
	// A task that moves away keeps a standby on the member that ran it.
	active, standby = balanceStandbys(t, 2, 1,
		standbyJoiner{joiner: joiner{id: "m1", owned: owned(0, 1), gen: 3}},
		standbyJoiner{joiner: joiner{id: "m2", gen: 3}})
	checkStandbys(t, 2, 1, active, standby)
	if !slices.Contains(standby["m1"], 1) {
		t.Errorf("task 1 moved to m2 without a standby on m1, which ran it: active %v, standbys %v", active, standby)
	}
}

func TestStandbysIgnoreUserDataTheyCannotRead(t *testing.T) {
	for _, raw := range [][]byte{[]byte("{"), []byte(`{"v":2,"standbys":[0]}`), []byte(`{"v":1,"standbys":[99,-4]}`), {0xff, 0}} {
		active, standby := balanceStandbys(t, 4, 1,
			standbyJoiner{joiner: joiner{id: "m1"}, raw: raw}, standbyJoiner{joiner: joiner{id: "m2"}})
		checkStandbys(t, 4, 1, active, standby)
	}
}

func TestStandbysEveryShape(t *testing.T) {
	for members := 1; members <= 6; members++ {
		for tasks := int32(1); tasks <= 12; tasks++ {
			for replicas := 0; replicas <= 3; replicas++ {
				var js []standbyJoiner
				for i := range members {
					js = append(js, standbyJoiner{joiner: joiner{id: fmt.Sprintf("m%d", i)}})
				}
				active, standby := balanceStandbys(t, tasks, replicas, js...)
				checkStandbys(t, tasks, min(replicas, members-1), active, standby)
				lo, hi := int(tasks), 0
				for _, j := range js {
					lo, hi = min(lo, len(standby[j.id])), max(hi, len(standby[j.id]))
				}
				if hi-lo > 1 {
					t.Errorf("%d members, %d tasks, %d replicas: standbys per member from %d to %d: %v", members, tasks, replicas, lo, hi, standby)
				}
				// A member's tasks have their standbys spread over the
				// others: none keeps more than its share of them.
				for a, runs := range active {
					limit := 0
					if members > 1 {
						limit = (len(runs)*min(replicas, members-1) + members - 2) / (members - 1)
					}
					for b, sb := range standby {
						kept := 0
						for _, p := range sb {
							if slices.Contains(runs, p) {
								kept++
							}
						}
						if kept > limit {
							t.Errorf("%d members, %d tasks, %d replicas: %s keeps %d standbys of %s's tasks %v, more than %d: %v", members, tasks, replicas, b, kept, a, runs, limit, standby)
						}
					}
				}
			}
		}
	}
}

// TestOrphanedTasksGoToTheirStandbys: when a member leaves, each of its
// tasks goes to the member that keeps its standby, not to the first one
// below its share.
func TestOrphanedTasksGoToTheirStandbys(t *testing.T) {
	owned := func(ps ...int32) map[string][]int32 { return map[string][]int32{"a": ps} }
	// m1 ran 0 and 1 and is gone; m3 keeps the standby of 0, m2 of 1.
	active, standby := balanceStandbys(t, 6, 1,
		standbyJoiner{joiner: joiner{id: "m2", owned: owned(2, 3), gen: 4}, held: []int32{1, 4}},
		standbyJoiner{joiner: joiner{id: "m3", owned: owned(4, 5), gen: 4}, held: []int32{0, 2}})
	if !slices.Contains(active["m3"], 0) || !slices.Contains(active["m2"], 1) {
		t.Errorf("tasks 0 and 1 went to %v; want 0 on m3 and 1 on m2, where their standbys are", active)
	}
	checkStandbys(t, 6, 1, active, standby)
}

// TestWarmStandbysStayEven: standbys held warm where they no longer fit
// evenly still end up spread evenly.
func TestWarmStandbysStayEven(t *testing.T) {
	owned := func(ps ...int32) map[string][]int32 { return map[string][]int32{"a": ps} }
	active, standby := balanceStandbys(t, 6, 1,
		standbyJoiner{joiner: joiner{id: "one", owned: owned(0, 1), gen: 5}, held: []int32{2, 3, 4, 5}},
		standbyJoiner{joiner: joiner{id: "two", owned: owned(2, 3), gen: 5}, held: []int32{0, 1}},
		standbyJoiner{joiner: joiner{id: "three", owned: owned(4, 5), gen: 5}})
	checkStandbys(t, 6, 1, active, standby)
	for id, sb := range standby {
		if len(sb) != 2 {
			t.Errorf("%s keeps %d standbys, want 2: %v (active %v)", id, len(sb), standby, active)
		}
	}
}

// TestRangeDropsStandbys: a group that falls back to range (a Flechtwerk
// replica joined) gives no standbys, and a member drops those it kept.
func TestRangeDropsStandbys(t *testing.T) {
	kept := []int32{1, 2}
	rng := noStandbys{kgo.RangeBalancer(), func(s []int32) { kept = s }, nil}
	var a kmsg.ConsumerMemberAssignment
	topic := kmsg.NewConsumerMemberAssignmentTopic()
	topic.Topic, topic.Partitions = "a", []int32{0}
	a.Topics = append(a.Topics, topic)
	got, err := rng.ParseSyncAssignment(a.AppendTo(nil))
	if err != nil || fmt.Sprint(got["a"]) != "[0]" {
		t.Fatalf("range's assignment parsed as %v, %v", got, err)
	}
	if len(kept) != 0 {
		t.Errorf("standbys %v kept under range", kept)
	}
	if rng.ProtocolName() != "range" {
		t.Errorf("protocol %q, want range", rng.ProtocolName())
	}
}

// TestWarmUpsMoveTasksOnlyOnceWarm: with warm-ups, members that join a
// group whose owner runs every task take none at once: the owner keeps
// running them, and each joiner is to warm up its share as standbys.
// Once a joiner holds its warm-ups warm, the next rebalance moves exactly
// those to it (the owner revokes them first, as any cooperative move).
// Tasks without an owner move at once, warm or not.
func TestWarmUpsMoveTasksOnlyOnceWarm(t *testing.T) {
	owned := func(ps ...int32) map[string][]int32 { return map[string][]int32{"a": ps} }
	active, standby, warmUps := balanceWarmUps(t, 6, 1, true,
		standbyJoiner{joiner: joiner{id: "m1", owned: owned(0, 1, 2, 3, 4, 5), gen: 3}},
		standbyJoiner{joiner: joiner{id: "m2", gen: 3}},
		standbyJoiner{joiner: joiner{id: "m3", gen: 3}})
	if fmt.Sprint(active["m1"]) != "[0 1 2 3 4 5]" || len(active["m2"])+len(active["m3"]) != 0 {
		t.Fatalf("tasks moved before any copy was warm: active %v", active)
	}
	if len(warmUps["m2"]) != 2 || len(warmUps["m3"]) != 2 || len(warmUps["m1"]) != 0 {
		t.Fatalf("warm-ups %v, want two on each joiner, none on the owner", warmUps)
	}
	for id, ws := range warmUps {
		for _, p := range ws {
			if !slices.Contains(standby[id], p) {
				t.Errorf("%s is to warm up task %d but does not keep its standby: %v", id, p, standby)
			}
		}
	}
	for p := range int32(6) {
		n := 0
		for _, sb := range standby {
			if slices.Contains(sb, p) {
				n++
			}
		}
		if n < 1 {
			t.Errorf("task %d has no standby: %v", p, standby)
		}
	}

	// m2's warm-ups are warm now: the rebalance it asks for moves them
	// (revoked by m1 in this first round), m3's stay with m1.
	m2, m3 := warmUps["m2"], warmUps["m3"]
	active, standby, warmUps = balanceWarmUps(t, 6, 1, true,
		standbyJoiner{joiner: joiner{id: "m1", owned: owned(0, 1, 2, 3, 4, 5), gen: 4}},
		standbyJoiner{joiner: joiner{id: "m2", gen: 4}, held: m2},
		standbyJoiner{joiner: joiner{id: "m3", gen: 4}})
	for _, p := range m2 {
		if slices.Contains(active["m1"], p) {
			t.Errorf("task %d, warm on m2, still runs on m1: %v", p, active)
		}
	}
	for _, p := range m3 {
		if !slices.Contains(active["m1"], p) {
			t.Errorf("task %d, not warm on m3 yet, left m1: %v", p, active)
		}
	}
	// Until m1 has revoked them, m2 keeps their standbys: the next round
	// finds them warm there.
	for _, p := range m2 {
		if !slices.Contains(standby["m2"], p) {
			t.Errorf("m2 dropped the standby of task %d, which moves to it: %v", p, standby)
		}
	}
	if fmt.Sprint(warmUps["m3"]) != fmt.Sprint(m3) || len(warmUps["m2"]) != 0 {
		t.Errorf("warm-ups %v after m2's are warm, want m3's %v only", warmUps, m3)
	}
	// The second round: m1 no longer claims m2's tasks; they go to m2.
	left := slices.DeleteFunc(slices.Clone(active["m1"]), func(p int32) bool { return slices.Contains(m2, p) })
	active, _, _ = balanceWarmUps(t, 6, 1, true,
		standbyJoiner{joiner: joiner{id: "m1", owned: owned(left...), gen: 5}},
		standbyJoiner{joiner: joiner{id: "m2", gen: 5}, held: m2},
		standbyJoiner{joiner: joiner{id: "m3", gen: 5}})
	if fmt.Sprint(active["m2"]) != fmt.Sprint(m2) {
		t.Errorf("m2 runs %v, want its warmed-up %v", active["m2"], m2)
	}

	// A member that left leaves tasks without an owner: they move at once,
	// to a member with room, warm or not.
	active, _, warmUps = balanceWarmUps(t, 4, 1, true,
		standbyJoiner{joiner: joiner{id: "m1", owned: owned(0, 1), gen: 7}},
		standbyJoiner{joiner: joiner{id: "m2", gen: 7}})
	if fmt.Sprint(active["m2"]) != "[2 3]" || len(warmUps["m2"]) != 0 {
		t.Errorf("orphaned tasks 2 and 3: active %v, warm-ups %v; want them on m2 at once", active, warmUps)
	}
	// Without warm-ups, the joiners take their share at once.
	active, _, warmUps = balanceWarmUps(t, 6, 1, false,
		standbyJoiner{joiner: joiner{id: "m1", owned: owned(0, 1, 2, 3, 4, 5), gen: 3}},
		standbyJoiner{joiner: joiner{id: "m2", gen: 3}})
	if len(active["m1"]) != 3 || len(warmUps["m2"]) != 0 {
		t.Errorf("without warm-ups: active %v, warm-ups %v; want m1 to give 3 tasks up at once", active, warmUps)
	}
}

// TestFreshestCopyTakesTheTask: an owner past its share gives away first
// the tasks a member below its share holds warm.
func TestFreshestCopyTakesTheTask(t *testing.T) {
	owned := func(ps ...int32) map[string][]int32 { return map[string][]int32{"a": ps} }
	active, _, warmUps := balanceWarmUps(t, 4, 1, true,
		standbyJoiner{joiner: joiner{id: "m1", owned: owned(0, 1, 2, 3), gen: 3}},
		standbyJoiner{joiner: joiner{id: "m2", gen: 3}, held: []int32{0, 1}})
	// 0 and 1 move (left out of this first round, revoked by m1); m1 keeps 2 and 3.
	if fmt.Sprint(active["m1"]) != "[2 3]" || len(warmUps["m2"]) != 0 {
		t.Errorf("active %v, warm-ups %v; want m1 to keep 2 and 3 and give m2 its warm 0 and 1", active, warmUps)
	}
}
