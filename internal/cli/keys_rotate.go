package cli

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/reencrypt"
	"github.com/flecht-dev/flecht/internal/secret"
	"github.com/flecht-dev/flecht/internal/textfmt"
	"github.com/flecht-dev/flecht/internal/ui"
)

// Step statuses of a rotation plan.
const (
	stepDone    = "done"
	stepPending = "pending"
	stepUnknown = "unknown" // not checkable with the inputs given
)

// RotateStep is one step of the rotation runbook with its live status.
type RotateStep struct {
	Step    int    `json:"step"`
	Title   string `json:"title"`
	Status  string `json:"status"` // done, pending, unknown
	Detail  string `json:"detail"`
	Command string `json:"command"` // what to run for it (or to check it)
}

// Roles a rotation moves.
const (
	rotateSealing = "sealing" // NEW is an oct or x25519 key (or not held yet)
	rotateSigning = "signing" // NEW is an ed25519 key
)

// RotatePlan is what `flecht keys rotate-plan` prints.
type RotatePlan struct {
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
	OldKids []string     `json:"old_kids"`
	Steps   []RotateStep `json:"steps"`
	Next    int          `json:"next"` // the first step not done; 0 when all are
	// Readers is the keys check of step 1, when --metrics-url was given.
	Readers *KeysCheckReport `json:"readers,omitempty"`
	// Scan summarises the scan behind steps 3 and 4, when topics were given.
	Scan *RotateScan `json:"scan,omitempty"`
}

// RotateScan is the part of a scan a rotation plan needs.
type RotateScan struct {
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

// KeysRotatePlanOptions are the inputs of `flecht keys rotate-plan`.
type KeysRotatePlanOptions struct {
	IO           *ui.IOStreams
	Printer      func() *ui.Printer
	Keyring      string
	PasswordFile string // a protected keyring's password: --password-file, else FLECHT_KEYRING_PASSWORD_FILE
	Kid          string
	Scope        string // rotate the role of this scope only
	URLs         []string
	Targets      secretTargets
	Scan         func(ctx context.Context, o reencrypt.ScanOptions) (*reencrypt.ScanReport, error)
	Scrape       func(ctx context.Context, url string) KeysCheckReader
}

// NewCmdKeysRotatePlan builds `flecht keys rotate-plan`.
func NewCmdKeysRotatePlan(f *Factory, runF func(*KeysRotatePlanOptions) error) *cobra.Command {
	opts := &KeysRotatePlanOptions{IO: f.IO, Printer: f.Printer}
	opts.Scan = f.ScanTopics
	opts.Scrape = func(ctx context.Context, u string) KeysCheckReader {
		return scrapeKeyring(ctx, &http.Client{Timeout: 10 * time.Second}, u)
	}
	cmd := &cobra.Command{
		Use:   "rotate-plan --kid NEW [--scope S] [--metrics-url URL...] [--topics T,... --field NAME[:scope]... | -f stage.yaml]",
		Short: "Show the five rotation steps to key NEW, each with its live status",
		Long: `Show the reader-first rotation to key NEW as five steps, each checked now.
For a sealing key (oct or x25519):

  1. add NEW to every reader's keyring   the keyring holds NEW, and every
                                          --metrics-url reports it loaded
  2. promote NEW (writers)               the keyring's primary is NEW (with
                                          --scope S: scope S's sealing key)
  3. re-encrypt the stored tokens        the scan finds no token of the
                                          rotated fields under another kid
  4. verify by a scan                    nothing under an old kid,
                                          plaintext, corrupt or unopenable
  5. retire the old keys                 no oct or x25519 key is left that
                                          no role but the rotated one names

Any kind works as a sealing key's successor: a rotation may move from oct
to x25519 and back. Without --scope the rotation is the primary's: the
rotated fields are those whose scope has no sealing key of its own. With
--scope S it is scope S's alone (flenc_primaries[S]): the rotated fields
are those of scope S, and the other scopes' keys are left alone.

For a signing key (ed25519), the scopes of its binding (or, with --scope S,
scope S alone) are the rotated ones:

  1. add NEW to every reader's keyring   as above: readers verify with it
  2. make NEW the signing key            flenc_signing names NEW for each
     ('keys signing --kid NEW --scope S')  rotated scope
  3. sign the stored values again        the scan finds no signature in the
     (the sweep with --resign)             rotated scopes by another signer
  4. verify by a scan                    as above
  5. retire the old signers              no other ed25519 key bound to the
                                          rotated scopes that no role names

A key the keyring does not hold yet is planned as a sealing key: add an
ed25519 key first ('keys add --type ed25519 --scope S') to see its plan.

Each step says done, pending or unknown (not checkable without
--metrics-url, or without --topics and --field / -f stage.yaml), with the
command that does or checks it; "next" is the first step not done. The
keyring is the writers' copy (--keyring or ` + EnvKeyring + `). Nothing is
changed. Exit 0 whatever the progress; 1 when a check itself fails.`,
		Example: `  flecht keys rotate-plan --keyring keyring.json --kid prod-2026-07 \
      --metrics-url 127.0.0.1:9464 --metrics-url 127.0.0.1:9465 -f extractor.yaml
  flecht keys rotate-plan --kid prod-2026-07 -f extractor.yaml -o json | jq .next
  flecht keys rotate-plan --kid sig-api-2026-07 --scope api -f extractor.yaml`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.Keyring = keyringPath(opts.Keyring, f.Getenv)
			opts.PasswordFile = passwordFilePath(opts.PasswordFile, f.Getenv)
			if opts.Keyring == "" {
				return exitcode.UsageError(errNoKeyringPath)
			}
			if opts.Kid == "" {
				return exitcode.UsageError(errors.New("--kid NEW is required: the key being rotated to"))
			}
			if opts.Scope != "" && strings.TrimSpace(opts.Scope) == "" {
				return exitcode.UsageError(errors.New("--scope must name a scope"))
			}
			if runF != nil {
				return runF(opts)
			}
			return runKeysRotatePlan(cmd.Context(), opts)
		},
	}
	addKeyringFlag(cmd, &opts.Keyring)
	addPasswordFileFlag(cmd, &opts.PasswordFile)
	cmd.Flags().StringVar(&opts.Kid, "kid", "", "the new key (being rotated to)")
	cmd.Flags().StringVar(&opts.Scope, "scope", "", "rotate scope S's role only: its sealing key (flenc_primaries[S]), or for an ed25519 NEW its signing key (flenc_signing[S])")
	cmd.Flags().StringSliceVar(&opts.URLs, "metrics-url", nil, "a reader's Prometheus endpoint (repeatable)")
	opts.Targets.addFlags(cmd)
	return cmd
}

func runKeysRotatePlan(ctx context.Context, opts *KeysRotatePlanOptions) error {
	kr, err := loadKeyringForKeys(&KeysOptions{IO: opts.IO, Keyring: opts.Keyring, PasswordFile: opts.PasswordFile})
	if err != nil {
		return err
	}
	newKid, scope := opts.Kid, opts.Scope
	plan := &RotatePlan{Keyring: opts.Keyring, Kid: newKid, Role: rotateSealing, Scope: scope, Primary: kr.Primary()}
	if kr.Type(newKid) == secret.TypeEd25519 {
		e, _ := kr.Entry(newKid)
		plan.Role, plan.Scopes = rotateSigning, e.Scopes
		if scope != "" {
			if !slices.Contains(e.Scopes, scope) {
				return exitcode.UsageError(fmt.Errorf("key %q is an ed25519 key bound to %s, not to scope %q: a signer signs only the scopes of its binding",
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
	kf := "--keyring " + shellQuote(opts.Keyring)
	scopeFlag := ""
	if scope != "" {
		scopeFlag = " --scope " + shellQuote(scope)
	}
	urlFlags := ""
	for _, u := range dedupeStrings(opts.URLs) {
		urlFlags += " --metrics-url " + shellQuote(u)
	}
	if urlFlags == "" {
		urlFlags = " --metrics-url URL…"
	}

	// 1. Readers hold the key.
	s1 := RotateStep{Step: 1, Title: "add the new key to every reader's keyring", Command: "flecht keys check --kid " + shellQuote(newKid) + urlFlags}
	switch {
	case !kr.Has(newKid):
		s1.Status, s1.Detail = stepPending, fmt.Sprintf("the keyring does not hold %q yet", newKid)
		s1.Command = "flecht keys add " + kf + " --kid " + shellQuote(newKid) + scopeFlag + ", roll the file out to every reader, then " + s1.Command
	case len(opts.URLs) == 0:
		s1.Status, s1.Detail = stepUnknown, "the keyring holds it; give every reader's --metrics-url to check that they have loaded it"
	default:
		plan.Readers = checkReaders(ctx, newKid, opts.URLs, opts.Scrape)
		if plan.Readers.Ready {
			s1.Status, s1.Detail = stepDone, fmt.Sprintf("all %d readers have loaded it", len(plan.Readers.Readers))
		} else {
			var lacking []string
			for _, r := range plan.Readers.Readers {
				if r.Status != readerHasKey {
					lacking = append(lacking, r.URL+" ("+r.Status+")")
				}
			}
			s1.Status = stepPending
			s1.Detail = fmt.Sprintf("%d of %d readers lack it: %s", plan.Readers.Lacking, len(plan.Readers.Readers), strings.Join(lacking, ", "))
		}
	}

	// 2. Writers seal or sign with it.
	var s2 RotateStep
	if plan.Role == rotateSigning {
		s2 = signingStep(kr, plan, kf)
	} else {
		s2 = sealingStep(kr, plan, kf, scopeFlag)
	}

	// 3 and 4 need the topics.
	s3 := RotateStep{Step: 3, Title: "re-encrypt the stored tokens under it"}
	sweep := " --execute"
	if plan.Role == rotateSigning {
		s3.Title, sweep = "sign the stored values again with it (the sweep with --resign)", " --resign --execute"
	}
	s4 := RotateStep{Step: 4, Title: "verify by a scan: nothing under an old kid, nothing plaintext or unreadable"}
	if !opts.Targets.given() {
		s3.Status, s3.Detail = stepUnknown, "give --topics and --field (or -f stage.yaml) to scan the stored values"
		s3.Command = "flecht secrets reencrypt --topics T --field NAME[:scope] " + kf + sweep
		s4.Status, s4.Detail, s4.Command = stepUnknown, s3.Detail, "flecht secrets scan --topics T --field NAME[:scope] "+kf
	} else {
		topics, fields, err := opts.Targets.resolve()
		if err != nil {
			return err
		}
		rep, err := scanWithProgress(ctx, opts.IO, opts.Scan, reencrypt.ScanOptions{Topics: topics, Fields: fields, Keyring: kr})
		if err != nil {
			return err
		}
		tf := targetFlags(topics, fields)
		rot := rep.Rotation(kr, newKid, scope)
		sum := rep.Summary
		sc := &RotateScan{Topics: topics, Values: sum.Values, OldTokens: rot.OldTokens, ByOldKid: rot.ByOldKid,
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
			s3.Status, s3.Detail = stepDone, fmt.Sprintf("nothing under another kid (%d values scanned)", sc.Values)
		case s2.Status != stepDone:
			s3.Status, s3.Detail = stepPending, strings.Join(old, ", ")+"; sweep after step 2"
		default:
			s3.Status, s3.Detail = stepPending, strings.Join(old, ", ")
		}
		if len(old) == 0 && rep.Clean {
			s4.Status, s4.Detail = stepDone, "clean"
		} else {
			s4.Status = stepPending
			s4.Detail = fmt.Sprintf("%d tokens under old kids, %d signatures by old signers, %d plaintext, %d unsigned, %d corrupt, %d that do not open, %d whose signature does not verify",
				sc.OldTokens, sc.OldSigned, sc.Plaintext, sc.Unsigned, sc.Corrupt, sc.Undecryptable, sc.Unverified)
		}
	}

	// 5. Retire the old keys.
	s5 := RotateStep{Step: 5, Title: "remove the old keys from the keyring, roll it out"}
	if plan.Role == rotateSigning {
		s5.Title = "remove the old signers from the keyring, roll it out"
	}
	if len(plan.OldKids) == 0 {
		s5.Status, s5.Detail = stepDone, "no sealing key is left that only the rotated role named"
		if plan.Role == rotateSigning {
			s5.Status, s5.Detail = stepDone, "no other signer of the rotated scopes is left that no role names"
		}
	} else {
		s5.Status, s5.Detail = stepPending, "the keyring still holds "+textfmt.QuoteList(plan.OldKids)
		guard := "--topics T --field NAME[:scope]"
		if plan.Scan != nil {
			topics, fields, _ := opts.Targets.resolve()
			guard = targetFlags(topics, fields)
		}
		var cmds []string
		// The escrow first: a copy of the keyring as it is, with the old
		// keys, password-protected, to keep offline (old backups and log
		// segments may still hold tokens only they open).
		if path := opts.Keyring; path != "" {
			escrow := shellQuote(path + ".escrow")
			s5.Detail += "; first keep a copy with them offline: cp " + shellQuote(path) + " " + escrow + " && flecht keys protect --keyring " + escrow
		}
		for _, k := range plan.OldKids {
			cmds = append(cmds, "flecht keys remove "+kf+" --kid "+shellQuote(k)+" "+guard)
		}
		s5.Command = strings.Join(cmds, "; ")
	}
	plan.Steps = []RotateStep{s1, s2, s3, s4, s5}
	for _, s := range plan.Steps {
		if s.Status != stepDone {
			plan.Next = s.Step
			break
		}
	}
	return opts.Printer().Print(plan, func(h *ui.Human) error {
		switch {
		case plan.Role == rotateSigning:
			h.Printf("rotation of the signing key of %s to key %q (keyring %s, signed now by %s)\n\n",
				scopeList(plan.Scopes), plan.Kid, plan.Keyring, signersNow(plan))
		case plan.Scope != "":
			h.Printf("rotation of scope %q to key %q (keyring %s, its sealing key %q)\n\n", plan.Scope, plan.Kid, plan.Keyring, plan.Sealing)
		default:
			h.Printf("rotation to key %q (keyring %s, primary %q)\n\n", plan.Kid, plan.Keyring, plan.Primary)
		}
		for _, s := range plan.Steps {
			status := s.Status
			switch s.Status {
			case stepDone:
				status = h.Good(status)
			case stepPending:
				status = h.Warn(status)
			}
			marker := "  "
			if s.Step == plan.Next {
				marker = "→ "
			}
			h.Printf("%s%d. %-8s %s\n", marker, s.Step, status, s.Title)
			h.Printf("     %s\n", s.Detail)
			if s.Status != stepDone {
				h.Printf("     %s\n", h.Faint("$ "+s.Command))
			}
		}
		if plan.Next == 0 {
			h.Printf("\n%s\n", h.Good("the rotation is complete"))
		}
		return nil
	})
}

// sealingStep is step 2 of a sealing key's rotation: NEW becomes the
// primary, or with a scope that scope's sealing key.
func sealingStep(kr *secret.Keyring, plan *RotatePlan, kf, scopeFlag string) RotateStep {
	newKid, scope := plan.Kid, plan.Scope
	s2 := RotateStep{Step: 2, Title: "promote it to primary, then roll the keyring out to the writers", Command: "flecht keys promote " + kf + scopeFlag + " --kid " + shellQuote(newKid)}
	role := "the primary"
	if scope != "" {
		s2.Title = fmt.Sprintf("make it the sealing key of scope %q, then roll the keyring out to the writers", scope)
		role = fmt.Sprintf("the sealing key of scope %q", scope)
	}
	if plan.Sealing == newKid && (scope == "" || kr.PrimaryFor()[scope] == newKid) {
		s2.Status, s2.Detail = stepDone, fmt.Sprintf("%q is %s", newKid, role)
	} else {
		s2.Status, s2.Detail = stepPending, fmt.Sprintf("%s is %q", role, plan.Sealing)
	}
	return s2
}

// signingStep is step 2 of a signer's rotation: flenc_signing names NEW
// for every rotated scope.
func signingStep(kr *secret.Keyring, plan *RotatePlan, kf string) RotateStep {
	newKid := plan.Kid
	s2 := RotateStep{Step: 2, Title: fmt.Sprintf("make it the signing key of %s, then roll the keyring out to the writers", scopeList(plan.Scopes))}
	var cmds, pending []string
	for _, sc := range plan.Scopes {
		if plan.Signing[sc] == newKid {
			continue
		}
		cmds = append(cmds, "flecht keys signing "+kf+" --kid "+shellQuote(newKid)+" --scope "+shellQuote(sc))
		if now := plan.Signing[sc]; now != "" {
			pending = append(pending, fmt.Sprintf("scope %q is signed by %q", sc, now))
		} else {
			pending = append(pending, fmt.Sprintf("scope %q has no signing key", sc))
		}
	}
	if len(cmds) == 0 {
		s2.Status, s2.Detail = stepDone, fmt.Sprintf("%q is the signing key of %s", newKid, scopeList(plan.Scopes))
		s2.Command = "flecht keys list " + kf
	} else {
		s2.Status, s2.Detail, s2.Command = stepPending, strings.Join(pending, ", "), strings.Join(cmds, "; ")
	}
	if e, ok := kr.Entry(newKid); ok && !e.Private {
		s2.Detail += fmt.Sprintf("; this keyring holds only the public half of %q: the writers' copy needs its private half to sign", newKid)
	}
	return s2
}

// scopeList names scopes for a person: scope "a", scopes "a", "b".
func scopeList(scopes []string) string {
	if len(scopes) == 1 {
		return fmt.Sprintf("scope %q", scopes[0])
	}
	return "scopes " + textfmt.QuoteList(scopes)
}

// signersNow names the keys that sign the rotated scopes now.
func signersNow(plan *RotatePlan) string {
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
