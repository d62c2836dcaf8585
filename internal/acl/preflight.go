package acl

import (
	"context"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/exitcode"
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
		return ""
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
