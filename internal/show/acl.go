package show

import (
	"github.com/flecht-dev/flecht/internal/acl"
	"github.com/flecht-dev/flecht/internal/textfmt"
	"github.com/flecht-dev/flecht/internal/ui"
)

// ACLPlan shows a plan as the kafka-acls.sh commands that grant it, each
// under a comment naming the resource and why the role needs it.
func ACLPlan(h *ui.Human, p *acl.Plan, bootstrap, commandConfig string) {
	grants := acl.Commands(p.ACLs, bootstrap, commandConfig)
	h.Printf("# %s as %s of %s: %d ACLs in %d commands\n", textfmt.Printable(p.Principal), p.Role, textfmt.Printable(p.Topics.ApplicationID), len(p.ACLs), len(grants))
	for _, g := range grants {
		why := ""
		for _, n := range p.Needs {
			if n.Resource == g.Resource {
				why = n.Why
				break
			}
		}
		h.Printf("# %s: %s\n%s\n", textfmt.Printable(g.Resource.String()), why, textfmt.Printable(g.Command))
	}
}

// ACLCheck shows each need's verdict and, for the missing ones, the
// commands that grant them.
func ACLCheck(h *ui.Human, r *acl.Report, bootstrap, commandConfig string) {
	rows := make([][]string, 0, len(r.Results))
	for _, res := range r.Results {
		verdict := h.Good("✓ granted")
		switch res.Status {
		case acl.Missing:
			verdict = h.Bad("✗ missing")
		case acl.Unknown:
			verdict = h.Warn("unknown: " + res.Reason)
		}
		rows = append(rows, []string{res.Operation.Title(), res.Resource.String(), verdict})
	}
	h.Table([]string{"OPERATION", "RESOURCE", "VERDICT"}, rows)
	switch {
	case r.Missing > 0:
		h.Printf("\n%d missing; grant them with:\n", r.Missing)
		for _, g := range acl.Commands(r.MissingACLs(), bootstrap, commandConfig) {
			h.Printf("%s\n", textfmt.Printable(g.Command))
		}
	case r.Unknown > 0:
		h.Printf("\nno ACL is missing that Kafka reports; %d unknown (see above)\n", r.Unknown)
	default:
		h.Printf("\nevery ACL of the role is granted\n")
	}
}
