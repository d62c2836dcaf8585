package cli

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/reencrypt"
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

// RotatePlan is what `flecht keys rotate-plan` prints.
type RotatePlan struct {
	Keyring string       `json:"keyring"`
	Kid     string       `json:"kid"`      // the key being rotated to
	Primary string       `json:"primary"`  // the keyring's primary now
	OldKids []string     `json:"old_kids"` // the keyring's other keys
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
		Use:   "rotate-plan --kid NEW [--metrics-url URL...] [--topics T,... --field NAME[:scope]... | -f stage.yaml]",
		Short: "Show the five rotation steps to key NEW, each with its live status",
		Long: `Show the reader-first rotation to key NEW as five steps, each checked now:

  1. add NEW to every reader's keyring   the keyring holds NEW, and every
                                          --metrics-url reports it loaded
  2. promote NEW to primary (writers)    the keyring's primary is NEW
  3. re-encrypt the stored tokens        the scan finds no token under
                                          another kid
  4. verify by a scan                    nothing under an old kid,
                                          plaintext, corrupt or unopenable
  5. retire the old keys                 the keyring holds no other key

Each step says done, pending or unknown (not checkable without
--metrics-url, or without --topics and --field / -f stage.yaml), with the
command that does or checks it; "next" is the first step not done. The
keyring is the writers' copy (--keyring or ` + EnvKeyring + `). Nothing is
changed. Exit 0 whatever the progress; 1 when a check itself fails.`,
		Example: `  flecht keys rotate-plan --keyring keyring.json --kid prod-2026-07 \
      --metrics-url 127.0.0.1:9464 --metrics-url 127.0.0.1:9465 -f extractor.yaml
  flecht keys rotate-plan --kid prod-2026-07 -f extractor.yaml -o json | jq .next`,
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
			if runF != nil {
				return runF(opts)
			}
			return runKeysRotatePlan(cmd.Context(), opts)
		},
	}
	addKeyringFlag(cmd, &opts.Keyring)
	addPasswordFileFlag(cmd, &opts.PasswordFile)
	cmd.Flags().StringVar(&opts.Kid, "kid", "", "the new key (being rotated to)")
	cmd.Flags().StringSliceVar(&opts.URLs, "metrics-url", nil, "a reader's Prometheus endpoint (repeatable)")
	opts.Targets.addFlags(cmd)
	return cmd
}

func runKeysRotatePlan(ctx context.Context, opts *KeysRotatePlanOptions) error {
	kr, err := loadKeyringForKeys(&KeysOptions{IO: opts.IO, Keyring: opts.Keyring, PasswordFile: opts.PasswordFile})
	if err != nil {
		return err
	}
	newKid := opts.Kid
	plan := &RotatePlan{Keyring: opts.Keyring, Kid: newKid, Primary: kr.Primary(), OldKids: []string{}}
	for _, k := range kr.Kids() {
		if k != newKid {
			plan.OldKids = append(plan.OldKids, k)
		}
	}
	kf := "--keyring " + shellQuote(opts.Keyring)
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
		s1.Command = "flecht keys add " + kf + " --kid " + shellQuote(newKid) + ", roll the file out to every reader, then " + s1.Command
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

	// 2. Writers seal with it.
	s2 := RotateStep{Step: 2, Title: "promote it to primary, then roll the keyring out to the writers", Command: "flecht keys promote " + kf + " --kid " + shellQuote(newKid)}
	if kr.Primary() == newKid {
		s2.Status, s2.Detail = stepDone, fmt.Sprintf("%q is the primary", newKid)
	} else {
		s2.Status, s2.Detail = stepPending, fmt.Sprintf("the primary is %q", kr.Primary())
	}

	// 3 and 4 need the topics.
	s3 := RotateStep{Step: 3, Title: "re-encrypt the stored tokens under it"}
	s4 := RotateStep{Step: 4, Title: "verify by a scan: nothing under an old kid, nothing plaintext or unreadable"}
	if !opts.Targets.given() {
		s3.Status, s3.Detail = stepUnknown, "give --topics and --field (or -f stage.yaml) to scan the stored tokens"
		s3.Command = "flecht secrets reencrypt --topics T --field NAME[:scope] " + kf + " --execute"
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
		rot := rep.Rotation(kr, newKid)
		sum := rep.Summary
		sc := &RotateScan{Topics: topics, Values: sum.Values, OldTokens: rot.OldTokens, ByOldKid: rot.ByOldKid,
			OldSigned: rot.OldSigned, ByOldSigner: rot.ByOldSigner, Plaintext: sum.Plaintext, Unsigned: sum.Unsigned,
			Corrupt: sum.Corrupt, Undecryptable: sum.Undecryptable, Unverified: sum.Unverified}
		plan.Scan = sc
		s3.Command = "flecht secrets reencrypt " + tf + " " + kf + " --execute"
		if sc.OldSigned > 0 {
			s3.Command = "flecht secrets reencrypt " + tf + " " + kf + " --resign --execute"
		}
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
		case kr.Primary() != newKid:
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
	s5 := RotateStep{Step: 5, Title: "remove the old keys from the keyring (keep them in offline escrow), roll it out"}
	if len(plan.OldKids) == 0 {
		s5.Status, s5.Detail = stepDone, fmt.Sprintf("the keyring holds only %q", newKid)
	} else {
		s5.Status, s5.Detail = stepPending, "the keyring still holds "+quoteList(plan.OldKids)
		guard := "--topics T --field NAME[:scope]"
		if plan.Scan != nil {
			topics, fields, _ := opts.Targets.resolve()
			guard = targetFlags(topics, fields)
		}
		var cmds []string
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
		h.Printf("rotation to key %q (keyring %s, primary %q)\n\n", plan.Kid, plan.Keyring, plan.Primary)
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
