package kafkax

import (
	"fmt"
	"reflect"
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
