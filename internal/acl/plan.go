package acl

import (
	"fmt"
	"slices"
	"strings"

	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/stagefile"
	"github.com/flecht-dev/flecht/internal/textfmt"
	"github.com/flecht-dev/flecht/internal/transformer/builtin"
)

// Role is what a principal does with a stage.
type Role string

// The roles of `flecht acl plan` and `flecht acl check` (docs/security.md).
const (
	// RoleRun is the stage itself: `flecht run`.
	RoleRun Role = "run"
	// RoleReplay is `flecht replay --execute` (Delete on the outputs too
	// with --truncate-outputs).
	RoleReplay Role = "replay"
	// RoleOperate is read-only: status, doctor, lint, a replay's dry run.
	RoleOperate Role = "operate"
	// RoleFeed is `topic create -f`, `topic produce` to the inputs and
	// config topics, `topic consume` of the outputs.
	RoleFeed Role = "feed"
)

// Roles lists every role.
var Roles = []Role{RoleRun, RoleReplay, RoleOperate, RoleFeed}

// ParseRole returns the role named s.
func ParseRole(s string) (Role, error) {
	for _, r := range Roles {
		if string(r) == strings.TrimSpace(s) {
			return r, nil
		}
	}
	names := make([]string, len(Roles))
	for i, r := range Roles {
		names[i] = string(r)
	}
	return "", fmt.Errorf("role %q: use %s", s, textfmt.QuoteChoices(names))
}

// Topics are the names a stage uses on the wire (docs/contract.md §1).
type Topics struct {
	Kind          string   `json:"kind"`
	ApplicationID string   `json:"application_id"`
	Inputs        []string `json:"input_topics,omitempty"`
	Configs       []string `json:"config_topics,omitempty"`
	Outputs       []string `json:"output_topics,omitempty"`
	DeadLetters   []string `json:"dead_letter_topics,omitempty"`
	// Changelog is APP-changelog, "" for a stage that keeps no state.
	Changelog string `json:"changelog,omitempty"`
	// OutputsFromConfigs is true for an extractor or a bridge, whose
	// outputs are named by its config records (output_topic).
	OutputsFromConfigs bool `json:"outputs_from_configs,omitempty"`
}

// StageTopics reads the names a stage file uses: its topics, its
// transform's outputs and dead-letter topics, and its changelog. An
// extractor's or a bridge's outputs are named by its config records:
// outputs lists them (and a bridge's default output_topic counts).
func StageTopics(st *stagefile.Stage, outputs []string) (Topics, error) {
	t := Topics{Kind: st.Kind, ApplicationID: st.ApplicationID, Inputs: st.InputTopics, Configs: st.ConfigTopics}
	switch st.Kind {
	case stagefile.KindTransformer:
		w, err := builtin.StageWrites(st)
		if err != nil {
			return t, err
		}
		t.Outputs, t.DeadLetters = w.Outputs, w.DeadLetters
		if !w.Stateless {
			t.Changelog = stagefile.ChangelogTopic(st.ApplicationID)
		}
	case stagefile.KindExtractor:
		t.Changelog = stagefile.ChangelogTopic(st.ApplicationID)
		t.OutputsFromConfigs = true
	case stagefile.KindMQTT:
		t.OutputsFromConfigs = true
		if st.Extract != nil {
			var opts map[string]any
			if err := st.Extract.Options.Decode(&opts); err == nil {
				if o, ok := opts["output_topic"].(string); ok && o != "" {
					t.Outputs = append(t.Outputs, o)
				}
			}
		}
	}
	if err := stagefile.CheckNames("", outputs); err != nil {
		return t, err
	}
	t.Outputs = textfmt.Dedupe(append(slices.Clone(t.Outputs), outputs...))
	return t, nil
}

// Options choose what a role's plan covers.
type Options struct {
	Role Role
	// TruncateOutputs is a replay with --truncate-outputs: Delete on
	// every output and dead-letter topic.
	TruncateOutputs bool
}

// Needs is the least set of operations the role needs on the stage's
// resources, each with why. A transactional ID is named by the prefix
// APP- (docs/contract.md §1: APP-p, APP-t, APP-CLIENT_ID).
func Needs(t Topics, o Options) ([]Need, error) {
	var out []Need
	add := func(typ ResourceType, pattern PatternType, names []string, why string, ops ...Operation) {
		for _, name := range names {
			for _, op := range ops {
				out = append(out, Need{Resource: Resource{Type: typ, Name: name, Pattern: pattern}, Operation: op, Why: why})
			}
		}
	}
	app := t.ApplicationID
	group, txn := []string{app}, []string{app + "-"}
	var changelog []string
	if t.Changelog != "" {
		changelog = []string{t.Changelog}
	}
	transformer, extractor := t.Kind == stagefile.KindTransformer, t.Kind == stagefile.KindExtractor
	switch o.Role {
	case RoleRun:
		add(Topic, Literal, t.Inputs, "reads its input and commits its offsets in each transaction", Read)
		add(Topic, Literal, t.Configs, "reads its config topics", Read)
		if transformer || extractor {
			add(Group, Literal, group, "joins its group", Read)
		}
		add(Topic, Literal, t.Outputs, "writes its outputs", Write)
		add(Topic, Literal, t.DeadLetters, "creates and writes its dead-letter topics", Create, Write)
		add(Topic, Literal, changelog, "creates, restores and writes its changelog", Create, Read, Write, DescribeConfigs)
		add(TransactionalID, Prefixed, txn, "writes in transactions (APP-p, APP-t, APP-CLIENT_ID)", Write)
	case RoleReplay:
		if !transformer && !extractor {
			return nil, fmt.Errorf("a %s stage keeps no state and reads no Kafka input: there is nothing to replay", t.Kind)
		}
		if transformer {
			add(Group, Literal, group, "commits the replay's offsets", Read)
			add(Topic, Literal, t.Inputs, "commits offsets on the input and checks its retention", Read, DescribeConfigs)
		} else {
			add(Group, Literal, group, "checks that the group is empty", Describe)
			add(Topic, Literal, t.Configs, "counts the tokens", Describe)
		}
		add(TransactionalID, Prefixed, txn, "fences the stage's transactional IDs", Write)
		add(Topic, Literal, changelog, "deletes the changelog", Delete)
		outs := append(slices.Clone(t.Outputs), t.DeadLetters...)
		if o.TruncateOutputs {
			add(Topic, Literal, outs, "truncates the outputs (--truncate-outputs)", Delete)
		} else if transformer {
			add(Topic, Literal, outs, "looks at the outputs' ends", Describe)
		}
	case RoleOperate:
		if transformer || extractor {
			add(Group, Literal, group, "describes the group and its offsets", Describe)
		}
		add(Topic, Literal, t.Inputs, "reads the input's offsets, records and retention", Read, DescribeConfigs)
		add(Topic, Literal, t.Configs, "reads the config topics and their configs", Read, DescribeConfigs)
		// Read, not only Describe (which Read implies): verify audits every
		// record a transformer wrote, and trace reads a record where any
		// stage wrote it.
		if t.OutputsFromConfigs {
			// A source's outputs are raw topics: lint checks their retention.
			add(Topic, Literal, t.Outputs, "reads the raw topics' offsets, records (trace) and retention", Read, DescribeConfigs)
		} else {
			add(Topic, Literal, t.Outputs, "reads the outputs' offsets and records (verify, trace)", Read)
		}
		add(Topic, Literal, t.DeadLetters, "reads the dead letters' offsets and records (verify, trace)", Read)
		add(Topic, Literal, changelog, "describes the changelog and its configs", Describe, DescribeConfigs)
		add(TransactionalID, Prefixed, txn, "describes open transactions", Describe)
		add(Cluster, Literal, []string{ClusterName}, "reads the size of the changelog on the brokers' disks", Describe)
	case RoleFeed:
		add(Topic, Literal, t.Inputs, "creates the input (topic create -f) and produces to it", Create, Write)
		add(Topic, Literal, t.Configs, "creates the config topics and produces and consumes configs", Create, Write, Read)
		add(Topic, Literal, t.Outputs, "creates the outputs and consumes them", Create, Read)
		add(TransactionalID, Prefixed, []string{kafkax.ProduceTransactionalIDPrefix}, "topic produce writes each run in one transaction at a time (flecht-produce-RANDOM)", Write)
	default:
		return nil, fmt.Errorf("role %q: use run, replay, operate or feed", o.Role)
	}
	return out, nil
}

// Plan is the ACLs of one principal in one role: the JSON of `flecht acl
// plan -o json`, exactly {"acls":[...]}.
type Plan struct {
	ACLs []ACL `json:"acls"`
	// Principal, Role and Topics say what the plan is for.
	Principal string `json:"-"`
	Role      Role   `json:"-"`
	Topics    Topics `json:"-"`
	// Needs are the plan's operations with why, for people.
	Needs []Need `json:"-"`
	// Notes are what the plan cannot cover, for people.
	Notes []string `json:"-"`
}

// NewPlan is the plan of principal in the role for the stage's topics.
func NewPlan(principal string, t Topics, o Options) (*Plan, error) {
	if err := CheckPrincipal(principal); err != nil {
		return nil, err
	}
	needs, err := Needs(t, o)
	if err != nil {
		return nil, err
	}
	p := &Plan{ACLs: ACLs(principal, needs), Principal: principal, Role: o.Role, Topics: t, Needs: needs}
	if t.OutputsFromConfigs && (o.Role == RoleRun || o.Role == RoleFeed || o.Role == RoleOperate) {
		if len(t.Outputs) == 0 {
			p.Notes = append(p.Notes, fmt.Sprintf("a %s writes to the output_topic of each config record: give them with --output-topics T,... to include Write on them", t.Kind))
		} else {
			p.Notes = append(p.Notes, fmt.Sprintf("a %s writes to the output_topic of each config record: a config naming another topic than %s needs Write on it too", t.Kind, strings.Join(t.Outputs, ", ")))
		}
	}
	if o.Role == RoleRun || o.Role == RoleReplay || o.Role == RoleOperate {
		p.Notes = append(p.Notes, fmt.Sprintf("transactional IDs prefixed %s- also match those of an application whose id starts with %s-: keep application ids that are not another's prefix", t.ApplicationID, t.ApplicationID))
	}
	return p, nil
}
