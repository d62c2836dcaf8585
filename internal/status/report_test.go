package status

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/flecht-dev/flecht/internal/kafkax"
)

func sample(at time.Time, committed map[int32]int64, ends map[int32]int64) *Sample {
	s := &Sample{
		At:         at,
		Group:      kafkax.Group{State: "Stable", Protocol: "classic", Members: []kafkax.GroupMember{{ClientID: "c1", Host: "/127.0.0.1", Assigned: []kafkax.TopicPartitions{{Topic: "raw", Partitions: []int32{0, 1}}}}}},
		Inputs:     []string{"raw"},
		Partitions: map[string][]int32{"raw": {0, 1, 2}},
		Committed:  map[TP]int64{},
		Starts:     map[TP]int64{{Topic: "raw", Partition: 2}: 5},
		Ends:       map[TP]int64{},
		Changelog:  Changelog{Topic: "app-changelog", Exists: true, Partitions: 3, Records: 9},
	}
	for p, c := range committed {
		s.Committed[TP{Topic: "raw", Partition: p}] = c
	}
	for p, e := range ends {
		s.Ends[TP{Topic: "raw", Partition: p}] = e
	}
	return s
}

func TestBuildLagAndThroughput(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	prev := sample(t0, map[int32]int64{0: 100, 1: 0}, map[int32]int64{0: 1000, 1: 500, 2: 25})
	cur := sample(t0.Add(2*time.Second), map[int32]int64{0: 300, 1: 100}, map[int32]int64{0: 1010, 1: 500, 2: 35})
	r := Build("app", prev, cur)

	if len(r.Inputs) != 3 {
		t.Fatalf("inputs %+v", r.Inputs)
	}
	// Lags: 1010-300, 500-100, and 35-5 for the partition without a
	// commit (the stage would start at its log start).
	wantLag := []int64{710, 400, 30}
	for i, in := range r.Inputs {
		if in.Lag != wantLag[i] {
			t.Errorf("partition %d lag %d, want %d", in.Partition, in.Lag, wantLag[i])
		}
	}
	if r.Inputs[2].Committed != nil || r.Inputs[0].Member != "c1" || r.Inputs[2].Member != "" {
		t.Errorf("%+v", r.Inputs)
	}
	if r.Lag != 1140 {
		t.Errorf("lag %d", r.Lag)
	}
	th := r.Throughput
	if th == nil || th.IntervalSeconds != 2 || th.ConsumedPerSecond != 150 || th.ProducedPerSecond != 10 {
		t.Fatalf("throughput %+v", th)
	}
	// Lag before: 900 + 500 + 20 = 1420; now 1140.
	if th.LagChange != -280 {
		t.Errorf("lag change %d", th.LagChange)
	}
	if th.ETASeconds == nil || *th.ETASeconds != 1140.0/140.0 {
		t.Errorf("eta %v", th.ETASeconds)
	}

	b, _ := json.Marshal(r)
	for _, k := range []string{`"application_id":"app"`, `"group_state":"Stable"`, `"committed":null`, `"lag":1140`, `"changelog":{"topic":"app-changelog","exists":true,"partitions":3,"records":9,"bytes":null}`, `"pending":[]`} {
		if !strings.Contains(string(b), k) {
			t.Errorf("JSON lacks %s:\n%s", k, b)
		}
	}
}

func TestBuildNoETAWhenLagGrows(t *testing.T) {
	t0 := time.Now()
	prev := sample(t0, map[int32]int64{0: 0}, map[int32]int64{0: 10})
	cur := sample(t0.Add(time.Second), map[int32]int64{0: 5}, map[int32]int64{0: 100})
	r := Build("app", prev, cur)
	if r.Throughput.ETASeconds != nil || r.Throughput.LagChange <= 0 {
		t.Errorf("%+v", r.Throughput)
	}
	if r := Build("app", nil, cur); r.Throughput != nil {
		t.Errorf("one sample, no throughput: %+v", r.Throughput)
	}
}

func TestBuildNotes(t *testing.T) {
	s := &Sample{At: time.Now(), Group: kafkax.Group{State: kafkax.GroupStateDead}}
	r := Build("app", nil, s)
	notes := strings.Join(r.Notes, "\n")
	if !strings.Contains(notes, "does not exist") || !strings.Contains(notes, "no input topics") {
		t.Errorf("notes %q", notes)
	}
	if r.Members == nil || r.Inputs == nil || r.Transactions.Pending == nil {
		t.Errorf("lists must be [] in JSON: %+v", r)
	}
}

// A member that commits nothing on partitions with lag while another
// member commits is named in a note: stopped without leaving (its session
// lapsing) or stuck. One sample, or no member committing, says nothing.
func TestBuildNamesAnIdleMember(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	two := func(s *Sample) *Sample {
		s.Group.Members = []kafkax.GroupMember{
			{ClientID: "c1", Assigned: []kafkax.TopicPartitions{{Topic: "raw", Partitions: []int32{0}}}},
			{ClientID: "c2", Assigned: []kafkax.TopicPartitions{{Topic: "raw", Partitions: []int32{1}}}},
		}
		return s
	}
	prev := two(sample(t0, map[int32]int64{0: 100, 1: 50}, map[int32]int64{0: 120, 1: 60}))
	cur := two(sample(t0.Add(5*time.Second), map[int32]int64{0: 150, 1: 50}, map[int32]int64{0: 160, 1: 80}))
	notes := strings.Join(Build("app", prev, cur).Notes, "\n")
	if !strings.Contains(notes, "member c2 holds partitions with lag and committed nothing in 5s while the others did") || strings.Contains(notes, "member c1") {
		t.Errorf("notes %q", notes)
	}
	if notes := strings.Join(Build("app", nil, cur).Notes, "\n"); strings.Contains(notes, "committed nothing") {
		t.Errorf("one sample: %q", notes)
	}
}

// Each input shows the lineage generation its commit carries, null where
// it carries none.
func TestBuildShowsTheGeneration(t *testing.T) {
	s := sample(time.Now(), map[int32]int64{0: 10, 1: 4}, map[int32]int64{0: 10, 1: 10, 2: 10})
	s.Generations = map[TP]int64{{Topic: "raw", Partition: 0}: 3}
	r := Build("app", nil, s)
	if g := r.Inputs[0].Generation; g == nil || *g != 3 || r.Inputs[1].Generation != nil || r.Inputs[2].Generation != nil {
		t.Fatalf("inputs %+v", r.Inputs)
	}
	b, _ := json.Marshal(r.Inputs[1])
	if !strings.Contains(string(b), `"generation":null`) {
		t.Errorf("JSON of an input without a generation: %s", b)
	}
}
