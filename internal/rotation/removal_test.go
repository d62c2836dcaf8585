package rotation

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/flecht-dev/flecht/internal/reencrypt"
	"github.com/flecht-dev/flecht/internal/secret"
)

// The guard's refusal groups what needs the key by what the sweep can do
// with it, in that order: tokens that open (the sweep), signatures that
// verify (--resign; sealed too with --encrypt-plaintext where they are in
// the clear in an encrypted-signed field), and, located, the signatures no
// sweep moves; tokens the sweep leaves because the signature inside their
// encrypted-signed field fails are never sent to the sweep.
func TestRemovalRefusalGroupsByWhatTheSweepCanDo(t *testing.T) {
	enc, es, sig := reencrypt.ModeEncrypted, reencrypt.ModeEncryptedSigned, reencrypt.ModeSigned
	at := func(off int64, field string, e reencrypt.ScanEntry) reencrypt.ScanEntry {
		e.Topic, e.Partition, e.Offset, e.Key, e.Field, e.FieldScope = "cfg", 1, off, fmt.Sprint("r", off), field, "api"
		return e
	}
	entries := []reencrypt.ScanEntry{
		at(0, "a", reencrypt.ScanEntry{FieldMode: enc, Status: secret.StatusEncrypted, Kid: "k", Decrypt: "ok"}),
		at(1, "b", reencrypt.ScanEntry{FieldMode: es, Status: secret.StatusEncrypted, Kid: "k", Decrypt: "ok", Verify: secret.KindBadSignature, Signer: "s"}),
		at(2, "c", reencrypt.ScanEntry{FieldMode: enc, Status: secret.StatusCorrupt, Kid: "k"}),
		at(3, "d", reencrypt.ScanEntry{FieldMode: sig, Status: secret.StatusSigned, Kid: "k", Signer: "k", Verify: "verified"}),
		at(4, "e", reencrypt.ScanEntry{FieldMode: enc, Status: secret.StatusEncrypted, Kid: "o", Decrypt: "ok", Signer: "k", Verify: "verified"}),
		at(5, "f", reencrypt.ScanEntry{FieldMode: es, Status: secret.StatusSigned, Kid: "k", Signer: "k", Verify: "verified"}),
		at(6, "g", reencrypt.ScanEntry{FieldMode: enc, Status: secret.StatusEncrypted, Kid: "o", Decrypt: "ok", Signer: "k", Verify: secret.KindKeyBinding}),
		at(7, "h", reencrypt.ScanEntry{FieldMode: enc, Status: secret.StatusEncrypted, Kid: "o", Decrypt: "ok"}), // not k's
	}
	for i := range 11 {
		entries = append(entries, at(int64(100+i), "bare", reencrypt.ScanEntry{FieldMode: enc, Status: secret.StatusSigned, Kid: "k", Signer: "k"}))
	}
	rep := &reencrypt.ScanReport{Entries: entries}
	fields := []reencrypt.Field{{Path: []string{"a"}, Scope: "api"}}
	msg := Refusal(rep, "k", []string{"cfg"}, fields, "kr.json")

	lines := strings.Split(msg, "\n")
	var groups []string
	for _, l := range lines {
		if strings.HasPrefix(l, "  ") && !strings.HasPrefix(l, "      ") {
			groups = append(groups, l[2:strings.Index(l, ":")])
		}
	}
	want := []string{"1 that open", "2 signatures that verify", "1 signatures that verify, in the clear in an encrypted-signed field",
		"1 corrupt", "1 signature key_binding", "11 signed values in the clear in an encrypted field", "1 that open, holding a signature that does not verify"}
	if !strings.HasPrefix(lines[0], `refusing to remove key "k": the scan of cfg found 3 token(s) sealed with it and 15 value(s) signed with it, which could no longer be opened or verified:`) ||
		!slices.Equal(groups, want) {
		t.Fatalf("groups %q, want %q\n%s", groups, want, msg)
	}
	for _, want := range []string{
		"1 that open: sweep them to their scope's sealing key first:\n      flecht secrets reencrypt --topics cfg --field a:api --keyring kr.json --execute",
		"2 signatures that verify: sign them again with their scope's signing key first (flenc_signing; 'flecht keys signing --kid NEW --scope S' names one where none is):\n      flecht secrets reencrypt --topics cfg --field a:api --keyring kr.json --resign --execute",
		"--encrypt-plaintext --resign --execute",
		`cfg/1@100 key "r100" field bare (scope "api")`,
		"… and 1 more",
		`the key is not bound to their field's scope; the sweep cannot sign them again`,
		`cfg/1@6 key "r6" field g (scope "api", inside a token)`,
		"encrypted-signed and the signature inside fails, so the sweep leaves them",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("missing %q in\n%s", want, msg)
		}
	}
	// Only the signatures no sweep moves are located.
	for _, off := range []string{"@0 ", "@1 ", "@3 ", "@4 ", "@5 ", "@7 ", "@110 "} {
		if strings.Contains(msg, "cfg/1"+off) {
			t.Errorf("cfg/1%s is listed:\n%s", off, msg)
		}
	}
}
