package show

import (
	"fmt"
	"strings"

	"github.com/flecht-dev/flecht/internal/profile"
	"github.com/flecht-dev/flecht/internal/rotation"
	"github.com/flecht-dev/flecht/internal/secret"
	"github.com/flecht-dev/flecht/internal/ui"
)

// Keyring prints a report: what the verb did and changed, then the
// keyring as a table.
func Keyring(h *ui.Human, rep secret.KeyringReport) error {
	if line := secret.ActionLine(rep); line != "" {
		h.Printf("%s\n", line)
	}
	for _, c := range rep.Changes {
		h.Printf("  %s\n", secret.DescribeChange(c, rep.Keys))
	}
	if hint := secret.NextHint(rep); hint != "" {
		h.Printf("%s\n", h.Faint(hint))
	}
	file := "plain JWK Set"
	if rep.Protected {
		file = "password-protected"
	}
	h.Printf("keyring %s (%s), primary %q\n", rep.Keyring, file, rep.Primary)
	rows := make([][]string, len(rep.Keys))
	for i, k := range rep.Keys {
		half := "private"
		if !k.Private {
			half = "public only"
		}
		if k.Mismatch {
			half = h.Bad(half + " (MISMATCH)")
		}
		scopes, roles := "-", "-"
		if len(k.Scopes) > 0 {
			scopes = strings.Join(k.Scopes, ",")
		}
		if len(k.Roles) > 0 {
			roles = strings.Join(k.Roles, ",")
		}
		rows[i] = []string{k.Kid, string(k.Type), half, scopes, roles}
	}
	h.Table([]string{"kid", "type", "half", "scopes", "roles"}, rows)
	for _, w := range rep.Warnings {
		h.Printf("%s\n", h.Warn("warning: "+w))
	}
	return nil
}

// Readers shows each reader and the kids its keyring has loaded.
func Readers(h *ui.Human, rep *rotation.ReadersReport) {
	rows := make([][]string, len(rep.Readers))
	for i, r := range rep.Readers {
		status := r.Status
		if status != rotation.ReaderHasKey {
			status = h.Bad(status)
		}
		detail := strings.Join(r.Kids, ", ")
		if r.Error != "" {
			detail = r.Error
		}
		rows[i] = []string{r.URL, status, detail}
	}
	h.Table([]string{"reader", "status", "kids loaded"}, rows)
}

// KeysCheck shows which readers have loaded the key.
func KeysCheck(h *ui.Human, rep *rotation.ReadersReport) error {
	Readers(h, rep)
	if rep.Ready {
		h.Printf("%s\n", h.Good(fmt.Sprintf("every reader (%d) has loaded key %q: it may be promoted", len(rep.Readers), rep.Kid)))
	} else {
		h.Printf("%s\n", h.Bad(fmt.Sprintf("%d of %d readers have not loaded key %q; %s, before 'flecht keys promote'",
			rep.Lacking, len(rep.Readers), rep.Kid, rotation.RestartReaders)))
	}
	return nil
}

// RotatePlan shows a rotation's steps, the next one marked.
func RotatePlan(h *ui.Human, plan *rotation.Plan) error {
	switch {
	case plan.Role == rotation.RoleSigning:
		h.Printf("rotation of the signing key of %s to key %q (keyring %s, signed now by %s)\n\n",
			rotation.ScopeList(plan.Scopes), plan.Kid, plan.Keyring, rotation.SignersNow(plan))
	case plan.Scope != "":
		h.Printf("rotation of scope %q to key %q (keyring %s, its sealing key %q)\n\n", plan.Scope, plan.Kid, plan.Keyring, plan.Sealing)
	default:
		h.Printf("rotation to key %q (keyring %s, primary %q)\n\n", plan.Kid, plan.Keyring, plan.Primary)
	}
	for _, s := range plan.Steps {
		status := s.Status
		switch s.Status {
		case rotation.StepDone:
			status = h.Good(status)
		case rotation.StepPending:
			status = h.Warn(status)
		}
		marker := "  "
		if s.Step == plan.Next {
			marker = "→ "
		}
		h.Printf("%s%d. %-8s %s\n", marker, s.Step, status, s.Title)
		h.Printf("     %s\n", s.Detail)
		if s.Status != rotation.StepDone {
			h.Printf("     %s\n", h.Faint("$ "+s.Command))
		}
	}
	if plan.Next == 0 {
		h.Printf("\n%s\n", h.Good("the rotation is complete"))
	}
	return nil
}

// TokenHeader shows a token's header, marked unauthenticated.
func TokenHeader(hu *ui.Human, res secret.InspectResult) error {
	hu.Printf("%s\n", hu.Warn("UNAUTHENTICATED: read without a key; nothing here is verified until decrypt or verify succeeds"))
	pairs := [][2]string{{"envelope", res.Envelope}, {"alg", res.Alg}}
	if res.Enc != "" {
		pairs = append(pairs, [2]string{"enc", res.Enc})
	}
	pairs = append(pairs, [2]string{"kid", res.Kid})
	scope := "(none: unscoped)"
	if res.Scope != "" {
		scope = res.Scope
	}
	pairs = append(pairs, [2]string{"scope", scope})
	if res.EPK {
		pairs = append(pairs, [2]string{"epk", "an ephemeral X25519 public key (ECDH-ES): sealed to a recipient"})
	}
	var needs string
	switch res.KeyType {
	case secret.TypeOct:
		needs = "an oct key under this kid opens it"
	case secret.TypeX25519:
		needs = "the private half of an x25519 key under this kid opens it"
	default:
		needs = "an ed25519 key under this kid verifies it"
	}
	pairs = append(pairs, [2]string{"needs", needs})
	hu.KV(pairs...)
	return nil
}

// PasswordSource names where a password is read from, never the password.
func PasswordSource(p profile.Password) string {
	switch {
	case p.Env != "":
		return "$" + p.Env
	case p.File != "":
		return p.File
	}
	return "(none)"
}
