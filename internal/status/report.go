package status

import (
	"fmt"
	"sort"
	"time"

	"github.com/flecht-dev/flecht/internal/kafkax"
)

// Report is what `flecht status -o json` prints.
type Report struct {
	ApplicationID string               `json:"application_id"`
	SampledAt     time.Time            `json:"sampled_at"`
	GroupState    string               `json:"group_state"`
	Protocol      string               `json:"protocol,omitempty"`
	Members       []kafkax.GroupMember `json:"members"`
	// GroupAuthorized is false (absent when true) when the principal may
	// not describe the group (GroupUnauthorized says so): its state is
	// Unknown, and its members, every input's committed offset and lag
	// (each input then says authorized: false), the total lag and the
	// throughput are unknown, not none.
	GroupAuthorized   *bool   `json:"group_authorized,omitempty"`
	GroupUnauthorized string  `json:"group_unauthorized,omitempty"`
	Inputs            []Input `json:"inputs"`
	// Lag is the sum of the inputs' lag; LagCounted says every input's
	// was counted.
	Lag          int64        `json:"lag"`
	LagCounted   bool         `json:"lag_counted"`
	Changelog    Changelog    `json:"changelog"`
	Throughput   *Throughput  `json:"throughput"`
	Transactions Transactions `json:"transactions"`
	// Modules says which module each instance runs: only with
	// --metrics-url.
	Modules *Modules `json:"modules,omitempty"`
	Notes   []string `json:"notes"`
}

// Input is one input partition.
type Input struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Committed is the group's committed offset, null when there is none
	// (the stage then starts at the log start).
	Committed *int64 `json:"committed"`
	// Generation is the lineage generation the commit carries: the one
	// the stage's records from this partition carry (docs/contract.md
	// §12); null when it carries none.
	Generation *int64 `json:"generation"`
	LogStart   int64  `json:"log_start"`
	End        int64  `json:"end"`
	// Lag is what the stage has left to read: with LagCounted, the
	// records a read_committed reader would read past the committed
	// offset (the log start without one), transaction markers and
	// aborted records not counted, plus those of transactions still
	// open; without (a distance too large to count), end - committed.
	Lag        int64 `json:"lag"`
	LagCounted bool  `json:"lag_counted"`
	// Member is the client id of the member the partition is assigned to.
	Member string `json:"member,omitempty"`
	// Authorized is false (absent when true) when the principal may not
	// describe the group: Committed and Lag are then unknown (null and
	// 0), and LagCounted false.
	Authorized *bool `json:"authorized,omitempty"`
}

// Throughput compares two samples.
type Throughput struct {
	IntervalSeconds float64 `json:"interval_seconds"`
	// ConsumedPerSecond is how fast the committed offsets advanced;
	// ProducedPerSecond how fast the inputs' end offsets did.
	ConsumedPerSecond float64 `json:"consumed_per_second"`
	ProducedPerSecond float64 `json:"produced_per_second"`
	// LagChange is the change in total lag between the samples.
	LagChange int64 `json:"lag_change"`
	// ETASeconds estimates when the lag reaches 0 at the current pace;
	// null when it is not falling.
	ETASeconds *float64 `json:"eta_seconds"`
}

// Build makes the report of cur, with throughput against prev (nil: none).
func Build(app string, prev, cur *Sample) *Report {
	r := &Report{
		ApplicationID: app,
		SampledAt:     cur.At.UTC(),
		GroupState:    cur.Group.State,
		Protocol:      cur.Group.Protocol,
		Members:       append([]kafkax.GroupMember{}, cur.Group.Members...),
		Inputs:        []Input{},
		Changelog:     cur.Changelog,
		Transactions:  cur.Transaction,
		Notes:         []string{},
	}
	if r.Transactions.Pending == nil {
		r.Transactions.Pending = []PendingTransaction{}
	}
	owner := map[TP]string{}
	for _, m := range cur.Group.Members {
		for _, a := range m.Assigned {
			for _, p := range a.Partitions {
				owner[TP{Topic: a.Topic, Partition: p}] = m.ClientID
			}
		}
	}
	for _, t := range cur.Inputs {
		for _, p := range cur.Partitions[t] {
			tp := TP{Topic: t, Partition: p}
			in := Input{Topic: t, Partition: p, LogStart: cur.Starts[tp], End: cur.Ends[tp], Member: owner[tp]}
			if cur.GroupUnauthorized != "" {
				in.Authorized = new(bool)
				r.Inputs = append(r.Inputs, in)
				continue
			}
			if c, ok := cur.Committed[tp]; ok {
				in.Committed = &c
			}
			if g, ok := cur.Generations[tp]; ok {
				in.Generation = &g
			}
			in.Lag, in.LagCounted = cur.Lag(tp)
			r.Lag += in.Lag
			r.Inputs = append(r.Inputs, in)
		}
	}
	sort.SliceStable(r.Inputs, func(i, j int) bool {
		a, b := r.Inputs[i], r.Inputs[j]
		if a.Topic != b.Topic {
			return a.Topic < b.Topic
		}
		return a.Partition < b.Partition
	})
	r.LagCounted = cur.GroupUnauthorized == ""
	for _, in := range r.Inputs {
		r.LagCounted = r.LagCounted && in.LagCounted
	}
	if cur.UnreadUnauthorized != "" {
		r.Notes = append(r.Notes, "the records past the committed offsets are not counted (lag by offsets): "+cur.UnreadUnauthorized)
	}
	if !cur.Group.Exists() {
		r.Notes = append(r.Notes, "group "+app+" does not exist: the stage has never committed, or its offsets expired")
	}
	if cur.Request.AnyClientID() {
		r.Notes = append(r.Notes, "an MQTT bridge's transactional ID is "+app+"-<client_id>: every "+app+"-* ID is listed, another application's whose id begins with "+app+"- too; give --client-id to list only the bridge's")
	}
	if len(cur.Inputs) == 0 {
		r.Notes = append(r.Notes, "no input topics: give --input-topics or -f stage.yaml (the group has no commits or assignments to learn them from)")
	}
	if cur.Instances != nil {
		r.Modules = buildModules(cur.Request, cur.Instances)
		if n := cur.Request.Expect.Module.Unread(); n != "" {
			r.Notes = append(r.Notes, n)
		}
	}
	if cur.GroupUnauthorized != "" {
		r.GroupAuthorized, r.GroupUnauthorized = new(bool), cur.GroupUnauthorized
		r.Notes = append(r.Notes, "the members, committed offsets, lag and throughput of group "+app+" are "+cur.GroupUnauthorized+"; the rest is what the principal can see")
	}
	if prev != nil && cur.GroupUnauthorized == "" {
		r.Throughput = throughput(prev, cur, r.Lag)
		// A member that stopped without leaving stays listed until its
		// session times out: say which ones commit nothing while the
		// others do.
		if idle, busy := IdleMembers(prev, cur); busy > 0 {
			for _, m := range idle {
				r.Notes = append(r.Notes, fmt.Sprintf("member %s holds partitions with lag and committed nothing in %s while the others did: stopped without leaving the group (its session lapses) or stuck; 'flecht doctor' diagnoses it",
					m.ClientID, cur.At.Sub(prev.At).Round(time.Second)))
			}
		}
	}
	return r
}

// Unseen are the parts of the report the principal may not see, each as
// "unknown: not authorized (needs OPERATION on RESOURCE)": what makes
// `flecht status` exit 4 (docs/security.md).
func (r *Report) Unseen() []string {
	var out []string
	if r.GroupUnauthorized != "" {
		out = append(out, "group: "+r.GroupUnauthorized)
	}
	if r.Changelog.Unauthorized != "" {
		out = append(out, "changelog: "+r.Changelog.Unauthorized)
	}
	if why := r.Transactions.NotAuthorized(); why != "" {
		out = append(out, "transactions: "+why)
	}
	return out
}

func throughput(prev, cur *Sample, lag int64) *Throughput {
	dt := cur.At.Sub(prev.At).Seconds()
	if dt <= 0 {
		return nil
	}
	var consumed, produced, prevLag int64
	for tp, e := range cur.Ends {
		if pe, ok := prev.Ends[tp]; ok {
			produced += max(e-pe, 0)
		}
	}
	for tp, c := range cur.Committed {
		pc, ok := prev.Committed[tp]
		if !ok {
			pc = prev.Starts[tp]
		}
		consumed += max(c-pc, 0)
	}
	for t, ps := range prev.Partitions {
		for _, p := range ps {
			l, _ := prev.Lag(TP{Topic: t, Partition: p})
			prevLag += l
		}
	}
	th := &Throughput{
		IntervalSeconds:   dt,
		ConsumedPerSecond: float64(consumed) / dt,
		ProducedPerSecond: float64(produced) / dt,
		LagChange:         lag - prevLag,
	}
	if net := th.ConsumedPerSecond - th.ProducedPerSecond; lag > 0 && net > 0 {
		eta := float64(lag) / net
		th.ETASeconds = &eta
	}
	return th
}

// IdleMembers are the members of the second sample that hold input
// partitions with lag yet committed on none of them since the first
// sample; busy counts those that committed.
func IdleMembers(first, second *Sample) (idle []kafkax.GroupMember, busy int) {
	if first == nil || second == nil {
		return nil, 0
	}
	inputs := map[string]bool{}
	for _, t := range second.Inputs {
		inputs[t] = true
	}
	for _, m := range second.Group.Members {
		moved, lagging := false, false
		for _, a := range m.Assigned {
			if !inputs[a.Topic] {
				continue
			}
			for _, p := range a.Partitions {
				tp := TP{Topic: a.Topic, Partition: p}
				c1, ok1 := first.Committed[tp]
				c2, ok2 := second.Committed[tp]
				if ok2 && (!ok1 || c2 != c1) {
					moved = true
				}
				if l, _ := second.Lag(tp); l > 0 {
					lagging = true
				}
			}
		}
		switch {
		case moved:
			busy++
		case lagging:
			idle = append(idle, m)
		}
	}
	return idle, busy
}
