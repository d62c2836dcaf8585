package show

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/flecht-dev/flecht/internal/reencrypt"
	"github.com/flecht-dev/flecht/internal/secret"
	"github.com/flecht-dev/flecht/internal/textfmt"
	"github.com/flecht-dev/flecht/internal/ui"
)

// Reencrypt shows a sweep's plan or result, and what to do next.
func Reencrypt(h *ui.Human, res *reencrypt.Result, topics []string, fields []reencrypt.Field, keyring string, retired []string) error {
	executed := res.Mode == "execute"
	t := res.Totals
	if executed {
		h.Printf("swept %s to each scope's sealing kid (%s): %s of %s records rewritten\n", strings.Join(res.Topics, ", "), targetsLine(res.Targets),
			textfmt.GroupDigits(int64(t.Written)), textfmt.GroupDigits(int64(t.Records)))
	} else {
		h.Printf("plan: rewrite %s of %s records in %s to each scope's sealing kid (%s)\n", textfmt.GroupDigits(int64(t.Rewrite)), textfmt.GroupDigits(int64(t.Records)),
			strings.Join(res.Topics, ", "), targetsLine(res.Targets))
	}
	for _, st := range res.Targets {
		if st.Error != nil {
			h.Printf("%s\n", h.Warn(fmt.Sprintf("no key can seal scope %q: %s", st.Scope, st.Error.Message)))
		}
	}
	signs := t.Unsigned > 0 || t.OldSigner > 0 || t.Values.Resign > 0
	headers := []string{"topic", "partition", "records", "rewrite", "non-primary", "scope-upgrade", "plaintext", "blocked"}
	if signs {
		headers = append(headers, "unsigned", "old-signer")
	}
	if executed {
		headers = append(headers, "written", "rereads", "foreign")
	}
	n := func(v int) string { return textfmt.GroupDigits(int64(v)) }
	var rows [][]string
	for _, p := range res.Partitions {
		row := []string{p.Topic, strconv.Itoa(int(p.Partition)), n(p.Records), n(p.Rewrite), n(p.NonPrimary), n(p.ScopeUpgrade), n(p.Plaintext), n(p.Blocked)}
		if signs {
			row = append(row, n(p.Unsigned), n(p.OldSigner))
		}
		if executed {
			row = append(row, n(p.Written), n(p.Rereads), n(p.ForeignRecords))
		}
		rows = append(rows, row)
	}
	h.Table(headers, rows)
	if len(res.Blocked) > 0 {
		h.Printf("\n%s\n", h.Warn("values the sweep cannot rewrite (left as they are):"))
		var brows [][]string
		for _, b := range res.Blocked {
			brows = append(brows, []string{b.Topic, strconv.Itoa(int(b.Partition)), strconv.FormatInt(b.Offset, 10), b.Key, b.Field, b.Error.Message})
		}
		h.Table([]string{"topic", "partition", "offset", "key", "field", "why"}, brows)
		if res.BlockedMore > 0 {
			h.Printf("… and %d more (-o json lists the first %d)\n", res.BlockedMore, len(res.Blocked))
		}
	}
	if t.Plaintext > 0 && !res.EncryptPlaintext {
		h.Printf("\nrecords holding values in the clear: %s; they are left alone (--encrypt-plaintext encrypts those their field allows)\n", n(t.Plaintext))
	}
	if t.Values.UnsignedLeft > 0 {
		h.Printf("\nunsigned values in signed fields: %s; left alone, the sweep never signs: have their writers sign them ('flecht secrets sign')\n", n(t.Values.UnsignedLeft))
	}
	if t.Values.OldSignerLeft > 0 {
		h.Printf("\nsignatures by an old signer: %s; left alone (--resign signs them again with the scope's signing key)\n", n(t.Values.OldSignerLeft))
	}
	if res.Reminder != "" {
		h.Printf("\n%s\n", h.Warn("reminder: "+res.Reminder))
	}
	if !executed {
		h.Printf("\n%s\n", h.Faint("dry run: nothing was written; run again with --execute"))
		return nil
	}
	h.Printf("\n%d transactions committed", res.Transactions)
	if res.Aborted > 0 {
		h.Printf(", %d aborted because another writer appended to a partition meanwhile", res.Aborted)
	}
	h.Printf("\n")
	for _, p := range res.Partitions {
		if p.Rereads > 0 {
			h.Printf("re-swept %s/%d: re-read %d times, found %d records of another writer, %d of them still holding tokens to sweep",
				p.Topic, p.Partition, p.Rereads, p.ForeignRecords, p.Resweep)
			if p.Restored > 0 {
				h.Printf(", %d edits re-produced", p.Restored)
			}
			h.Printf("\n")
		}
	}
	v := res.Verification
	if v == nil {
		return nil
	}
	if v.Clean {
		h.Printf("%s\n", h.Good(fmt.Sprintf("verified by a scan: every token is under its scope's sealing kid (%s) and opens, every signature verifies (%s values in %s records)",
			targetsLine(v.Targets), n(v.Values), n(v.Records))))
		h.Printf("%s\n", h.Faint(removeHint(retired, topics, fields, keyring)))
	} else {
		var parts []string
		add := func(c int, what string) {
			if c > 0 {
				parts = append(parts, fmt.Sprintf("%d %s", c, what))
			}
		}
		add(v.NonPrimary, "tokens not under their scope's sealing kid")
		add(v.Undecryptable, "tokens that do not open")
		add(v.Unverified, "signatures that do not verify")
		add(v.Corrupt, "corrupt values")
		if res.Resign {
			add(v.OldSigner, "signatures by an old signer")
		}
		h.Printf("%s\n", h.Bad("verification failed: "+strings.Join(parts, ", ")+" ('flecht secrets scan --findings-only' lists them)"))
	}
	if v.Plaintext > 0 || v.Unsigned > 0 {
		h.Printf("%s\n", h.Warn(fmt.Sprintf("the scan also found %d values in the clear and %d unsigned values, left by rule ('flecht secrets scan' lists them)", v.Plaintext, v.Unsigned)))
	}
	return nil
}

// targetsLine names each scope's sealing kid: "pay → x2, unscoped → o2".
func targetsLine(targets []reencrypt.ScopeTarget) string {
	parts := make([]string, 0, len(targets))
	for _, t := range targets {
		scope := t.Scope
		if scope == "" {
			scope = "unscoped"
		}
		kid := strconv.Quote(t.Sealing)
		if t.Error != nil {
			kid = "none (" + string(t.Error.Kind) + ")"
		}
		parts = append(parts, scope+" → "+kid)
	}
	return strings.Join(parts, ", ")
}

// removeHint is the next step after a clean sweep: the command that
// removes the retired keys, one by one, guarded by a scan.
func removeHint(retired, topics []string, fields []reencrypt.Field, keyring string) string {
	tail := " " + reencrypt.TargetFlags(topics, fields) + " --keyring " + textfmt.ShellQuote(keyring)
	if len(retired) == 0 {
		return "next: no key is left without a role; remove a retired one, guarded by a scan, with flecht keys remove --kid KID" + tail
	}
	cmds := make([]string, len(retired))
	for i, kid := range retired {
		cmds[i] = "flecht keys remove --kid " + textfmt.ShellQuote(kid) + tail
	}
	return "next: remove the old keys, guarded by a scan: " + strings.Join(cmds, "; ")
}

// Scan shows what a scan found of each secret value, by outcome.
func Scan(h *ui.Human, rep *reencrypt.ScanReport) error {
	withKeyring := rep.Primary != ""
	// The verify and signer columns only when a field signs.
	var verifies, innerSigner bool
	for _, e := range rep.Entries {
		verifies = verifies || e.Verify != ""
		innerSigner = innerSigner || (e.Signer != "" && e.Signer != e.Kid)
	}
	headers := []string{"topic", "partition", "offset", "key", "field", "status", "kid", "scope"}
	if withKeyring {
		headers = append(headers, "decrypt")
	}
	if verifies {
		headers = append(headers, "verify")
	}
	if innerSigner {
		headers = append(headers, "signer")
	}
	headers = append(headers, "detail")
	bad := func(k secret.Kind, ok secret.Kind) string {
		if k != "" && k != ok {
			return h.Bad(string(k))
		}
		return string(k)
	}
	rows := make([][]string, 0, len(rep.Entries))
	for _, e := range rep.Entries {
		status := string(e.Status)
		if e.Finding() {
			status = h.Bad(status)
		}
		kid := e.Kid
		if e.Stale(withKeyring) || (e.Status == secret.StatusSigned && e.OldSigner()) {
			kid += " (old)"
		}
		row := []string{e.Topic, strconv.Itoa(int(e.Partition)), strconv.FormatInt(e.Offset, 10), displayKey(e.Key, e.KeyBase64), e.Field, status, kid, e.Scope}
		if withKeyring {
			row = append(row, bad(e.Decrypt, reencrypt.DecryptOK))
		}
		if verifies {
			row = append(row, bad(e.Verify, reencrypt.VerifyOK))
		}
		if innerSigner {
			signer := ""
			if e.Signer != e.Kid {
				signer = e.Signer
				if e.OldSigner() {
					signer += " (old)"
				}
			}
			row = append(row, signer)
		}
		row = append(row, entryDetail(e))
		rows = append(rows, row)
	}
	if len(rows) > 0 || rep.Summary.Values == 0 {
		h.Table(headers, rows)
		h.Printf("\n")
	}
	kidRows := make([][]string, len(rep.Summary.ByKid))
	for i, k := range rep.Summary.ByKid {
		kid := k.Kid
		if kid == "" {
			kid = "-"
		}
		if rep.Primary != "" && k.Kid == rep.Primary {
			kid += " (primary)"
		}
		kidRows[i] = []string{kid, string(k.Status), textfmt.GroupDigits(int64(k.Count))}
	}
	h.Table([]string{"kid", "status", "values"}, kidRows)
	if len(rep.Summary.BySigner) > 0 {
		signerRows := make([][]string, len(rep.Summary.BySigner))
		for i, k := range rep.Summary.BySigner {
			verify := string(k.Verify)
			if verify == "" {
				verify = "-"
			}
			signerRows[i] = []string{k.Kid, verify, textfmt.GroupDigits(int64(k.Count))}
		}
		h.Printf("\n")
		h.Table([]string{"signer", "verify", "signatures"}, signerRows)
	}
	if len(rep.Targets) > 0 {
		h.Printf("\n")
		h.Table([]string{"scope", "sealing kid", "signing kid"}, targetRows(rep.Targets))
	}
	s := rep.Summary
	h.Printf("\n%s values in %s records of %s\n", textfmt.GroupDigits(int64(s.Values)), textfmt.GroupDigits(int64(s.Records)), strings.Join(rep.Topics, ", "))
	if s.Stale > 0 || s.OldSigner > 0 {
		h.Printf("%s\n", h.Warn(fmt.Sprintf("%d tokens not under their scope's sealing kid, %d signatures by an old signer ('flecht secrets reencrypt' moves them)", s.Stale, s.OldSigner)))
	}
	if rep.Clean {
		h.Printf("%s\n", h.Good("clean: every value is a token or signed value that "+map[bool]string{true: "opens and verifies", false: "parses"}[withKeyring]))
		return nil
	}
	var parts []string
	add := func(n int, what string) {
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, what))
		}
	}
	add(s.Plaintext, "plaintext")
	add(s.Unsigned, "unsigned")
	add(s.Corrupt, "corrupt")
	if withKeyring {
		add(s.Undecryptable, "that do not open")
		add(s.Unverified, "whose signature does not verify")
	} else {
		add(s.Undecryptable+s.Unverified, "in the wrong scope")
	}
	h.Printf("%s\n", h.Bad("findings: "+strings.Join(parts, ", ")))
	if s.Plaintext > 0 {
		h.Printf("%s\n", h.Faint("a plaintext value in a secret field was disclosed: rotate it at its source, then encrypt it ('flecht secrets reencrypt --encrypt-plaintext')"))
	}
	if s.Unsigned > 0 {
		h.Printf("%s\n", h.Faint("an unsigned value in a signed field is refused by its readers: have its writer sign it ('flecht secrets sign'); the sweep never signs"))
	}
	return nil
}

// targetRows lists each scope's sealing and signing kid.
func targetRows(targets []reencrypt.ScopeTarget) [][]string {
	rows := make([][]string, len(targets))
	for i, t := range targets {
		scope, sealing, signing := t.Scope, t.Sealing, t.Signing
		if scope == "" {
			scope = "(unscoped)"
		}
		if t.Error != nil {
			sealing = "none: " + t.Error.Message
		}
		if signing == "" {
			signing = "-"
		}
		rows[i] = []string{scope, sealing, signing}
	}
	return rows
}

func entryDetail(e reencrypt.ScanEntry) string {
	switch {
	case e.Plaintext != nil && e.Problem == secret.KindUnsigned:
		return fmt.Sprintf("unsigned in a signed field: %s chars, fingerprint %s", e.Plaintext.LengthRange, e.Plaintext.Fingerprint)
	case e.Plaintext != nil:
		return fmt.Sprintf("%s chars, fingerprint %s", e.Plaintext.LengthRange, e.Plaintext.Fingerprint)
	case e.Error != nil:
		return e.Error.Message
	}
	return ""
}

func displayKey(key, b64 string) string {
	if b64 != "" {
		return "base64:" + b64
	}
	return strconv.Quote(key)[1 : len(strconv.Quote(key))-1]
}
