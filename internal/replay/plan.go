// Package replay plans and executes the reprocessing of a stage from its
// raw topics ("Why the Split Pays Off" in the best practices): stop the
// transformer, delete its state, reset its offsets, restart.
//
// The work is split the way `terraform plan/apply` splits it. Observe reads
// what the cluster and the local disk hold into an Observed value; BuildPlan
// turns that into a Plan, a pure function with no I/O that the tests drive
// without a broker; Execute carries a plan out, in an order that is safe to
// repeat after a partial failure:
//
//  1. fence: InitProducerId for every transactional ID of the stage
//     (<app>-<p>), which bumps the epoch and aborts a zombie's open
//     transaction, so nothing the old run had in flight can commit later;
//  2. delete exactly <app>-changelog (never a name pattern) and wait until
//     the broker no longer lists it, so a restart cannot find it half gone;
//  3. commit the target offsets for group <app> while the group is empty
//     (refusing if a member appeared meanwhile), intermediate topics at
//     their end, with the next lineage generation in their metadata;
//  4. delete the records of the outputs the operator chose to truncate
//     (--execute refuses while an output holds records and no choice was
//     made: a rebuild writes every record again; and refuses to truncate
//     an output the stage does not alone own, owners.go);
//  5. remove the local state stores under the state directory.
package replay

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/lineage"
	"github.com/flecht-dev/flecht/internal/stagefile"
	"github.com/flecht-dev/flecht/internal/status"
	"github.com/flecht-dev/flecht/internal/textfmt"
)

// Stage kinds a replay understands.
const (
	KindTransformer = stagefile.KindTransformer
	KindExtractor   = stagefile.KindExtractor
)

// Offset roles.
const (
	RoleInput        = "input"
	RoleIntermediate = "intermediate"
)

// Warning kinds, stable for scripts.
const (
	WarnFiniteRetention   = "finite_retention"   // retention.ms or retention.bytes is not -1
	WarnHistoryDeleted    = "history_deleted"    // the log start is past the target: part of the history is gone
	WarnCompacted         = "compacted"          // a raw topic is compacted: only the latest record per key is left
	WarnTargetBeyondEnd   = "target_beyond_end"  // the target is past the end offset: clamped to the end
	WarnUnequalPartitions = "unequal_partitions" // the input topics do not have one partition count
	WarnChangelogCount    = "changelog_partitions"
	WarnExtractor         = "extractor_repoll" // an extractor's replay asks its external source again
	WarnModule            = "module_unusable"  // flecht run would refuse the module the stage file names
	WarnNotAuthorized     = "not_authorized"   // the principal may not see a topic's configs: its retention is unknown
)

// Request is what the operator asked for.
type Request struct {
	ApplicationID string
	// Kind is transformer (the default) or extractor.
	Kind               string
	InputTopics        []string
	IntermediateTopics []string
	// ConfigTopics give an extractor's token count (its transactional
	// IDs are <app>-<token>).
	ConfigTopics []string
	Target       Target
	// StateDir holds the stage's local stores, one numbered subdirectory
	// per partition.
	StateDir string
	// Module is the WebAssembly module the stage file's transformer runs
	// (nil: a builtin, or no stage file).
	Module *stagefile.Module
	// StageFile is the transformer's stage file, when the plan comes
	// from one ("" otherwise): the plan points to flecht preview with it.
	StageFile string
	// OutputTopics are the topics the stage writes, when OutputsKnown (a
	// stage file or --output-topics says); OutputPolicy is what the
	// operator chose to do with what they hold (OutputsAsk: nothing yet).
	OutputTopics []OutputTopic
	OutputsKnown bool
	OutputPolicy string
}

// Observed is everything the plan is built from: what Observe read from the
// cluster and the disk. Tests build it by hand.
type Observed struct {
	Request

	Group kafkax.Group
	// GroupUnauthorized says the principal may not describe the group
	// (status.GroupNotAuthorized): its members and committed offsets are
	// unknown, and the plan is refused.
	GroupUnauthorized string
	// Topics holds the input, intermediate and config topics.
	Topics map[string]Topic
	// Committed holds the group's committed offsets; a partition without
	// a commit is absent.
	Committed map[kafkax.TopicPartition]int64
	// Generations holds the lineage generation each committed offset
	// carries in its metadata (lineage.GenerationOf: FirstGeneration when
	// it carries none).
	Generations map[kafkax.TopicPartition]int64
	// Requested is the target offset of every input partition as asked,
	// before it is clamped into the partition's bounds: 0 for earliest,
	// N for --to-offset, the file's offset, or the first offset at or
	// after the time (the end when there is none) for a time target.
	Requested map[kafkax.TopicPartition]int64

	ChangelogExists     bool
	ChangelogPartitions int

	// Outputs are the output topics as found (bounds summed).
	Outputs []Output
	// Owners is who else reads or writes each existing output, by topic:
	// observed only when the operator asked to truncate them.
	Owners map[string]Owners

	// StateDirExists says whether StateDir is there; StateStores lists
	// its per-partition subdirectories (full paths).
	StateDirExists bool
	StateStores    []string

	// ModuleFile is Request.Module's file as read (nil without one).
	ModuleFile *status.ModuleFile
}

// Topic is what was observed of one topic.
type Topic struct {
	Partitions []Partition
	// Configs holds the effective cleanup.policy, retention.ms and
	// retention.bytes (absent when the broker did not say).
	Configs map[string]string
	// Unauthorized is the ACL the look at Configs lacked, "" when seen.
	Unauthorized string
}

// Partition is one partition's log bounds: the log start offset and the
// end offset, the last stable offset (the high watermark unless a
// transaction is open: its records lie past the last stable offset).
type Partition struct {
	Partition int32
	Start     int64
	End       int64
}

// Plan is what a replay will do, and after Execute, what it did. Its JSON
// form is the stable output of `flecht replay -o json`.
type Plan struct {
	ApplicationID string `json:"application_id"`
	Kind          string `json:"kind"`
	// Target describes the offset target: earliest, datetime …, offset N.
	Target string `json:"target"`
	// GroupState and Members are as observed before executing.
	GroupState string               `json:"group_state"`
	Members    []kafkax.GroupMember `json:"members"`
	// GroupStateAfter is the group's state as Execute left it (empty
	// before executing, or when it could not be read).
	GroupStateAfter string `json:"group_state_after,omitempty"`
	// GroupAuthorized is false (absent when true) when the principal may
	// not describe the group (GroupUnauthorized says so): whether a
	// member is live and each offset's Current are unknown, and the plan
	// is refused.
	GroupAuthorized   *bool  `json:"group_authorized,omitempty"`
	GroupUnauthorized string `json:"group_unauthorized,omitempty"`
	// Module is the module the stage file names, as read: what the
	// restart after the replay runs (absent for a builtin).
	Module *status.ModuleFile `json:"module,omitempty"`
	// Refused says why the replay may not run (live members); empty
	// when it may.
	Refused string `json:"refused,omitempty"`
	// Fence lists the transactional IDs to initialise, in order.
	Fence []string `json:"fence"`
	// DeleteTopics lists the internal topics to delete: exactly the
	// changelog, when it exists.
	DeleteTopics []string `json:"delete_topics"`
	Offsets      []Offset `json:"offsets"`
	// Generation is the lineage generation the rebuild's outputs carry,
	// committed with the offsets: one past GenerationBefore, the highest
	// the group's committed offsets carried (docs/contract.md §12).
	// Absent for an extractor, whose records carry no lineage.
	Generation       int64 `json:"generation,omitempty"`
	GenerationBefore int64 `json:"generation_before,omitempty"`
	// Records is the sum of the input partitions' Records: how many
	// offsets the rebuild reads, so at most that many records.
	Records   int64    `json:"records"`
	StateDirs []string `json:"state_dirs"`
	// Outputs are the topics the stage writes and what the replay does
	// to what they hold; OutputsKnown is false when neither a stage file
	// nor --output-topics named them. OutputPolicy is keep, truncate or
	// empty (no choice: --execute refuses while an output holds records).
	Outputs      []Output  `json:"outputs"`
	OutputsKnown bool      `json:"outputs_known"`
	OutputPolicy string    `json:"output_policy"`
	Warnings     []Warning `json:"warnings"`
	// Notes are facts worth knowing that are not problems (no changelog,
	// no committed offsets, no local state).
	Notes    []string `json:"notes"`
	Executed bool     `json:"executed"`
	// Steps records what Execute did, in order.
	Steps []Step `json:"steps,omitempty"`
}

// Offset is one partition's reset.
type Offset struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Current is the committed offset, null when there is none.
	Current *int64 `json:"current"`
	Target  int64  `json:"target"`
	// Records is end - target: the offsets the rebuild will read, so at
	// most that many records (transaction markers and compaction gaps
	// take offsets too).
	Records int64 `json:"records"`
	// Role is input, or intermediate (moved to its end).
	Role     string `json:"role"`
	LogStart int64  `json:"log_start"`
	LogEnd   int64  `json:"log_end"`
}

// Warning is a preflight finding: the replay can run, but the operator
// should know this first.
type Warning struct {
	Kind       string  `json:"kind"`
	Topic      string  `json:"topic,omitempty"`
	Partitions []int32 `json:"partitions,omitempty"`
	// Missing counts the offsets of history the replay cannot read
	// (history_deleted). MissingUpperBound says it is at most that many:
	// for a time target, what was deleted may have lain before the time.
	Missing           int64  `json:"missing,omitempty"`
	MissingUpperBound bool   `json:"missing_upper_bound,omitempty"`
	Message           string `json:"message"`
}

// Step is one executed step.
type Step struct {
	Step   string `json:"step"` // fence, delete_topics, offsets, state_dirs
	Detail string `json:"detail"`
	Millis int64  `json:"millis"`
}

// TP is shorthand for a topic partition.
type TP = kafkax.TopicPartition

// BuildPlan turns observations into a plan. It does no I/O.
func BuildPlan(o *Observed) *Plan {
	app := o.ApplicationID
	kind := o.Kind
	if kind == "" {
		kind = KindTransformer
	}
	p := &Plan{
		ApplicationID: app,
		Kind:          kind,
		Target:        o.Target.String(),
		GroupState:    o.Group.State,
		Members:       append([]kafkax.GroupMember{}, o.Group.Members...),
		Fence:         []string{},
		DeleteTopics:  []string{},
		Offsets:       []Offset{},
		StateDirs:     append([]string{}, o.StateStores...),
		Outputs:       planOutputs(o),
		OutputsKnown:  o.OutputsKnown,
		OutputPolicy:  o.OutputPolicy,
		Warnings:      []Warning{},
		Notes:         []string{},
	}
	if p.GroupState == "" {
		p.GroupState = kafkax.GroupStateDead
	}
	warn := func(w Warning) { p.Warnings = append(p.Warnings, w) }
	note := func(format string, args ...any) { p.Notes = append(p.Notes, fmt.Sprintf(format, args...)) }

	// 0. The module the restart runs: one flecht run refuses leaves the
	// stage down after its state is gone.
	if p.Module = o.ModuleFile; p.Module != nil && p.Module.Problem() != "" {
		warn(Warning{Kind: WarnModule, Message: p.ModuleRefusal()})
	}

	// A changed logic rewrites every output: preview shows how first.
	if o.StageFile != "" && kind == KindTransformer {
		candidate := "--stage NEW.yaml"
		if o.Module != nil {
			candidate = "--module NEW.wasm"
		}
		note("before --execute with a changed logic, see what it would write: flecht preview -f %s %s", textfmt.ShellQuote(o.StageFile), candidate)
	}

	// 1. Live members: refuse, naming them.
	if len(p.Members) > 0 {
		p.Refused = fmt.Sprintf("group %q has %d live %s (%s): %s",
			app, len(p.Members), textfmt.PluralForm(len(p.Members), "member", "members"), kafkax.DescribeMembers(p.Members), stopHint(p.Members))
	}
	if o.GroupUnauthorized != "" {
		// A replay of a running stage corrupts its state: members that
		// cannot be seen are no "none".
		p.GroupAuthorized, p.GroupUnauthorized = new(bool), o.GroupUnauthorized
		// The grant to name is the replay plan's: Read where it commits
		// offsets (a transformer), Describe where it only looks (an
		// extractor); either lets it see the group.
		grant := "Describe"
		if len(o.InputTopics) > 0 {
			grant = "Read"
		}
		p.Refused = fmt.Sprintf("whether group %q has live members, and its committed offsets, are %s: a replay runs only on a stopped stage; grant %s on group %s (flecht acl plan --role replay lists every ACL a replay needs)", app, o.GroupUnauthorized, grant, app)
	} else if !o.Group.Exists() {
		note("group %q does not exist: no member, no committed offset", app)
	}

	// 2. Transactional IDs: one per input partition number (transformer)
	// or per token (extractor: the config topics' partition count).
	tasks, counts, countTopics := o.tasks()
	if !kafkax.EqualCounts(counts) {
		warn(Warning{Kind: WarnUnequalPartitions, Message: fmt.Sprintf("%s have unequal partition counts (%s): the stage refuses to start until they match; fencing the %d IDs of the largest",
			strings.Join(countTopics, ", "), kafkax.DescribeCounts(counts), tasks)})
	}
	p.Fence = o.transactionalIDs()
	fence := len(p.Fence)

	// 3. The changelog, and nothing that merely looks like one.
	changelog := stagefile.ChangelogTopic(app)
	if o.ChangelogExists {
		p.DeleteTopics = append(p.DeleteTopics, changelog)
		if tasks > 0 && o.ChangelogPartitions != tasks {
			msg := fmt.Sprintf("%s has %d partitions but the stage has %d tasks: the restart recreates it with %d", changelog, o.ChangelogPartitions, tasks, tasks)
			if fence > tasks {
				msg += fmt.Sprintf("; the IDs of the old tasks are fenced too (%d in all)", fence)
			}
			warn(Warning{Kind: WarnChangelogCount, Topic: changelog, Message: msg})
		}
	} else {
		note("changelog %s does not exist: no state to delete (a stateless stage, one that never ran, or a replay already done)", changelog)
	}

	// 4. Offsets.
	if kind == KindExtractor {
		warn(Warning{Kind: WarnExtractor, Message: fmt.Sprintf("%s is an extractor: its cursors live in %s, so the replay makes it poll its external sources again from the start, the one input that may not give the past back", app, changelog)})
	}
	if o.Target.BeforeEpoch() {
		note("the target time %s is before 1970, which no record timestamp precedes: every input partition starts at its log start, as with --to-earliest", o.Target.Time.UTC().Format(time.RFC3339Nano))
	}
	committedAny := false
	for _, t := range o.InputTopics {
		top := o.Topics[t]
		h := history{}
		var beyond []int32
		for _, part := range top.Partitions {
			tp := TP{Topic: t, Partition: part.Partition}
			off := Offset{Topic: t, Partition: part.Partition, Role: RoleInput, LogStart: part.Start, LogEnd: part.End}
			if c, ok := o.Committed[tp]; ok {
				c := c
				off.Current = &c
				committedAny = true
			}
			want, ok := o.Requested[tp]
			if !ok {
				want = part.Start
			}
			target := min(max(want, part.Start), part.End)
			switch {
			case want < part.Start:
				h.add(part.Partition, part.Start-want, false)
			case o.Target.TimeBased() && want == part.Start && part.Start > 0:
				// The broker answers a time before the oldest record
				// still held with the log start: what came before it
				// is gone and may have been in range.
				h.add(part.Partition, part.Start, true)
			case want > part.End, o.Target.TimeBased() && want == part.End && part.End > part.Start:
				// A time target at the end: no record at or after the
				// time (below the end offset).
				beyond = append(beyond, part.Partition)
			}
			off.Target = target
			off.Records = part.End - target
			p.Records += off.Records
			p.Offsets = append(p.Offsets, off)
		}
		topicWarnings(t, top, h, beyond, o.Target, warn)
	}
	if kind == KindTransformer && len(p.Offsets) > 0 {
		p.GenerationBefore = o.highestGeneration()
		p.Generation = p.GenerationBefore + 1
	}
	if len(o.InputTopics) > 0 && !committedAny && o.GroupUnauthorized == "" {
		note("group %q has no committed offsets on the input topics: the stage would start from the earliest offsets anyway; the plan commits the targets explicitly", app)
	}
	for _, t := range o.IntermediateTopics {
		for _, part := range o.Topics[t].Partitions {
			off := Offset{Topic: t, Partition: part.Partition, Role: RoleIntermediate, Target: part.End, LogStart: part.Start, LogEnd: part.End}
			if c, ok := o.Committed[TP{Topic: t, Partition: part.Partition}]; ok {
				c := c
				off.Current = &c
			}
			p.Offsets = append(p.Offsets, off)
		}
	}

	// 5. Local state.
	switch {
	case o.StateDir == "":
	case !o.StateDirExists:
		note("no local state in %s", o.StateDir)
	case len(o.StateStores) == 0:
		note("no partition stores in %s", o.StateDir)
	}
	return p
}

// highestGeneration is the highest lineage generation among the group's
// committed offsets: FirstGeneration when none carries one (or nothing is
// committed), since that is what the stage writes then.
func (o *Observed) highestGeneration() int64 {
	g := int64(lineage.FirstGeneration)
	for _, n := range o.Generations {
		g = max(g, n)
	}
	return g
}

// tasks is the stage's task count (transformer: the largest input
// partition count; extractor: its tokens, the config topics' partition
// count), with the count of each topic it was read from.
func (o *Observed) tasks() (tasks int, counts map[string]int, from []string) {
	from = append(append([]string{}, o.InputTopics...), o.IntermediateTopics...)
	if o.Kind == KindExtractor {
		from = o.ConfigTopics
	}
	counts = map[string]int{}
	for _, t := range from {
		n := len(o.Topics[t].Partitions)
		counts[t] = n
		tasks = max(tasks, n)
	}
	return tasks, counts, from
}

// transactionalIDs are the stage's transactional IDs, <app>-<n> for every
// task and, when the changelog has more partitions than the stage has
// tasks, for the tasks of that older layout too: their IDs may still hold
// a transaction open.
func (o *Observed) transactionalIDs() []string {
	n, _, _ := o.tasks()
	if o.ChangelogExists {
		n = max(n, o.ChangelogPartitions)
	}
	ids := []string{}
	for i := range n {
		ids = append(ids, stagefile.TransactionalID(o.ApplicationID, int32(i)))
	}
	return ids
}

// ModuleRefusal says why the stage could not restart after the replay:
// flecht run refuses the module the stage file names (it cannot be read,
// is not WebAssembly, or is not the pinned one). Empty when it would
// start, as far as reading the file tells.
func (p *Plan) ModuleRefusal() string {
	if p.Module == nil || p.Module.Problem() == "" {
		return ""
	}
	return fmt.Sprintf("the module %s (%s) that the stage file names cannot run: %s; flecht run refuses it, so the stage could not restart after the replay: deploy the module (flecht transform inspect %s checks it) or fix transform.module, then replay",
		p.Module.File, p.Module.Path, p.Module.Problem(), p.Module.Path)
}

// history is the part of one topic's history a replay cannot read.
type history struct {
	partitions []int32
	missing    int64
	// upperBound: some partition's count is only an upper bound.
	upperBound bool
}

func (h *history) add(partition int32, missing int64, upperBound bool) {
	h.partitions = append(h.partitions, partition)
	h.missing += missing
	h.upperBound = h.upperBound || upperBound
}

// topicWarnings adds the preflight warnings of one input (raw) topic.
func topicWarnings(topic string, t Topic, h history, beyond []int32, target Target, warn func(Warning)) {
	if t.Unauthorized != "" {
		warn(Warning{Kind: WarnNotAuthorized, Topic: topic, Message: fmt.Sprintf(
			"%s: retention and cleanup.policy unknown: not authorized (needs %s)", topic, t.Unauthorized)})
	}
	policy := t.Configs["cleanup.policy"]
	if hasPolicy(policy, "compact") {
		warn(Warning{Kind: WarnCompacted, Topic: topic, Message: fmt.Sprintf(
			"%s is compacted (cleanup.policy=%s): it keeps only the latest record per key, so a replay sees a summary, not the history; keep raw topics retained, not compacted", topic, policy)})
	}
	var limits []string
	fix := "flecht topic config " + textfmt.ShellQuote(topic)
	if ms, ok := t.Configs["retention.ms"]; ok && ms != "-1" && (policy == "" || hasPolicy(policy, "delete")) {
		limits = append(limits, "retention.ms="+ms+describeMillis(ms))
		fix += " --set retention.ms=-1"
	}
	if b, ok := t.Configs["retention.bytes"]; ok && b != "-1" && (policy == "" || hasPolicy(policy, "delete")) {
		limits = append(limits, "retention.bytes="+b)
		fix += " --set retention.bytes=-1"
	}
	if len(limits) > 0 {
		warn(Warning{Kind: WarnFiniteRetention, Topic: topic, Message: fmt.Sprintf(
			"%s has finite retention (%s): the replay reaches back only as far as the topic still holds; give raw topics retention.ms=-1 or as long as you may need to reprocess (%s --execute)", topic, strings.Join(limits, ", "), fix)})
	}
	if len(h.partitions) > 0 {
		warn(historyWarning(topic, h, target))
	}
	if len(beyond) > 0 {
		what := "the target is beyond the end offset"
		if target.TimeBased() {
			what = "no record at or after the target time is below the end offset"
		}
		warn(Warning{Kind: WarnTargetBeyondEnd, Topic: topic, Partitions: beyond, Message: fmt.Sprintf(
			"%s: %s on %s %s: set to the end instead (nothing to read there)",
			topic, what, textfmt.PluralForm(len(beyond), "partition", "partitions"), joinInts(beyond))})
	}
}

// historyWarning says how much history is gone: exactly, when the log
// start is past an offset target, or as an upper bound for a time target,
// whose deleted records may all have been older than the time.
func historyWarning(topic string, h history, target Target) Warning {
	where := fmt.Sprintf("%s %s", textfmt.PluralForm(len(h.partitions), "partition", "partitions"), joinInts(h.partitions))
	w := Warning{Kind: WarnHistoryDeleted, Topic: topic, Partitions: h.partitions, Missing: h.missing, MissingUpperBound: h.upperBound}
	if h.upperBound {
		w.Message = fmt.Sprintf("%s: up to %s offsets of history may be gone (the oldest record still held on %s is newer than the target time, and the deleted records before it may have been in range): the replay may be partial",
			topic, textfmt.GroupDigits(h.missing), where)
		return w
	}
	what := "the target"
	if target.Kind == TargetEarliest || target.Kind == "" {
		what = "offset 0"
	}
	w.Message = fmt.Sprintf("%s: %s offsets of history are gone (the log start is past %s on %s): the replay will be partial",
		topic, textfmt.GroupDigits(h.missing), what, where)
	return w
}

// stopHint says what to do about live members. flecht's transformers and
// extractors are static members and do not leave on SIGTERM, so a stage
// stopped a moment ago still has its members until their session times
// out: that case gets its own advice.
func stopHint(ms []kafkax.GroupMember) string {
	for _, m := range ms {
		if m.InstanceID == "" {
			return "stop the stage first, or give --wait DURATION to wait until it has stopped"
		}
	}
	return "stop the stage first; a stopped stage's static members stay in the group until their session times out (10 s by default), so after a stop give --wait 30s (a transformer stopped with --leave-group leaves at once)"
}

func hasPolicy(policy, want string) bool {
	for _, p := range strings.Split(policy, ",") {
		if strings.TrimSpace(p) == want {
			return true
		}
	}
	return false
}

func describeMillis(ms string) string {
	v, err := strconv.ParseInt(ms, 10, 64)
	if err != nil || v < 0 {
		return ""
	}
	d := time.Duration(v) * time.Millisecond
	if d >= 24*time.Hour && d%(24*time.Hour) == 0 {
		return fmt.Sprintf(" (%dd)", d/(24*time.Hour))
	}
	return " (" + d.String() + ")"
}

func joinInts(ps []int32) string {
	parts := make([]string, len(ps))
	for i, p := range ps {
		parts[i] = strconv.Itoa(int(p))
	}
	return strings.Join(parts, ", ")
}

// HasCommits reports whether the group holds a committed offset on any
// input partition.
func (p *Plan) HasCommits() bool {
	for _, o := range p.Offsets {
		if o.Current != nil {
			return true
		}
	}
	return false
}
