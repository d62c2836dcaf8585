package replay

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/stagefile"
	"github.com/flecht-dev/flecht/internal/status"
	"github.com/flecht-dev/flecht/internal/textfmt"
)

// observed builds a stage with one input topic "raw" of the given
// partitions (start, end) and a retained (delete, -1) config.
func observed(parts ...[2]int64) *Observed {
	o := &Observed{
		Request: Request{ApplicationID: "app", InputTopics: []string{"raw"}, Target: Target{Kind: TargetEarliest}, StateDir: "/state/app"},
		Group:   kafkax.Group{Group: "app", State: "Empty", Members: []kafkax.GroupMember{}},
		Topics: map[string]Topic{"raw": {
			Configs: map[string]string{"cleanup.policy": "delete", "retention.ms": "-1", "retention.bytes": "-1"},
		}},
		Committed:       map[TP]int64{},
		Generations:     map[TP]int64{},
		Requested:       map[TP]int64{},
		ChangelogExists: true, ChangelogPartitions: len(parts),
		StateDirExists: true,
	}
	top := o.Topics["raw"]
	for i, b := range parts {
		top.Partitions = append(top.Partitions, Partition{Partition: int32(i), Start: b[0], End: b[1]})
		o.Requested[TP{Topic: "raw", Partition: int32(i)}] = 0
	}
	o.Topics["raw"] = top
	return o
}

func tp(topic string, p int32) TP { return TP{Topic: topic, Partition: p} }

func kinds(ws []Warning) []string {
	var out []string
	for _, w := range ws {
		out = append(out, w.Kind)
	}
	return out
}

func TestPlanHappyPath(t *testing.T) {
	o := observed([2]int64{0, 100}, [2]int64{0, 50}, [2]int64{0, 0})
	o.Committed[tp("raw", 0)] = 100
	o.Committed[tp("raw", 1)] = 40 // partition 2 never committed
	o.StateStores = []string{"/state/app/0", "/state/app/1"}
	p := BuildPlan(o)

	if p.Refused != "" || p.Executed {
		t.Fatalf("refused %q executed %v", p.Refused, p.Executed)
	}
	if want := []string{"app-0", "app-1", "app-2"}; !reflect.DeepEqual(p.Fence, want) {
		t.Errorf("fence %v, want %v", p.Fence, want)
	}
	if want := []string{"app-changelog"}; !reflect.DeepEqual(p.DeleteTopics, want) {
		t.Errorf("delete %v, want %v", p.DeleteTopics, want)
	}
	if len(p.Offsets) != 3 {
		t.Fatalf("offsets %+v", p.Offsets)
	}
	if c := p.Offsets[0].Current; c == nil || *c != 100 || p.Offsets[0].Target != 0 || p.Offsets[0].Records != 100 {
		t.Errorf("partition 0: %+v", p.Offsets[0])
	}
	if c := p.Offsets[1].Current; c == nil || *c != 40 || p.Offsets[1].Records != 50 {
		t.Errorf("partition 1: %+v", p.Offsets[1])
	}
	if p.Offsets[2].Current != nil || p.Offsets[2].Target != 0 || p.Offsets[2].Records != 0 {
		t.Errorf("partition 2 (no commit) must be listed with current null: %+v", p.Offsets[2])
	}
	if p.Records != 150 {
		t.Errorf("records %d, want 150", p.Records)
	}
	if len(p.Warnings) != 0 {
		t.Errorf("a retained raw topic read from 0 warns nothing: %+v", p.Warnings)
	}
	if !reflect.DeepEqual(p.StateDirs, o.StateStores) {
		t.Errorf("state dirs %v", p.StateDirs)
	}

	// The JSON field names are the stable schema.
	b, _ := json.Marshal(p)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	for _, k := range []string{"application_id", "group_state", "members", "fence", "delete_topics", "offsets", "warnings", "executed"} {
		if _, ok := m[k]; !ok {
			t.Errorf("JSON lacks %q: %s", k, b)
		}
	}
	off := m["offsets"].([]any)[2].(map[string]any)
	for _, k := range []string{"topic", "partition", "current", "target", "records"} {
		if _, ok := off[k]; !ok {
			t.Errorf("offset JSON lacks %q: %v", k, off)
		}
	}
	if off["current"] != nil {
		t.Errorf("current of an uncommitted partition must be null: %v", off["current"])
	}
	if m["members"] == nil || m["warnings"] == nil || m["delete_topics"] == nil {
		t.Errorf("empty lists must be [] not null: %s", b)
	}
}

func TestPlanRefusesLiveMembers(t *testing.T) {
	o := observed([2]int64{0, 10})
	o.Group.State = "Stable"
	o.Group.Members = []kafkax.GroupMember{{MemberID: "m1", ClientID: "count-0", Host: "10.0.0.7"}, {MemberID: "m2", ClientID: "count-1", Host: "10.0.0.8"}}
	p := BuildPlan(o)
	if p.Refused == "" {
		t.Fatal("live members must refuse")
	}
	for _, want := range []string{"count-0 on 10.0.0.7", "count-1 on 10.0.0.8", "2 live members", "--wait"} {
		if !strings.Contains(p.Refused, want) {
			t.Errorf("refusal %q lacks %q", p.Refused, want)
		}
	}
	// The rest of the plan is still there to read.
	if len(p.Offsets) != 1 || len(p.Fence) != 1 {
		t.Errorf("plan %+v", p)
	}
}

// A stopped transformer's static members linger for their session
// timeout: the refusal says so and what to give instead.
func TestPlanRefusalExplainsStaticMembers(t *testing.T) {
	o := observed([2]int64{0, 10})
	o.Group.State = "Stable"
	o.Group.Members = []kafkax.GroupMember{{MemberID: "m1", InstanceID: "count-0", ClientID: "count-0", Host: "10.0.0.7"}}
	p := BuildPlan(o)
	for _, want := range []string{"count-0 on 10.0.0.7 (static)", "session times out", "--wait 30s", "--leave-group"} {
		if !strings.Contains(p.Refused, want) {
			t.Errorf("refusal %q lacks %q", p.Refused, want)
		}
	}
	// One dynamic member (the Python library's) among them: the plain advice.
	o.Group.Members = append(o.Group.Members, kafkax.GroupMember{MemberID: "m2", ClientID: "py", Host: "10.0.0.8"})
	if p := BuildPlan(o); strings.Contains(p.Refused, "session times out") || !strings.Contains(p.Refused, "--wait DURATION") {
		t.Errorf("refusal with a dynamic member: %q", p.Refused)
	}
}

func TestPlanPartialHistory(t *testing.T) {
	o := observed([2]int64{30, 100}, [2]int64{0, 100}, [2]int64{5, 5})
	top := o.Topics["raw"]
	top.Configs["retention.ms"] = "604800000"
	o.Topics["raw"] = top
	p := BuildPlan(o)
	if got := kinds(p.Warnings); !reflect.DeepEqual(got, []string{WarnFiniteRetention, WarnHistoryDeleted}) {
		t.Fatalf("warnings %v: %+v", got, p.Warnings)
	}
	if !strings.Contains(p.Warnings[0].Message, "retention.ms=604800000 (7d)") || !strings.Contains(p.Warnings[0].Message, "(flecht topic config raw --set retention.ms=-1 --execute)") {
		t.Errorf("retention message: %s", p.Warnings[0].Message)
	}
	h := p.Warnings[1]
	if h.Missing != 35 || !reflect.DeepEqual(h.Partitions, []int32{0, 2}) || h.Topic != "raw" {
		t.Errorf("history warning %+v, want 35 missing on partitions 0 and 2", h)
	}
	if !strings.Contains(h.Message, "35 offsets of history are gone") || !strings.Contains(h.Message, "partial") {
		t.Errorf("message: %s", h.Message)
	}
	// The targets are the log starts: nothing before them can be read.
	if p.Offsets[0].Target != 30 || p.Offsets[0].Records != 70 || p.Offsets[2].Target != 5 || p.Offsets[2].Records != 0 {
		t.Errorf("offsets %+v", p.Offsets)
	}
	if p.Records != 170 {
		t.Errorf("records %d", p.Records)
	}
}

func TestPlanOffsetTargets(t *testing.T) {
	o := observed([2]int64{10, 100}, [2]int64{0, 20})
	o.Target = Target{Kind: TargetOffset, Offset: 50}
	o.Requested[tp("raw", 0)] = 50
	o.Requested[tp("raw", 1)] = 50
	p := BuildPlan(o)
	if p.Target != "offset 50" {
		t.Errorf("target %q", p.Target)
	}
	if p.Offsets[0].Target != 50 || p.Offsets[0].Records != 50 {
		t.Errorf("partition 0 %+v", p.Offsets[0])
	}
	if p.Offsets[1].Target != 20 || p.Offsets[1].Records != 0 {
		t.Errorf("partition 1 must be clamped to its end: %+v", p.Offsets[1])
	}
	if got := kinds(p.Warnings); !reflect.DeepEqual(got, []string{WarnTargetBeyondEnd}) {
		t.Fatalf("warnings %v", got)
	}
	if w := p.Warnings[0]; !reflect.DeepEqual(w.Partitions, []int32{1}) {
		t.Errorf("%+v", w)
	}

	// Below the log start: the missing part is what lies between.
	o.Requested[tp("raw", 0)] = 4
	o.Requested[tp("raw", 1)] = 4
	p = BuildPlan(o)
	if got := kinds(p.Warnings); !reflect.DeepEqual(got, []string{WarnHistoryDeleted}) || p.Warnings[0].Missing != 6 {
		t.Fatalf("warnings %+v", p.Warnings)
	}
	if !strings.Contains(p.Warnings[0].Message, "past the target") {
		t.Errorf("message: %s", p.Warnings[0].Message)
	}
}

func TestPlanTimeTargetAtLogStart(t *testing.T) {
	o := observed([2]int64{40, 100}, [2]int64{0, 100})
	o.Target = Target{Kind: TargetDatetime, Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	// The broker answered the log start for partition 0 (its oldest
	// record is newer than the time) and offset 60 for partition 1.
	o.Requested[tp("raw", 0)] = 40
	o.Requested[tp("raw", 1)] = 60
	p := BuildPlan(o)
	if p.Target != "datetime 2026-01-02T03:04:05Z" {
		t.Errorf("target %q", p.Target)
	}
	if got := kinds(p.Warnings); !reflect.DeepEqual(got, []string{WarnHistoryDeleted}) || p.Warnings[0].Missing != 40 || !reflect.DeepEqual(p.Warnings[0].Partitions, []int32{0}) {
		t.Fatalf("warnings %+v", p.Warnings)
	}
	// Only an upper bound: the 40 deleted records may all have been
	// older than the time.
	if w := p.Warnings[0]; !w.MissingUpperBound || !strings.Contains(w.Message, "up to 40 offsets of history may be gone") || strings.Contains(w.Message, "are gone") {
		t.Errorf("history warning %+v", w)
	}
	if p.Offsets[1].Target != 60 || p.Offsets[1].Records != 40 {
		t.Errorf("%+v", p.Offsets[1])
	}
}

// A time after the newest record resolves to the end: say so, and on
// which partitions; an empty partition has nothing to say.
func TestPlanTimeTargetBeyondEnd(t *testing.T) {
	o := observed([2]int64{0, 100}, [2]int64{0, 50}, [2]int64{0, 0}, [2]int64{0, 80})
	o.Target = Target{Kind: TargetDuration, Duration: time.Hour, Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	o.Requested[tp("raw", 0)] = 100 // no record at or after the time
	o.Requested[tp("raw", 1)] = 30
	o.Requested[tp("raw", 2)] = 0
	o.Requested[tp("raw", 3)] = 80
	p := BuildPlan(o)
	if got := kinds(p.Warnings); !reflect.DeepEqual(got, []string{WarnTargetBeyondEnd}) {
		t.Fatalf("warnings %+v", p.Warnings)
	}
	w := p.Warnings[0]
	if !reflect.DeepEqual(w.Partitions, []int32{0, 3}) || !strings.Contains(w.Message, "no record at or after the target time") || !strings.Contains(w.Message, "partitions 0, 3") {
		t.Errorf("beyond warning %+v", w)
	}
	if p.Offsets[0].Target != 100 || p.Offsets[0].Records != 0 || p.Offsets[1].Records != 20 {
		t.Errorf("offsets %+v", p.Offsets)
	}
}

// A time before 1970 starts at the log start, as --to-earliest does (the
// observation asked for offset 0): the history before it is gone for
// certain, and a note says why.
func TestPlanTimeTargetBeforeEpoch(t *testing.T) {
	o := observed([2]int64{30, 100}, [2]int64{0, 100})
	o.Target = Target{Kind: TargetDatetime, Time: time.Date(1969, 12, 31, 23, 59, 59, 999_000_000, time.UTC)}
	p := BuildPlan(o)
	if got := kinds(p.Warnings); !reflect.DeepEqual(got, []string{WarnHistoryDeleted}) {
		t.Fatalf("warnings %+v", p.Warnings)
	}
	if w := p.Warnings[0]; w.Missing != 30 || w.MissingUpperBound || !strings.Contains(w.Message, "30 offsets of history are gone") {
		t.Errorf("history warning %+v", w)
	}
	if p.Offsets[0].Target != 30 || p.Offsets[1].Target != 0 || p.Records != 170 {
		t.Errorf("offsets %+v", p.Offsets)
	}
	if notes := strings.Join(p.Notes, "\n"); !strings.Contains(notes, "1969-12-31T23:59:59.999Z is before 1970") {
		t.Errorf("notes %q", notes)
	}
}

// A changelog larger than the stage's task count was written by old
// tasks: their IDs are fenced too, so none of them keeps a transaction
// open.
func TestPlanFencesOldTasks(t *testing.T) {
	o := observed([2]int64{0, 10}, [2]int64{0, 10})
	o.ChangelogPartitions = 4
	p := BuildPlan(o)
	if want := []string{"app-0", "app-1", "app-2", "app-3"}; !reflect.DeepEqual(p.Fence, want) {
		t.Errorf("fence %v, want %v", p.Fence, want)
	}
	if got := kinds(p.Warnings); !reflect.DeepEqual(got, []string{WarnChangelogCount}) || !strings.Contains(p.Warnings[0].Message, "fenced too (4 in all)") {
		t.Errorf("warnings %+v", p.Warnings)
	}
	// A smaller changelog: the tasks' IDs are all there is to fence.
	o.ChangelogPartitions = 1
	if p = BuildPlan(o); len(p.Fence) != 2 || strings.Contains(p.Warnings[0].Message, "fenced too") {
		t.Errorf("fence %v warnings %+v", p.Fence, p.Warnings)
	}
	// A changelog that is gone fences by the tasks alone.
	o.ChangelogPartitions, o.ChangelogExists = 4, false
	if p = BuildPlan(o); len(p.Fence) != 2 {
		t.Errorf("fence %v", p.Fence)
	}
}

func TestPlanCompactedRaw(t *testing.T) {
	o := observed([2]int64{0, 10})
	top := o.Topics["raw"]
	top.Configs["cleanup.policy"] = "compact"
	top.Configs["retention.ms"] = "604800000" // ignored: compact alone deletes nothing by age
	o.Topics["raw"] = top
	p := BuildPlan(o)
	if got := kinds(p.Warnings); !reflect.DeepEqual(got, []string{WarnCompacted}) {
		t.Fatalf("warnings %+v", p.Warnings)
	}
	top.Configs["cleanup.policy"] = "compact,delete"
	top.Configs["retention.bytes"] = "1073741824"
	p = BuildPlan(o)
	if got := kinds(p.Warnings); !reflect.DeepEqual(got, []string{WarnCompacted, WarnFiniteRetention}) {
		t.Fatalf("warnings %+v", p.Warnings)
	}
	if !strings.Contains(p.Warnings[1].Message, "retention.bytes=1073741824") {
		t.Errorf("%s", p.Warnings[1].Message)
	}
}

func TestPlanNoChangelogNoGroupNoState(t *testing.T) {
	o := observed([2]int64{0, 10}, [2]int64{0, 20})
	o.Group = kafkax.Group{Group: "app", State: kafkax.GroupStateDead}
	o.ChangelogExists = false
	o.StateDirExists = false
	p := BuildPlan(o)
	if len(p.DeleteTopics) != 0 || p.Refused != "" {
		t.Fatalf("plan %+v", p)
	}
	notes := strings.Join(p.Notes, "\n")
	for _, want := range []string{`group "app" does not exist`, "changelog app-changelog does not exist", "no committed offsets", "no local state in /state/app"} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q:\n%s", want, notes)
		}
	}
	if p.GroupState != "Dead" || p.Members == nil {
		t.Errorf("group %q members %v", p.GroupState, p.Members)
	}
	// Still a full plan: fence and offsets.
	if len(p.Fence) != 2 || len(p.Offsets) != 2 || p.Records != 30 {
		t.Errorf("plan %+v", p)
	}
}

func TestPlanIntermediateAndUnequalInputs(t *testing.T) {
	o := observed([2]int64{0, 10}, [2]int64{0, 10})
	o.InputTopics = []string{"raw", "other"}
	o.IntermediateTopics = []string{"mid"}
	o.Topics["other"] = Topic{Partitions: []Partition{{0, 0, 5}, {1, 0, 5}, {2, 0, 5}}, Configs: map[string]string{"cleanup.policy": "delete", "retention.ms": "-1"}}
	o.Topics["mid"] = Topic{Partitions: []Partition{{0, 3, 70}}}
	o.Requested[tp("other", 0)], o.Requested[tp("other", 1)], o.Requested[tp("other", 2)] = 0, 0, 0
	o.Committed[tp("mid", 0)] = 12
	o.ChangelogPartitions = 2
	p := BuildPlan(o)
	if len(p.Fence) != 3 {
		t.Errorf("fence the largest count: %v", p.Fence)
	}
	if got := kinds(p.Warnings); !reflect.DeepEqual(got, []string{WarnUnequalPartitions, WarnChangelogCount}) {
		t.Fatalf("warnings %+v", p.Warnings)
	}
	last := p.Offsets[len(p.Offsets)-1]
	if last.Role != RoleIntermediate || last.Target != 70 || last.Records != 0 || last.Current == nil || *last.Current != 12 {
		t.Errorf("intermediate %+v", last)
	}
	if p.Records != 35 {
		t.Errorf("records %d: intermediate topics are not reread", p.Records)
	}
}

func TestPlanExtractor(t *testing.T) {
	o := &Observed{
		Request:         Request{ApplicationID: "poller", Kind: KindExtractor, ConfigTopics: []string{"cfg"}},
		Group:           kafkax.Group{State: "Empty"},
		Topics:          map[string]Topic{"cfg": {Partitions: []Partition{{Partition: 0}, {Partition: 1}, {Partition: 2}, {Partition: 3}}}},
		ChangelogExists: true, ChangelogPartitions: 4,
	}
	p := BuildPlan(o)
	if !reflect.DeepEqual(p.Fence, []string{"poller-0", "poller-1", "poller-2", "poller-3"}) {
		t.Errorf("tokens %v", p.Fence)
	}
	if len(p.Offsets) != 0 || p.Kind != KindExtractor {
		t.Errorf("%+v", p)
	}
	if got := kinds(p.Warnings); !reflect.DeepEqual(got, []string{WarnExtractor}) {
		t.Errorf("warnings %v", got)
	}
}

func TestDescribeMembers(t *testing.T) {
	got := kafkax.DescribeMembers([]kafkax.GroupMember{{ClientID: "a", Host: "127.0.0.1"}, {ClientID: "b", Host: "10.0.0.8"}})
	if got != "a on 127.0.0.1, b on 10.0.0.8" {
		t.Errorf("%q", got)
	}
}

func TestGroupDigits(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -20000: "-20,000"} {
		if got := textfmt.GroupDigits(n); got != want {
			t.Errorf("%d: %q", n, got)
		}
	}
}

// The plan names the module the restart runs; one flecht run refuses is a
// warning of its own, and the reason --execute is refused.
func TestPlanNamesTheModule(t *testing.T) {
	o := observed([2]int64{0, 10})
	p := BuildPlan(o)
	if b, _ := json.Marshal(p); p.Module != nil || p.ModuleRefusal() != "" || strings.Contains(string(b), `"module"`) {
		t.Errorf("a builtin: %s", b)
	}

	sha := strings.Repeat("ab", 32)
	o.ModuleFile = &status.ModuleFile{File: "./enrich.wasm", Path: "/stages/enrich.wasm", SHA256: sha}
	p = BuildPlan(o)
	b, _ := json.Marshal(p)
	if p.ModuleRefusal() != "" || len(p.Warnings) != 0 ||
		!strings.Contains(string(b), `"module":{"file":"./enrich.wasm","path":"/stages/enrich.wasm","sha256":"`+sha+`","pin":"","error":""}`) {
		t.Errorf("a module: %+v\n%s", p.Warnings, b)
	}

	for name, f := range map[string]*status.ModuleFile{
		"missing": {File: "./enrich.wasm", Path: "/stages/enrich.wasm", Error: "open /stages/enrich.wasm: no such file or directory"},
		"pinned":  {File: "./enrich.wasm", Path: "/stages/enrich.wasm", SHA256: sha, Pin: strings.Repeat("cd", 32)},
	} {
		o.ModuleFile = f
		p = BuildPlan(o)
		why := p.ModuleRefusal()
		if !strings.Contains(why, "the module ./enrich.wasm (/stages/enrich.wasm) that the stage file names cannot run: "+f.Problem()) ||
			!strings.Contains(why, "flecht run refuses it, so the stage could not restart after the replay") {
			t.Errorf("%s: refusal %q", name, why)
		}
		if len(p.Warnings) != 1 || p.Warnings[0].Kind != WarnModule || p.Warnings[0].Message != why {
			t.Errorf("%s: warnings %+v", name, p.Warnings)
		}
		if p.Refused != "" {
			t.Errorf("%s: a dry run is not refused: %q", name, p.Refused)
		}
	}
}

// A group the principal may not describe is no empty group: the plan says
// its members and offsets are unknown and is refused, and notes neither
// "does not exist" nor "no committed offsets".
func TestPlanUnseenGroupIsRefused(t *testing.T) {
	o := observed([2]int64{0, 10}, [2]int64{0, 20})
	o.Group = kafkax.Group{Group: "app", State: status.GroupStateUnknown, Members: []kafkax.GroupMember{}}
	o.Committed = map[TP]int64{}
	o.GroupUnauthorized = status.GroupNotAuthorized("app")
	p := BuildPlan(o)
	if p.GroupAuthorized == nil || *p.GroupAuthorized || p.GroupUnauthorized != "unknown: not authorized (needs Describe on group app)" {
		t.Errorf("group authorized %v %q", p.GroupAuthorized, p.GroupUnauthorized)
	}
	if !strings.Contains(p.Refused, "live members, and its committed offsets, are unknown: not authorized (needs Describe on group app)") || !strings.Contains(p.Refused, "grant Read on group app") {
		t.Errorf("refused %q", p.Refused)
	}
	for _, n := range p.Notes {
		if strings.Contains(n, "does not exist: no member") || strings.Contains(n, "no committed offsets") {
			t.Errorf("note %q", n)
		}
	}
}

// A plan from a transformer's stage file points to flecht preview, with
// the candidate a module or a builtin takes.
func TestPlanPointsToPreview(t *testing.T) {
	o := observed([2]int64{0, 10})
	if p := BuildPlan(o); strings.Contains(strings.Join(p.Notes, "\n"), "flecht preview") {
		t.Errorf("a plan without a stage file names preview: %q", p.Notes)
	}
	o.StageFile = "my stage.yaml"
	if notes := strings.Join(BuildPlan(o).Notes, "\n"); !strings.Contains(notes, "flecht preview -f 'my stage.yaml' --stage NEW.yaml") {
		t.Errorf("builtin: notes %q", notes)
	}
	o.Module = &stagefile.Module{File: "count.wasm"}
	if notes := strings.Join(BuildPlan(o).Notes, "\n"); !strings.Contains(notes, "--module NEW.wasm") {
		t.Errorf("module: notes %q", notes)
	}
}

// The rebuild writes the generation after the highest the group's
// committed offsets carry; with none, after the first (what a stage
// writes when its offsets carry none). An extractor has none.
func TestPlanGeneration(t *testing.T) {
	o := observed([2]int64{0, 10}, [2]int64{0, 10}, [2]int64{0, 10})
	o.Committed[tp("raw", 0)], o.Generations[tp("raw", 0)] = 10, 2
	o.Committed[tp("raw", 1)], o.Generations[tp("raw", 1)] = 7, 5
	o.Committed[tp("raw", 2)], o.Generations[tp("raw", 2)] = 3, 1
	if p := BuildPlan(o); p.Generation != 6 || p.GenerationBefore != 5 {
		t.Errorf("generation %d after %d, want 6 after 5", p.Generation, p.GenerationBefore)
	}
	b, _ := json.Marshal(BuildPlan(o))
	if !strings.Contains(string(b), `"generation":6,"generation_before":5`) {
		t.Errorf("JSON lacks the generations: %s", b)
	}
	if p := BuildPlan(observed([2]int64{0, 10})); p.Generation != 2 || p.GenerationBefore != 1 {
		t.Errorf("nothing committed: generation %d after %d, want 2 after 1", p.Generation, p.GenerationBefore)
	}
	ex := &Observed{Request: Request{ApplicationID: "ex", Kind: KindExtractor, ConfigTopics: []string{"c"}}, Topics: map[string]Topic{"c": {Partitions: []Partition{{Partition: 0}}}}}
	if p := BuildPlan(ex); p.Generation != 0 {
		t.Errorf("an extractor's plan has generation %d", p.Generation)
	}
}
