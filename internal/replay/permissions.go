package replay

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/acl"
	"github.com/flecht-dev/flecht/internal/textfmt"
)

// checkPermissions refuses the plan before its first change when the
// principal lacks an ACL one of its steps needs (docs/security.md), so an
// authorization failure never leaves a half-done replay: the plan is
// marked refused, naming each missing ACL.
func checkPermissions(ctx context.Context, cl *kgo.Client, plan *Plan) error {
	var offsets, inputs, truncate []string
	for _, o := range plan.Offsets {
		offsets = append(offsets, o.Topic)
		if o.Role != RoleIntermediate {
			inputs = append(inputs, o.Topic)
		}
	}
	for _, o := range plan.Outputs {
		if o.Action == ActionTruncate {
			truncate = append(truncate, o.Topic)
		}
	}
	needs, names := acl.ReplayNeeds(plan.ApplicationID, plan.Fence, plan.DeleteTopics, textfmt.Dedupe(offsets), textfmt.Dedupe(inputs), truncate)
	err := acl.Require(ctx, cl, "replay "+plan.ApplicationID, acl.PlanHint("", acl.RoleReplay), needs, names)
	var missing *acl.MissingError
	if errors.As(err, &missing) {
		plan.Refused = missing.Error()
	}
	return err
}

// stoppedError is a failure of Execute as the operator reads it: a
// refusal before the first change as it is; after steps ran, which ran
// and that running the same command again finishes the replay (every
// step is idempotent).
func stoppedError(plan *Plan, err error) error {
	var missing *acl.MissingError
	if errors.As(err, &missing) {
		return err
	}
	if len(plan.Steps) == 0 {
		return fmt.Errorf("replay failed before any step finished (it is safe to run it again): %w", err)
	}
	done := make([]string, len(plan.Steps))
	for i, s := range plan.Steps {
		done[i] = s.Step
	}
	return fmt.Errorf("replay stopped part-way after %s: %w; run the same command again to finish it (every step is idempotent)", strings.Join(done, ", "), err)
}
