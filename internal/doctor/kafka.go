package doctor

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/lint"
	"github.com/flecht-dev/flecht/internal/stagefile"
	"github.com/flecht-dev/flecht/internal/status"
	"github.com/flecht-dev/flecht/internal/textfmt"
)

// members compares the group's members with the stage's tasks (tokens for
// an extractor): someone must run it, and every task must have an owner.
func (d *diagnosis) members() {
	if d.st.Kind == stagefile.KindMQTT {
		d.skipped(CheckMembers, "an MQTT bridge has no consumer group; its instances are its client ids")
		return
	}
	before := d.found
	what := "task"
	if d.st.Kind == stagefile.KindExtractor {
		what = "token"
	}
	s := d.obs.Second
	if why := s.GroupUnauthorized; why != "" {
		// Kafka refuses the whole group: who runs the stage is unknown,
		// never "no member".
		d.finding(CheckMembers, d.st.ApplicationID, d.aclPlanHint(), "the members of group %s are %s", d.st.ApplicationID, why)
		d.done(CheckMembers, before, why)
		return
	}
	tasks := 0
	for _, ps := range s.Partitions {
		tasks = max(tasks, len(ps))
	}
	assigned := map[int32]bool{}
	for _, m := range s.Group.Members {
		for _, a := range m.Assigned {
			for _, p := range a.Partitions {
				assigned[p] = true
			}
		}
	}
	var orphans []int32
	for p := range int32(tasks) {
		if !assigned[p] {
			orphans = append(orphans, p)
		}
	}
	n := len(s.Group.Members)
	app := d.st.ApplicationID
	rebalancing := s.Group.Exists() && s.Group.State != "Stable" && s.Group.State != "Empty" &&
		d.obs.First.Group.State != "Stable" && d.obs.First.Group.State != "Empty"
	switch {
	case n == 0:
		d.finding(CheckMembers, app, "flecht run "+d.stageFlags()+" --client-id <instance> (or: kubectl get pods; kubectl logs --previous <pod>)",
			"group %s has no member: no instance runs the stage, and its %d %s(s) stand still", app, tasks, what)
	case rebalancing:
		d.finding(CheckMembers, app, "flecht status "+d.stageFlags()+" --watch",
			"group %s was rebalancing in both samples (%s, then %s): members keep joining or leaving (a crash loop, or session timeouts)", app, d.obs.First.Group.State, s.Group.State)
	case len(orphans) > 0 && rebalancingNow(s.Group.State):
		// A group that prepares or completes a rebalance has taken the
		// assignment back to hand it out again (a member left or joined):
		// the tasks are between owners, not abandoned.
		d.note("group %s is rebalancing (%s): %s(s) %v are being handed out again to its %d member(s); run the doctor again once it is Stable",
			app, s.Group.State, what, orphans, n)
	case len(orphans) > 0:
		d.finding(CheckMembers, app, "flecht status "+d.stageFlags(),
			"%s(s) %v of group %s are assigned to no member: nothing reads them", what, orphans, app)
	}
	if n > tasks && tasks > 0 {
		d.note("%d members for %d %ss: %d stand by (a member takes over when another leaves)", n, tasks, what, n-tasks)
	}
	d.done(CheckMembers, before, fmt.Sprintf("%d member(s), %d %s(s), group %s", n, tasks, what, s.Group.State))
}

// aclPlanHint is the command that lists the ACLs an operator needs to see
// all of the stage.
func (d *diagnosis) aclPlanHint() string {
	return "flecht acl plan " + d.stageFlags() + " --role operate --principal User:NAME"
}

// rebalancingNow says a group state is a rebalance in progress.
func rebalancingNow(state string) bool {
	switch state {
	case "PreparingRebalance", "CompletingRebalance", "Reconciling", "Assigning":
		return true
	}
	return false
}

// lag compares the transformer's lag in the two samples.
func (d *diagnosis) lag() {
	if d.st.Kind != stagefile.KindTransformer {
		d.skipped(CheckLag, kindName(d.st.Kind)+" has no input to lag behind")
		return
	}
	before := d.found
	if why := d.obs.Second.GroupUnauthorized; why != "" {
		// The lag is measured from the group's committed offsets.
		d.finding(CheckLag, d.st.ApplicationID, d.aclPlanHint(), "the lag of %s is %s (its committed offsets are the group's)", d.st.ApplicationID, why)
		d.done(CheckLag, before, why)
		return
	}
	first := status.Build(d.st.ApplicationID, nil, d.obs.First)
	rep := status.Build(d.st.ApplicationID, d.obs.First, d.obs.Second)
	th := rep.Throughput
	cmd := "flecht status " + d.stageFlags() + " --watch"
	detail := fmt.Sprintf("lag %d (was %d)", rep.Lag, first.Lag)
	if th != nil {
		detail += fmt.Sprintf(", consumed %s, produced %s over %s", textfmt.FormatRate(th.ConsumedPerSecond), textfmt.FormatRate(th.ProducedPerSecond),
			textfmt.FormatDuration(time.Duration(th.IntervalSeconds*float64(time.Second))))
	}
	batch := max(d.st.MaxPollRecords, 1)
	idle, busy := status.IdleMembers(d.obs.First, d.obs.Second)
	switch {
	case len(idle) > 0 && busy > 0:
		// Some members commit, these do not: a static member that stopped
		// without leaving holds its partitions idle until its session
		// times out, and looks like any other member meanwhile. Run
		// watched the group to tell the two apart.
		down := d.unreachable()
		for _, m := range idle {
			d.idleMember(m, down)
		}
	case th != nil && rep.Lag > 0 && th.ConsumedPerSecond == 0 && len(d.obs.Second.Group.Members) > 0:
		if d.obs.Unread != nil && !*d.obs.Unread {
			d.note("lag %d is transaction markers or aborted records only: a transactional producer wrote the inputs, and the stage has read every committed record", rep.Lag)
			break
		}
		if d.obs.UnreadErr != nil {
			d.note("reading what the standing lag holds: %v", d.obs.UnreadErr)
		}
		d.finding(CheckLag, d.st.ApplicationID, cmd,
			"lag %d and no offset committed in %s: the stage is stuck (a batch or a transaction that does not end), cannot keep up at all, or its members stopped without leaving the group (their sessions lapse: flecht group leave removes a static member that is gone)", rep.Lag, textfmt.FormatDuration(d.in.Interval))
	case rep.Lag > 0 && rep.Lag >= first.Lag && len(d.obs.Second.Group.Members) == 0:
		// Nothing can have consumed it: a lag that stands is no health.
		if d.obs.Unread != nil && !*d.obs.Unread {
			d.note("lag %d is transaction markers or aborted records only: the stage had read every committed record before its members left", rep.Lag)
			break
		}
		d.finding(CheckLag, d.st.ApplicationID, "flecht run "+d.stageFlags()+" --client-id <instance> (or: kubectl get pods; kubectl logs --previous <pod>)",
			"lag %d and group %s has no member: nothing consumes the input, and the lag stands until an instance runs", rep.Lag, d.st.ApplicationID)
	case rep.Lag > first.Lag && rep.Lag > int64(batch):
		d.finding(CheckLag, d.st.ApplicationID, cmd,
			"lag grew from %d to %d in %s: the stage is slower than its input (more instances, up to the %d input partitions, or a faster transform)",
			first.Lag, rep.Lag, textfmt.FormatDuration(d.in.Interval), tasksOf(d.obs.Second))
	}
	d.done(CheckLag, before, detail)
}

// idleMember finds member m idle while the others committed, and says
// what the watch after the samples showed: its session lapsed (it had
// stopped without leaving) or it stayed (it heartbeats: running but
// stuck, or a session longer than the watch).
func (d *diagnosis) idleMember(m kafkax.GroupMember, unreachable []string) {
	who := m.ClientID
	held := fmt.Sprintf("member %s (host %s) held %s with lag and committed nothing in %s while the other members did",
		who, m.Host, describeAssigned(m.Assigned), textfmt.FormatDuration(d.in.Interval))
	down := ""
	if len(unreachable) > 0 {
		down = "; no answer from " + strings.Join(unreachable, ", ")
	}
	if at, gone := d.obs.Gone[m.MemberID]; gone {
		d.finding(CheckLag, who, "find out why the instance with client id "+who+" stopped (a crash, an eviction); for a scale-down, stop it with --leave-group or run: flecht group leave "+shellQuote(d.st.ApplicationID)+" --instance <id> --execute",
			"%s, and left the group %s later when its session lapsed: it had stopped without leaving, and the others have its partitions now%s",
			held, textfmt.FormatDuration(at.Sub(d.obs.Second.At).Round(time.Second)), down)
		return
	}
	hint := "curl its /readyz and /healthz (a stalled task fails /healthz); if it is gone, flecht group leave " + shellQuote(d.st.ApplicationID) + " --instance " + shellQuote(m.InstanceID) + " --execute"
	if m.InstanceID == "" {
		hint = "curl its /readyz and /healthz (a stalled task fails /healthz); a dynamic member that is gone leaves once its session times out"
	}
	if d.obs.Watched > 0 {
		d.finding(CheckLag, who, hint,
			"%s, and was still a member %s later: it heartbeats, so its process runs and its tasks are stuck (or its session is longer than %s, past flecht's default of 10 s)%s",
			held, textfmt.FormatDuration(d.obs.Watched.Round(time.Second)), textfmt.FormatDuration(d.obs.Watched.Round(time.Second)), down)
		return
	}
	d.finding(CheckLag, who, hint,
		"%s: it has stopped without leaving the group (its session lapses: a static member stays until it times out, 10 s by default for flecht) or it is stuck%s", held, down)
}

// unreachable are the metrics endpoints that did not answer.
func (d *diagnosis) unreachable() []string {
	var out []string
	for _, s := range d.obs.Scrapes {
		if s.Err != nil {
			out = append(out, s.URL)
		}
	}
	return out
}

// standingLag are the ranges of a transformer's input partitions whose lag
// stood still between the samples: from the committed offset (the log
// start without one), unchanged, to the end of the second sample. The
// stage commits the offset after the last record it read, so a partition
// written by a transactional producer keeps such a range at rest: the
// commit or abort markers after its last record, and aborted records.
// Partitions whose lag status counted are left out: their lag is records
// only, and a range of markers alone counts 0.
func standingLag(st *stagefile.Stage, first, second *status.Sample) map[status.TP][2]int64 {
	if st.Kind != stagefile.KindTransformer || first == nil || second == nil || second.GroupUnauthorized != "" {
		return nil
	}
	from := func(s *status.Sample, tp status.TP) int64 {
		if c, ok := s.Committed[tp]; ok {
			return max(c, s.Starts[tp])
		}
		return s.Starts[tp]
	}
	out := map[status.TP][2]int64{}
	for tp, end := range second.Ends {
		if _, counted := second.Unread[tp]; counted {
			continue // status read it already: its lag holds records only
		}
		f := from(second, tp)
		if _, seen := first.Ends[tp]; seen && end > f && from(first, tp) == f {
			out[tp] = [2]int64{f, end}
		}
	}
	return out
}

// kindName names a stage kind in a sentence.
func kindName(kind string) string {
	switch kind {
	case stagefile.KindExtractor:
		return "an extractor"
	case stagefile.KindMQTT:
		return "an MQTT bridge"
	}
	return "a " + kind
}

func tasksOf(s *status.Sample) int {
	n := 0
	for _, ps := range s.Partitions {
		n = max(n, len(ps))
	}
	return n
}

// transactions finds transactions of the stage open past their timeout
// (hanging: the coordinator should have aborted them, and every
// read_committed reader of their partitions waits) or past half of it.
func (d *diagnosis) transactions() {
	tx := d.obs.Second.Transaction
	if !tx.Supported {
		d.skipped(CheckTransactions, "the broker does not list transactions: "+tx.Error)
		return
	}
	before := d.found
	var oldest time.Duration
	for _, p := range tx.Pending {
		if p.StartedAt.IsZero() {
			continue
		}
		age := d.obs.Second.At.Sub(p.StartedAt)
		oldest = max(oldest, age)
		timeout := time.Duration(p.TimeoutMillis) * time.Millisecond
		if timeout <= 0 {
			continue
		}
		parts := strings.Join(p.Partitions, ", ")
		switch {
		case age > timeout:
			d.finding(CheckTransactions, p.TransactionalID,
				"restart the instance that owns "+p.TransactionalID+" (its producer fences the ID and aborts the transaction), or: kafka-transactions.sh --bootstrap-server "+d.brokers()+" find-hanging --broker-id <id>",
				"%s has had a transaction open for %s, past its %s timeout: it hangs, and every read_committed reader of %s stops at it",
				p.TransactionalID, textfmt.FormatDuration(age), textfmt.FormatDuration(timeout), parts)
		case age > timeout/2:
			d.finding(CheckTransactions, p.TransactionalID, "flecht status "+d.stageFlags()+" --watch",
				"%s has had a transaction open for %s of its %s timeout: it is likely to be aborted (a batch or page that does not finish)",
				p.TransactionalID, textfmt.FormatDuration(age), textfmt.FormatDuration(timeout))
		}
	}
	detail := fmt.Sprintf("%d open", len(tx.Pending))
	if oldest > 0 {
		detail += ", the oldest for " + textfmt.FormatDuration(oldest)
	}
	if why := tx.NotAuthorized(); why != "" {
		detail = why // Kafka leaves out what it may not see: never "0 open"
		d.finding(CheckTransactions, "", d.aclPlanHint(), "open transactions are %s", why)
	}
	if tx.Error != "" {
		d.note("describing the open transactions: %s", tx.Error)
	}
	d.done(CheckTransactions, before, detail)
}

// topics turns lint's topic problems into findings with the command that
// fixes each.
func (d *diagnosis) topics() {
	before := d.found
	t := d.obs.Topics
	for _, p := range t.Problems {
		d.finding(CheckTopics, p.Topic, d.topicFix(p, t), "%s", p.Message)
	}
	// lint lets a missing changelog pass (the stage creates it at its
	// first start); a stage that has run without one has lost its state.
	s := d.obs.Second
	ran := len(s.Committed) > 0 || len(s.Group.Members) > 0
	keepsState := d.st.Kind == stagefile.KindExtractor || d.st.Kind == stagefile.KindTransformer && !d.in.Stateless
	for _, tp := range t.Topics {
		if slices.Contains(tp.Roles, lint.RoleChangelog) && !tp.Exists && tp.Authorized == nil && ran && keepsState {
			d.finding(CheckTopics, tp.Topic, "flecht replay "+d.stageFlags()+" --execute (stop the stage first; it rebuilds the state from the raw topics)",
				"changelog %s does not exist, but group %s has run: the stage's state is gone, and its tasks restore empty stores", tp.Topic, d.st.ApplicationID)
		}
	}
	d.rep.Notes = append(d.rep.Notes, t.Notes...)
	names := make([]string, 0, len(t.Topics))
	for _, tp := range t.Topics {
		names = append(names, tp.Topic+" ("+strings.Join(tp.Roles, ",")+")")
	}
	d.done(CheckTopics, before, fmt.Sprintf("%d topic(s): %s", len(t.Topics), strings.Join(names, "; ")))
}

func (d *diagnosis) topicFix(p lint.TopicProblem, t *lint.TopicsReport) string {
	alter := func(kv string) string {
		return "flecht topic config " + shellQuote(p.Topic) + " --set " + kv + " --execute"
	}
	switch p.Kind {
	case lint.ProblemRawRetention:
		return alter("retention.ms=-1")
	case lint.ProblemRawRetentionBytes:
		return alter("retention.bytes=-1")
	case lint.ProblemRawCompacted:
		return alter("cleanup.policy=delete")
	case lint.ProblemConfigNotCompacted, lint.ProblemChangelogNotCompacted:
		return alter("cleanup.policy=compact")
	case lint.ProblemNotAuthorized:
		return "flecht acl plan " + d.stageFlags() + " --role operate --principal User:NAME (the ACLs to grant)"
	case lint.ProblemChangelogPartitions:
		return "flecht replay " + d.stageFlags() + " --execute (stop the stage first: it rebuilds the changelog with one partition per task)"
	case lint.ProblemMissing, lint.ProblemMissingDLQ:
		n := 1
		for _, tp := range t.Topics {
			if slices.Contains(tp.Roles, lint.RoleInput) && tp.Partitions > n {
				n = tp.Partitions
			}
		}
		return "flecht topic create " + shellQuote(p.Topic) + " --partitions " + strconv.Itoa(n)
	}
	return "flecht lint topics " + d.stageFlags()
}

// shellQuote quotes s as one shell word for a suggested command; a control
// character is written escaped ($'\x1b…'), never raw.
var shellQuote = textfmt.ShellQuote

// describeAssigned names a member's partitions: "raw [0,2]".
func describeAssigned(as []kafkax.TopicPartitions) string {
	parts := make([]string, 0, len(as))
	for _, a := range as {
		nums := make([]string, len(a.Partitions))
		for i, p := range a.Partitions {
			nums[i] = strconv.Itoa(int(p))
		}
		parts = append(parts, a.Topic+" ["+strings.Join(nums, ",")+"]")
	}
	return strings.Join(parts, "; ")
}
