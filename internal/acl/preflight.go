package acl

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/kafkax"
)

// MissingError refuses a verb before its first change: the principal
// lacks each of Missing. It is exit 3 (exitcode.KindRefused).
type MissingError struct {
	// What the verb would have done: "replay", "run", "produce".
	What    string
	Missing []Need
	// Hint is the `flecht acl plan` command that lists the role's ACLs.
	Hint string
}

func (e *MissingError) Error() string {
	names := make([]string, len(e.Missing))
	for i, n := range e.Missing {
		names[i] = n.String()
	}
	msg := fmt.Sprintf("refused to %s before any change: the principal is not authorized for %s", e.What, strings.Join(names, ", "))
	if e.Hint != "" {
		msg += "; " + e.Hint + " prints the ACLs to grant"
	}
	return msg
}

// PlanHint is the `flecht acl plan` command of a stage file and role.
func PlanHint(stageFile string, role Role) string {
	if stageFile == "" {
		stageFile = "STAGE.yaml"
	}
	return fmt.Sprintf("flecht acl plan -f %s --role %s --principal User:NAME", stageFile, role)
}

// Require probes needs with the client's credentials and refuses (exit 3)
// with a *MissingError naming every need Kafka denies. A need Kafka
// cannot answer (a topic that does not exist yet) does not refuse: the
// verb's own request names it if it fails. names gives the transactional
// IDs to probe for a prefixed need (Probe).
func Require(ctx context.Context, cl *kgo.Client, what, hint string, needs []Need, names map[string][]string) error {
	if len(needs) == 0 {
		return nil
	}
	res, err := Probe(ctx, cl, needs, names)
	if err != nil {
		return fmt.Errorf("checking the permissions to %s: %w", what, err)
	}
	var missing []Need
	for _, r := range res {
		if r.Status == Missing {
			missing = append(missing, r.Need)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return exitcode.RefusedError(&MissingError{What: what, Missing: missing, Hint: hint})
}

// RequireStage is Require for every need of a stage's role: what `flecht
// run` checks before it joins its group.
func RequireStage(ctx context.Context, cl *kgo.Client, t Topics, o Options, stageFile, clientID string) error {
	needs, err := Needs(t, o)
	if err != nil {
		return err
	}
	names, err := TxnNames(ctx, cl, t, clientID)
	if err != nil {
		return err
	}
	return Require(ctx, cl, string(o.Role)+" "+t.ApplicationID, PlanHint(stageFile, o.Role), needs, names)
}

// TopicNeeds is op on each topic, literal, with why: the needs of a verb
// on named topics.
func TopicNeeds(op Operation, why string, topics ...string) []Need {
	out := make([]Need, 0, len(topics))
	for _, t := range topics {
		out = append(out, Need{Resource: Resource{Type: Topic, Name: t, Pattern: Literal}, Operation: op, Why: why})
	}
	return out
}

// ReplayNeeds are the operations the steps of a replay's plan perform:
// Write on each transactional ID it fences (under the prefix APP-, probed
// by name), Delete on each topic it deletes, Read on the group and each
// topic whose offsets it commits, DescribeConfigs on each input (its
// retention decides how far back the replay reaches), Delete on each
// output it truncates.
func ReplayNeeds(app string, fence, deleteTopics, offsetTopics, inputs, truncate []string) ([]Need, map[string][]string) {
	var needs []Need
	var names map[string][]string
	if len(fence) > 0 {
		prefix := app + "-"
		needs = append(needs, Need{Resource: Resource{Type: TransactionalID, Name: prefix, Pattern: Prefixed}, Operation: Write, Why: "fences the stage's transactional IDs"})
		names = map[string][]string{prefix: fence}
	}
	needs = append(needs, TopicNeeds(Delete, "deletes the changelog", deleteTopics...)...)
	if len(offsetTopics) > 0 {
		needs = append(needs, Need{Resource: Resource{Type: Group, Name: app, Pattern: Literal}, Operation: Read, Why: "commits the replay's offsets"})
		needs = append(needs, TopicNeeds(Read, "commits the replay's offsets on it", offsetTopics...)...)
	}
	needs = append(needs, TopicNeeds(DescribeConfigs, "checks its retention", inputs...)...)
	needs = append(needs, TopicNeeds(Delete, "truncates the output", truncate...)...)
	return needs, names
}

// RequireCreate is the preflight of `topic create`: Describe on every
// topic (it lists them first) and Create on each the cluster lacks, or
// that the principal cannot see.
func RequireCreate(ctx context.Context, cl *kgo.Client, topics []string) error {
	listed, err := kafkax.ListTopicsEach(ctx, kadm.NewClient(cl), topics...)
	if err != nil {
		return err
	}
	var needs []Need
	for _, t := range topics {
		needs = append(needs, TopicNeeds(Describe, "lists it", t)...)
		if d, ok := listed[t]; !ok || d.Err != nil {
			needs = append(needs, TopicNeeds(Create, "creates it", t)...)
		}
	}
	return Require(ctx, cl, "create topics", PlanHint("", RoleFeed), needs, nil)
}

// RequireProduce is the preflight of `topic produce`: Write on the topic,
// and on the client's transactional ID (flecht-produce-RANDOM) when it
// has one.
func RequireProduce(ctx context.Context, cl *kgo.Client, topic string) error {
	needs := TopicNeeds(Write, "produces to it", topic)
	var names map[string][]string
	if id, _ := cl.OptValue(kgo.TransactionalID).(string); id != "" {
		prefix := kafkax.ProduceTransactionalIDPrefix
		needs = append(needs, Need{Resource: Resource{Type: TransactionalID, Name: prefix, Pattern: Prefixed}, Operation: Write, Why: "writes the run in transactions"})
		names = map[string][]string{prefix: {id}}
	}
	return Require(ctx, cl, "produce to "+topic, PlanHint("", RoleFeed), needs, names)
}

// RequireLeave is the preflight of `group leave --execute`: Read on the
// group (Kafka's LeaveGroup).
func RequireLeave(ctx context.Context, cl *kgo.Client, group string) error {
	n := Need{Resource: Resource{Type: Group, Name: group, Pattern: Literal}, Operation: Read, Why: "removes members from it"}
	return Require(ctx, cl, "remove members of group "+group, "", []Need{n}, nil)
}

// RequireSweep is the preflight of a `secrets reencrypt` sweep: Read and
// Write on each config topic and Write on its transactional ID.
func RequireSweep(ctx context.Context, cl *kgo.Client, topics []string, txnID string) error {
	needs := append(TopicNeeds(Read, "reads the records to sweep", topics...), TopicNeeds(Write, "writes the swept records", topics...)...)
	needs = append(needs, Need{Resource: Resource{Type: TransactionalID, Name: txnID, Pattern: Literal}, Operation: Write, Why: "writes the sweep in transactions"})
	return Require(ctx, cl, "sweep "+strings.Join(topics, ", "), "", needs, nil)
}

// Explain adds to a verb's authorization failure the ACLs of its role
// (for the stage file) that the principal lacks, as the plan names them:
// Kafka's refusal names what the request needed (Describe on a topic),
// the plan what to grant (Read on it, which implies Describe). Any other
// error, or one without a stage file, is returned as it is.
func Explain(ctx context.Context, cl *kgo.Client, err error, stageFile string, role Role, truncateOutputs bool) error {
	return ExplainFor(ctx, cl, err, Flags{StageFile: stageFile, Role: string(role), TruncateOutputs: truncateOutputs})
}

// ExplainFor is Explain for the plan f names: f.OutputTopics names an
// extractor's outputs (a replay's --output-topics), which its stage file
// does not.
func ExplainFor(ctx context.Context, cl *kgo.Client, err error, f Flags) error {
	var refused *MissingError
	stageFile, role := f.StageFile, Role(f.Role)
	if err == nil || cl == nil || stageFile == "" || !kafkax.Unauthorized(err) && !errors.As(err, &refused) {
		return err
	}
	t, o, lerr := Load(f)
	if lerr != nil {
		return err
	}
	needs, _ := Needs(t, o)
	names, nerr := TxnNames(ctx, cl, t, "")
	if nerr != nil {
		return err
	}
	res, perr := Probe(ctx, cl, needs, names)
	if perr != nil {
		return err
	}
	var missing []string
	for _, r := range res {
		if r.Status == Missing {
			missing = append(missing, r.Need.String())
		}
	}
	if len(missing) == 0 {
		return err
	}
	return fmt.Errorf("%w; of the %s role's ACLs the principal lacks %s (%s prints them)", err, role, strings.Join(missing, ", "), PlanHint(stageFile, role))
}
