package rotation

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/reencrypt"
	"github.com/flecht-dev/flecht/internal/secret"
	"github.com/flecht-dev/flecht/internal/textfmt"
)

// CheckRemoval refuses (exit 3) the removal of kid while the scan found
// values that need it, explaining what to do about them (Refusal).
func CheckRemoval(rep *reencrypt.ScanReport, kid string, topics []string, fields []reencrypt.Field, keyring string) error {
	if rep.TokensUnder(kid) == 0 {
		return nil
	}
	return exitcode.RefusedError(errors.New(Refusal(rep, kid, topics, fields, keyring)))
}

// Refusal explains a refused removal: how many values need kid, as
// sealing key and as signer, and what to do about each group of them.
func Refusal(rep *reencrypt.ScanReport, kid string, topics []string, fields []reencrypt.Field, keyring string) string {
	sealed, signed := 0, 0
	for _, u := range rep.UsesOf(kid) {
		if u.As == reencrypt.UseSealing {
			sealed += u.Count
		} else {
			signed += u.Count
		}
	}
	var found []string
	lost := "opened"
	if sealed > 0 {
		found = append(found, fmt.Sprintf("%d token(s) sealed with it", sealed))
	}
	if signed > 0 {
		found = append(found, fmt.Sprintf("%d value(s) signed with it", signed))
		lost = "verified"
		if sealed > 0 {
			lost = "opened or verified"
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "refusing to remove key %q: the scan of %s found %s, which could no longer be %s:",
		kid, strings.Join(topics, ", "), strings.Join(found, " and "), lost)
	for _, g := range tokensUnderByOutcome(rep, kid) {
		fmt.Fprintf(&b, "\n  %d %s: %s", len(g.entries), g.outcome, removalAdvice(g.outcome, kid, topics, fields, keyring))
		if listsPlaces(g.outcome) {
			writePlaces(&b, g.entries)
		}
	}
	return b.String()
}

// Outcomes of the values under a kid, beside the failing kinds: the tokens
// that open (the sweep moves them, unless the signature inside an
// encrypted-signed one fails), the signatures that verify (--resign moves
// them; those in the clear in an encrypted-signed field once sealed too),
// and the signed values in the clear in an encrypted field, which no sweep
// re-signs.
const (
	outcomeOpen          = "that open"
	outcomeOpenBadInside = "that open, holding a signature that does not verify"
	outcomeVerified      = "signatures that verify"
	outcomeVerifiedClear = "signatures that verify, in the clear in an encrypted-signed field"
	outcomeSignedInClear = "signed values in the clear in an encrypted field"
	outcomeSignaturePre  = "signature " // + the failing kind: "signature bad_signature"
)

// outcomeCount is the values under a kid with one scan outcome.
type outcomeCount struct {
	outcome string
	entries []reencrypt.ScanEntry
}

// tokensUnderByOutcome groups the values that depend on kid by what the
// scan says of them (reencrypt.ScanEntry.Use): outcomeOpen, outcomeVerified,
// outcomeVerifiedClear, outcomeOpenBadInside, outcomeSignedInClear, a failing kind
// ("signature KIND" for a signer's), or "corrupt"; in that order, failures
// by name.
func tokensUnderByOutcome(rep *reencrypt.ScanReport, kid string) []outcomeCount {
	groups := map[string][]reencrypt.ScanEntry{}
	for _, e := range rep.Entries {
		u, ok := e.Use(kid)
		if !ok {
			continue
		}
		o := u.Outcome
		switch {
		case u.As == reencrypt.UseSealing && o == string(reencrypt.DecryptOK) && e.FieldMode == reencrypt.ModeEncryptedSigned &&
			e.Verify != "" && e.Verify != reencrypt.VerifyOK && e.Verify != secret.KindUnsigned:
			// The sweep blocks these: their field reads the signature.
			o = outcomeOpenBadInside
		case u.As == reencrypt.UseSealing && o == string(reencrypt.DecryptOK):
			o = outcomeOpen
		case u.As == reencrypt.UseSigner && o == string(reencrypt.VerifyOK) && e.Status == secret.StatusSigned && e.FieldMode == reencrypt.ModeEncryptedSigned:
			o = outcomeVerifiedClear
		case u.As == reencrypt.UseSigner && o == string(reencrypt.VerifyOK):
			o = outcomeVerified
		case u.As == reencrypt.UseSigner && o == "":
			// Judged with the keyring, only a signed value in the clear in
			// an encrypted field goes unverified: its field does not sign.
			o = outcomeSignedInClear
		case u.As == reencrypt.UseSigner && o != "corrupt":
			o = outcomeSignaturePre + o
		}
		groups[o] = append(groups[o], e)
	}
	rank := func(o string) int {
		switch o {
		case outcomeOpen:
			return 0
		case outcomeVerified:
			return 1
		case outcomeVerifiedClear:
			return 2
		}
		return 3
	}
	out := make([]outcomeCount, 0, len(groups))
	for o, es := range groups {
		out = append(out, outcomeCount{o, es})
	}
	slices.SortFunc(out, func(a, b outcomeCount) int {
		if c := rank(a.outcome) - rank(b.outcome); c != 0 {
			return c
		}
		return strings.Compare(a.outcome, b.outcome)
	})
	return out
}

// listsPlaces reports whether the refusal lists where the values of an
// outcome are: signatures no sweep moves, which a scan's findings do not
// always show (a signature inside a token of an encrypted field is none).
func listsPlaces(outcome string) bool {
	return outcome == outcomeSignedInClear || strings.HasPrefix(outcome, outcomeSignaturePre)
}

// writePlaces lists where values are stored, the first ten of them.
func writePlaces(b *strings.Builder, entries []reencrypt.ScanEntry) {
	const show = 10
	for i, e := range entries {
		if i == show {
			fmt.Fprintf(b, "\n      … and %d more", len(entries)-show)
			return
		}
		key := strconv.Quote(e.Key)
		if e.KeyBase64 != "" {
			key = "base64:" + e.KeyBase64
		}
		where := ""
		if e.Status == secret.StatusEncrypted {
			where = ", inside a token"
		}
		fmt.Fprintf(b, "\n      %s/%d@%d key %s field %s (scope %q%s)", textfmt.Escape(e.Topic), e.Partition, e.Offset, key, textfmt.Escape(e.Field), e.FieldScope, where)
	}
}

// signatureFailures says why a signature that does not verify even now
// fails, by kind.
var signatureFailures = map[string]string{
	string(secret.KindBadSignature):   "altered since they were signed, or signed by other key bytes than this keyring's",
	string(secret.KindScopeViolation): "signed for another scope than their field's",
	string(secret.KindKeyBinding):     "the key is not bound to their field's scope",
}

// removalAdvice says what to do about values of one outcome. Only tokens
// that open and signatures that verify can be swept; suggesting the sweep
// for the others would send the operator in a loop, since it leaves them
// as they are.
func removalAdvice(outcome, kid string, topics []string, fields []reencrypt.Field, keyring string) string {
	tf := reencrypt.TargetFlags(topics, fields)
	scan := "flecht secrets scan " + tf + " --keyring " + textfmt.ShellQuote(keyring) + " --findings-only"
	resign := "flecht secrets reencrypt " + tf + " --keyring " + textfmt.ShellQuote(keyring)
	rewrite := "re-write each with a value signed by its scope's signing key ('flecht secrets sign --scope S VALUE', " +
		"sealed with 'flecht secrets encrypt --scope S' where it sits inside a token), or delete it; they are at"
	switch {
	case outcome == outcomeOpen:
		return "sweep them to their scope's sealing key first:\n      flecht secrets reencrypt " + tf + " --keyring " + textfmt.ShellQuote(keyring) + " --execute"
	case outcome == outcomeVerified:
		return "sign them again with their scope's signing key first (flenc_signing; 'flecht keys signing --kid NEW --scope S' names one " +
			"where none is):\n      " + resign + " --resign --execute"
	case outcome == outcomeOpenBadInside:
		return "their field is encrypted-signed and the signature inside fails, so the sweep leaves them. Find them (" + scan +
			") and re-write each with a value signed by its scope's signing key, sealed ('flecht secrets sign --scope S VALUE', then " +
			"'flecht secrets encrypt --scope S'), or delete it"
	case outcome == outcomeVerifiedClear:
		return "seal them and sign them again with their scope's signing key first:\n      " + resign + " --encrypt-plaintext --resign --execute"
	case outcome == outcomeSignedInClear:
		return "an ENCRYPTED reader refuses them as plaintext, and no sweep re-signs a value in the clear there. If their stage reads " +
			"the field as SIGNED, declare it NAME:scope:signed and sweep with --resign; else " + rewrite
	case strings.HasPrefix(outcome, outcomeSignaturePre):
		kind := strings.TrimPrefix(outcome, outcomeSignaturePre)
		why := signatureFailures[kind]
		if why == "" {
			why = "they do not verify even now"
		}
		return why + "; the sweep cannot sign them again: " + rewrite
	case outcome == string(secret.KindScopeViolation):
		return "in a field of another scope, which refuses them; the sweep cannot move them. Find them (" + scan +
			") and re-write each record with a token of its field's scope, or delete it"
	case outcome == string(secret.KindTagMismatch):
		return fmt.Sprintf("this keyring's key %q has other bytes than the one that sealed them, or they were altered; the sweep cannot open them. "+
			"Find them (%s), then recover the keyring that sealed them or re-write each record", kid, scan)
	case outcome == string(secret.KindUnknownKid):
		return "the keyring lacks their key; the sweep cannot open them. Add the key from the keyring that sealed them, or re-write each record"
	default:
		return "they cannot be read; the sweep cannot move them. Find them (" + scan + ") and re-write or delete each record"
	}
}
