// Package rotation plans and checks a key rotation, reader first: which
// readers have loaded the new key (their keyring metric), which role it
// holds in the writers' keyring, what a scan of the stored values still
// finds under the old keys, and which keys are left to retire; and, before
// a key is removed, which stored values still need it and what to do
// about each.
package rotation

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/reencrypt"
	"github.com/flecht-dev/flecht/internal/secret"
	"github.com/flecht-dev/flecht/internal/textfmt"
)

// Step statuses of a rotation plan.
const (
	StepDone    = "done"
	StepPending = "pending"
	StepUnknown = "unknown" // not checkable with the inputs given
)

// Step is one step of the rotation runbook with its live status.
type Step struct {
	Step    int    `json:"step"`
	Title   string `json:"title"`
	Status  string `json:"status"` // done, pending, unknown
	Detail  string `json:"detail"`
	Command string `json:"command"` // what to run for it (or to check it)
}

// Roles a rotation moves.
const (
	RoleSealing = "sealing" // NEW is an oct or x25519 key (or not held yet)
	RoleSigning = "signing" // NEW is an ed25519 key
)

// Plan is the rotation to one key, each step with its live status: what
// `flecht keys rotate-plan` prints.
type Plan struct {
	Keyring string `json:"keyring"`
	Kid     string `json:"kid"`  // the key being rotated to
	Role    string `json:"role"` // sealing, or signing for an ed25519 key
	// Scope is the scope whose role rotates, from --scope ("" for the
	// primary's rotation, or for a signer every scope of its binding).
	Scope   string `json:"scope,omitempty"`
	Primary string `json:"primary"` // the keyring's primary now
	// Sealing is the key that seals the rotated values now (role sealing):
	// the primary, or with a scope its flenc_primaries entry (else the
	// primary).
	Sealing string `json:"sealing,omitempty"`
	// Scopes are the scopes a signer's rotation moves (role signing): its
	// binding, or the one --scope names; Signing is the key that signs
	// each of them now ("" where none does).
	Scopes  []string          `json:"scopes,omitempty"`
	Signing map[string]string `json:"signing,omitempty"`
	// OldKids are the keys the rotation retires: for a sealing key every
	// oct or x25519 key but NEW that no other role names; for a signer the
	// other ed25519 keys bound to its scopes that no other role names.
	OldKids []string `json:"old_kids"`
	Steps   []Step   `json:"steps"`
	Next    int      `json:"next"` // the first step not done; 0 when all are
	// Readers is the keys check of step 1, when --metrics-url was given.
	Readers *ReadersReport `json:"readers,omitempty"`
	// Scan summarises the scan behind steps 3 and 4, when topics were given.
	Scan *ScanSummary `json:"scan,omitempty"`
}

// ScanSummary is the part of a scan a rotation plan needs.
type ScanSummary struct {
	Topics        []string       `json:"topics"`
	Values        int            `json:"values"`
	OldTokens     int            `json:"old_tokens"` // tokens of either generation under another kid, in the scopes the new key seals
	ByOldKid      map[string]int `json:"by_old_kid"`
	OldSigned     int            `json:"old_signed"` // signatures by another signer, in the scopes the new key signs
	ByOldSigner   map[string]int `json:"by_old_signer"`
	Plaintext     int            `json:"plaintext"`
	Unsigned      int            `json:"unsigned"`
	Corrupt       int            `json:"corrupt"`
	Undecryptable int            `json:"undecryptable"`
	Unverified    int            `json:"unverified"`
}

// Inputs are what a plan is checked against.
type Inputs struct {
	Keyring     *secret.Keyring // the writers' copy
	KeyringPath string          // its file, for the commands the plan suggests
	Kid         string          // the key being rotated to
	Scope       string          // rotate this scope's role only ("" for the primary's)
	URLs        []string        // the readers' metrics endpoints (step 1)
	Scrape      func(ctx context.Context, url string) Reader
	// Scan scans the stored values of Topics and Fields (steps 3 and 4);
	// nil when no topics were given, which leaves those steps unknown.
	Scan   func(ctx context.Context) (*reencrypt.ScanReport, error)
	Topics []string
	Fields []reencrypt.Field
}

// NewPlan checks each step of the rotation to in.Kid against the keyring,
// the readers (in.Scrape, when in.URLs are given) and a scan of the stored
// values (in.Scan, when topics were given), and says what to run next.
func NewPlan(ctx context.Context, in Inputs) (*Plan, error) {
	kr := in.Keyring
	newKid, scope := in.Kid, in.Scope
	plan := &Plan{Keyring: in.KeyringPath, Kid: newKid, Role: RoleSealing, Scope: scope, Primary: kr.Primary()}
	if kr.Type(newKid) == secret.TypeEd25519 {
		e, _ := kr.Entry(newKid)
		plan.Role, plan.Scopes = RoleSigning, e.Scopes
		if scope != "" {
			if !slices.Contains(e.Scopes, scope) {
				return nil, exitcode.UsageError(fmt.Errorf("key %q is an ed25519 key bound to %s, not to scope %q: a signer signs only the scopes of its binding",
					newKid, textfmt.QuoteList(e.Scopes), scope))
			}
			plan.Scopes = []string{scope}
		}
		plan.Signing = map[string]string{}
		for _, sc := range plan.Scopes {
			plan.Signing[sc] = kr.SigningFor()[sc]
		}
		plan.OldKids = retiredSigners(kr, newKid, plan.Scopes)
	} else {
		plan.Sealing = kr.Primary()
		if k, ok := kr.PrimaryFor()[scope]; ok && scope != "" {
			plan.Sealing = k
		}
		plan.OldKids = retiredKids(kr, newKid, scope)
	}
	kf := "--keyring " + textfmt.ShellQuote(in.KeyringPath)
	scopeFlag := ""
	if scope != "" {
		scopeFlag = " --scope " + textfmt.ShellQuote(scope)
	}
	urlFlags := ""
	for _, u := range textfmt.Dedupe(in.URLs) {
		urlFlags += " --metrics-url " + textfmt.ShellQuote(u)
	}
	if urlFlags == "" {
		urlFlags = " --metrics-url URL…"
	}

	// 1. Readers hold the key.
	s1 := Step{Step: 1, Title: "add the new key to every reader's keyring", Command: "flecht keys check --kid " + textfmt.ShellQuote(newKid) + urlFlags}
	switch {
	case !kr.Has(newKid):
		s1.Status, s1.Detail = StepPending, fmt.Sprintf("the keyring does not hold %q yet", newKid)
		s1.Command = "flecht keys add " + kf + " --kid " + textfmt.ShellQuote(newKid) + scopeFlag + ", roll the file out to every reader and restart each, then " + s1.Command
	case len(in.URLs) == 0:
		s1.Status, s1.Detail = StepUnknown, "the keyring holds it; give every reader's --metrics-url to check that they have loaded it"
	default:
		plan.Readers = CheckReaders(ctx, newKid, in.URLs, in.Scrape)
		if plan.Readers.Ready {
			s1.Status, s1.Detail = StepDone, fmt.Sprintf("all %d readers have loaded it", len(plan.Readers.Readers))
		} else {
			var lacking []string
			for _, r := range plan.Readers.Readers {
				if r.Status != ReaderHasKey {
					lacking = append(lacking, r.URL+" ("+r.Status+")")
				}
			}
			s1.Status = StepPending
			s1.Detail = fmt.Sprintf("%d of %d readers lack it: %s; %s", plan.Readers.Lacking, len(plan.Readers.Readers), strings.Join(lacking, ", "), RestartReaders)
		}
	}

	// 2. Writers seal or sign with it.
	var s2 Step
	if plan.Role == RoleSigning {
		s2 = signingStep(kr, plan, kf)
	} else {
		s2 = sealingStep(kr, plan, kf, scopeFlag)
	}

	// 3 and 4 need the topics.
	s3 := Step{Step: 3, Title: "re-encrypt the stored tokens under it"}
	sweep := " --execute"
	if plan.Role == RoleSigning {
		s3.Title, sweep = "sign the stored values again with it (the sweep with --resign)", " --resign --execute"
	}
	s4 := Step{Step: 4, Title: "verify by a scan: nothing under an old kid, nothing plaintext or unreadable"}
	if in.Scan == nil {
		s3.Status, s3.Detail = StepUnknown, "give --topics and --field (or -f stage.yaml) to scan the stored values"
		s3.Command = "flecht secrets reencrypt --topics T --field NAME[:scope] " + kf + sweep
		s4.Status, s4.Detail, s4.Command = StepUnknown, s3.Detail, "flecht secrets scan --topics T --field NAME[:scope] "+kf
	} else {
		rep, err := in.Scan(ctx)
		if err != nil {
			return nil, err
		}
		topics := in.Topics
		tf := reencrypt.TargetFlags(topics, in.Fields)
		rot := rep.Rotation(kr, newKid, scope)
		sum := rep.Summary
		sc := &ScanSummary{Topics: topics, Values: sum.Values, OldTokens: rot.OldTokens, ByOldKid: rot.ByOldKid,
			OldSigned: rot.OldSigned, ByOldSigner: rot.ByOldSigner, Plaintext: sum.Plaintext, Unsigned: sum.Unsigned,
			Corrupt: sum.Corrupt, Undecryptable: sum.Undecryptable, Unverified: sum.Unverified}
		plan.Scan = sc
		if sc.OldSigned > 0 {
			sweep = " --resign --execute"
		}
		s3.Command = "flecht secrets reencrypt " + tf + " " + kf + sweep
		s4.Command = "flecht secrets scan " + tf + " " + kf
		var old []string
		if sc.OldTokens > 0 {
			old = append(old, fmt.Sprintf("%d tokens under old kids (%s)", sc.OldTokens, kidCounts(sc.ByOldKid)))
		}
		if sc.OldSigned > 0 {
			old = append(old, fmt.Sprintf("%d signatures by old signers (%s)", sc.OldSigned, kidCounts(sc.ByOldSigner)))
		}
		switch {
		case len(old) == 0:
			s3.Status, s3.Detail = StepDone, fmt.Sprintf("nothing under another kid (%d values scanned)", sc.Values)
		case s2.Status != StepDone:
			s3.Status, s3.Detail = StepPending, strings.Join(old, ", ")+"; sweep after step 2"
		default:
			s3.Status, s3.Detail = StepPending, strings.Join(old, ", ")
		}
		if len(old) == 0 && rep.Clean {
			s4.Status, s4.Detail = StepDone, "clean"
		} else {
			s4.Status = StepPending
			s4.Detail = fmt.Sprintf("%d tokens under old kids, %d signatures by old signers, %d plaintext, %d unsigned, %d corrupt, %d that do not open, %d whose signature does not verify",
				sc.OldTokens, sc.OldSigned, sc.Plaintext, sc.Unsigned, sc.Corrupt, sc.Undecryptable, sc.Unverified)
		}
	}

	// 5. Retire the old keys.
	s5 := Step{Step: 5, Title: "remove the old keys from the keyring, roll it out"}
	if plan.Role == RoleSigning {
		s5.Title = "remove the old signers from the keyring, roll it out"
	}
	if len(plan.OldKids) == 0 {
		s5.Status, s5.Detail = StepDone, "no sealing key is left that only the rotated role named"
		if plan.Role == RoleSigning {
			s5.Status, s5.Detail = StepDone, "no other signer of the rotated scopes is left that no role names"
		}
	} else {
		s5.Status, s5.Detail = StepPending, "the keyring still holds "+textfmt.QuoteList(plan.OldKids)
		guard := "--topics T --field NAME[:scope]"
		if plan.Scan != nil {
			guard = reencrypt.TargetFlags(in.Topics, in.Fields)
		}
		var cmds []string
		// The escrow first: a copy of the keyring as it is, with the old
		// keys, password-protected, to keep offline (old backups and log
		// segments may still hold tokens only they open).
		if path := in.KeyringPath; path != "" {
			escrow := textfmt.ShellQuote(path + ".escrow")
			s5.Detail += "; first keep a copy with them offline: cp " + textfmt.ShellQuote(path) + " " + escrow + " && flecht keys protect --keyring " + escrow
		}
		for _, k := range plan.OldKids {
			cmds = append(cmds, "flecht keys remove "+kf+" --kid "+textfmt.ShellQuote(k)+" "+guard)
		}
		s5.Command = strings.Join(cmds, "; ")
	}
	plan.Steps = []Step{s1, s2, s3, s4, s5}
	for _, s := range plan.Steps {
		if s.Status != StepDone {
			plan.Next = s.Step
			break
		}
	}
	return plan, nil
}

// sealingStep is step 2 of a sealing key's rotation: NEW becomes the
// primary, or with a scope that scope's sealing key.
func sealingStep(kr *secret.Keyring, plan *Plan, kf, scopeFlag string) Step {
	newKid, scope := plan.Kid, plan.Scope
	s2 := Step{Step: 2, Title: "promote it to primary, then roll the keyring out to the writers", Command: "flecht keys promote " + kf + scopeFlag + " --kid " + textfmt.ShellQuote(newKid)}
	role := "the primary"
	if scope != "" {
		s2.Title = fmt.Sprintf("make it the sealing key of scope %q, then roll the keyring out to the writers", scope)
		role = fmt.Sprintf("the sealing key of scope %q", scope)
	}
	if plan.Sealing == newKid && (scope == "" || kr.PrimaryFor()[scope] == newKid) {
		s2.Status, s2.Detail = StepDone, fmt.Sprintf("%q is %s", newKid, role)
	} else {
		s2.Status, s2.Detail = StepPending, fmt.Sprintf("%s is %q", role, plan.Sealing)
	}
	return s2
}

// signingStep is step 2 of a signer's rotation: flenc_signing names NEW
// for every rotated scope.
func signingStep(kr *secret.Keyring, plan *Plan, kf string) Step {
	newKid := plan.Kid
	s2 := Step{Step: 2, Title: fmt.Sprintf("make it the signing key of %s, then roll the keyring out to the writers", ScopeList(plan.Scopes))}
	var cmds, pending []string
	for _, sc := range plan.Scopes {
		if plan.Signing[sc] == newKid {
			continue
		}
		cmds = append(cmds, "flecht keys signing "+kf+" --kid "+textfmt.ShellQuote(newKid)+" --scope "+textfmt.ShellQuote(sc))
		if now := plan.Signing[sc]; now != "" {
			pending = append(pending, fmt.Sprintf("scope %q is signed by %q", sc, now))
		} else {
			pending = append(pending, fmt.Sprintf("scope %q has no signing key", sc))
		}
	}
	if len(cmds) == 0 {
		s2.Status, s2.Detail = StepDone, fmt.Sprintf("%q is the signing key of %s", newKid, ScopeList(plan.Scopes))
		s2.Command = "flecht keys list " + kf
	} else {
		s2.Status, s2.Detail, s2.Command = StepPending, strings.Join(pending, ", "), strings.Join(cmds, "; ")
	}
	if e, ok := kr.Entry(newKid); ok && !e.Private {
		s2.Detail += fmt.Sprintf("; this keyring holds only the public half of %q: the writers' copy needs its private half to sign", newKid)
	}
	return s2
}

// ScopeList names scopes for a person: scope "a", scopes "a", "b".
func ScopeList(scopes []string) string {
	if len(scopes) == 1 {
		return fmt.Sprintf("scope %q", scopes[0])
	}
	return "scopes " + textfmt.QuoteList(scopes)
}

// SignersNow names the keys that sign the rotated scopes now.
func SignersNow(plan *Plan) string {
	var kids []string
	for _, sc := range plan.Scopes {
		if k := plan.Signing[sc]; k != "" && !slices.Contains(kids, k) {
			kids = append(kids, k)
		}
	}
	if len(kids) == 0 {
		return "no key"
	}
	slices.Sort(kids)
	return textfmt.QuoteList(kids)
}

// retiredSigners are the keys a signer's rotation to newKid retires: the
// other ed25519 keys bound to a rotated scope that no role names once
// newKid signs the rotated scopes. Sealing keys are never among them.
func retiredSigners(kr *secret.Keyring, newKid string, scopes []string) []string {
	out := []string{}
	for _, e := range kr.Entries() {
		if e.Kid == newKid || e.Type != secret.TypeEd25519 || !slices.ContainsFunc(e.Scopes, func(s string) bool { return slices.Contains(scopes, s) }) {
			continue
		}
		others := slices.DeleteFunc(slices.Clone(e.SigningFor), func(s string) bool { return slices.Contains(scopes, s) })
		if len(others) > 0 {
			continue
		}
		out = append(out, e.Kid)
	}
	slices.Sort(out)
	return out
}

// retiredKids are the keys a rotation to newKid retires: the oct and
// x25519 keys but newKid that no role names once the rotated role moves
// (the primary, or with a scope that scope's sealing key). Signing keys
// are never among them.
func retiredKids(kr *secret.Keyring, newKid, scope string) []string {
	out := []string{}
	for _, e := range kr.Entries() {
		if e.Kid == newKid || e.Type == secret.TypeEd25519 || len(e.SigningFor) > 0 {
			continue
		}
		others := slices.DeleteFunc(slices.Clone(e.PrimaryFor), func(s string) bool { return s == scope })
		if len(others) > 0 || (e.Primary && scope != "") {
			continue
		}
		out = append(out, e.Kid)
	}
	slices.Sort(out)
	return out
}

func kidCounts(m map[string]int) string {
	kids := make([]string, 0, len(m))
	for k := range m {
		kids = append(kids, k)
	}
	sort.Strings(kids)
	parts := make([]string, len(kids))
	for i, k := range kids {
		parts[i] = fmt.Sprintf("%s: %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}
