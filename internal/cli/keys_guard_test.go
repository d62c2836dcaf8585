package cli

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/reencrypt"
	"github.com/flecht-dev/flecht/internal/rotation"
	"github.com/flecht-dev/flecht/internal/secret"
)

// save writes the fixture's keyring after an edit.
func (fx *secretsFixture) save(t *testing.T, kr *secret.Keyring, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	fx.kr = kr
	if err := kr.Save(fx.keyring); err != nil {
		t.Fatal(err)
	}
}

func (fx *secretsFixture) sign(t *testing.T, payload, scope string) string {
	t.Helper()
	tok, err := fx.kr.Sign([]byte(payload), scope)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// The remove guard refuses while a value the key signed is stored, bare or
// sealed inside a token, whatever mode its field is declared with (here
// the default, encrypted): a verified signature inside a token is one the
// --resign sweep moves, and following that advice works; a signed value in
// the clear, or a signature that does not verify, is located with what to
// do. Once every value is signed by the new signer, the old one goes.
func TestKeysRemoveGuardCountsSignedValues(t *testing.T) {
	fx := newSecretsFixture(t) // oct old (primary), new
	kr, err := fx.kr.Generate("sig", secret.TypeEd25519, []string{"api"})
	if err == nil {
		kr, err = kr.SetSigningFor("api", "sig")
	}
	fx.save(t, kr, err)
	bare := fx.sign(t, `"https://hooks.example/1"`, "api")
	inner, _ := json.Marshal(fx.sign(t, `"sk-live-1"`, "api"))
	fx.put(t, 0, "bare", `{"endpoint":`+strconv.Quote(bare)+`}`)
	fx.put(t, 1, "sealed", `{"api_key":"`+fx.token(t, string(inner), "api")+`"}`)
	// Signed for scope api, sealed into a field of scope memo: through its
	// field's scope it does not verify, and no sweep can re-sign it.
	fx.put(t, 2, "memo", `{"memo":"`+fx.token(t, string(inner), "memo")+`"}`)
	// The signing role moves to a new key; the old signer still verifies
	// what is stored.
	kr, err = fx.kr.Generate("sig2", secret.TypeEd25519, []string{"api"})
	if err == nil {
		kr, err = kr.SetSigningFor("api", "sig2")
	}
	fx.save(t, kr, err)
	target := []string{"--topics", "cfg", "--field", "endpoint:api", "--field", "api_key:api", "--field", "memo:memo"}

	r := run(t, fx.env, "", append([]string{"keys", "remove", "--kid", "sig"}, target...)...)
	for _, want := range []string{
		"found 3 value(s) signed with it, which could no longer be verified",
		"1 signatures that verify: sign them again",
		"--resign --execute",
		"1 signed values in the clear in an encrypted field",
		`cfg/0@0 key "bare" field endpoint (scope "api")`,
		"1 signature scope_violation: signed for another scope",
		`cfg/2@0 key "memo" field memo (scope "memo", inside a token)`,
		"flecht secrets sign --scope S",
	} {
		if r.code != exitcode.Refused || !strings.Contains(r.err, want) || strings.Contains(r.err, "token(s) sealed") {
			t.Fatalf("guarded remove of a signer: exit %d, want 3 and %q\n%s", r.code, want, r.err)
		}
	}
	if strings.Contains(r.err, `key "sealed"`) {
		t.Errorf("the verified signature is the sweep's, yet it is listed:\n%s", r.err)
	}
	if !fx.kr.Has("sig") {
		t.Fatal("refused, yet removed")
	}
	// A sealing key's removal is not held up by what its tokens carry, nor
	// is a signer's by tokens under other kids.
	fx.promote(t, "new")
	r = run(t, fx.env, "", append([]string{"keys", "remove", "--kid", "old"}, target...)...)
	if r.code != exitcode.Refused || !strings.Contains(r.err, "found 2 token(s) sealed with it, which could no longer be opened:") || strings.Contains(r.err, "signed with it") {
		t.Errorf("guarded remove of the sealing key: exit %d\n%s", r.code, r.err)
	}

	// The advice for the verified one: the --resign sweep signs it again
	// with sig2 (and seals it under the primary, new).
	// Its next step names the keys left without a role, not a placeholder.
	if r := run(t, fx.env, "", append([]string{"secrets", "reencrypt", "--resign", "--execute"}, target...)...); r.code != 0 || !strings.Contains(r.out, "verified by a scan") ||
		!strings.Contains(r.out, "flecht keys remove --kid old ") || strings.Contains(r.out, "--kid OLD") {
		t.Fatalf("--resign sweep: exit %d\n%s%s", r.code, r.out, r.err)
	}
	rep := scanReport(t, fx, target)
	for _, e := range rep.Entries {
		if e.Key == "sealed" && (e.Kid != "new" || e.Signer != "sig2" || e.Verify != "verified") {
			t.Errorf("after --resign: %+v", e)
		}
	}
	r = run(t, fx.env, "", append([]string{"keys", "remove", "--kid", "sig"}, target...)...)
	if r.code != exitcode.Refused || !strings.Contains(r.err, "found 2 value(s) signed with it") || strings.Contains(r.err, "signatures that verify") {
		t.Fatalf("guarded remove after --resign: exit %d\n%s", r.code, r.err)
	}

	// Re-written signed by sig2, the old signer goes.
	fx.put(t, 0, "bare", `{"endpoint":`+strconv.Quote(fx.sign(t, `"https://hooks.example/1"`, "api"))+`}`)
	fx.put(t, 2, "memo", `{"memo":"`+fx.token(t, `"no longer signed"`, "memo")+`"}`)
	r = run(t, fx.env, "", append([]string{"keys", "remove", "--kid", "sig", "-o", "json"}, target...)...)
	if r.code != 0 || !strings.Contains(r.out, `"action": "removed"`) {
		t.Fatalf("remove after re-signing: exit %d %q\n%s", r.code, r.err, r.out)
	}
}

// scanReport is `secrets scan -o json` over target, with the fixture's
// keyring.
func scanReport(t *testing.T, fx *secretsFixture, target []string) reencrypt.ScanReport {
	t.Helper()
	r := run(t, fx.env, "", append([]string{"secrets", "scan", "-o", "json"}, target...)...)
	var rep reencrypt.ScanReport
	if err := json.Unmarshal([]byte(r.out), &rep); err != nil {
		t.Fatalf("scan: exit %d %v\n%s", r.code, err, r.err)
	}
	return rep
}

// rotate-plan --scope follows one scope's rotation: its sealing key, its
// fields' tokens; the other scopes' tokens and keys are left out.
func TestKeysRotatePlanPerScope(t *testing.T) {
	fx := newSecretsFixture(t) // oct old (primary), new
	kr, err := fx.kr.Generate("rx", secret.TypeX25519, []string{"api"})
	if err == nil {
		kr, err = kr.Remove("new")
	}
	fx.save(t, kr, err)
	for i := range 4 {
		fx.put(t, int32(i%3), fmt.Sprint("c", i), fmt.Sprintf(`{"api_key":"%s","db":"%s"}`,
			fx.token(t, `"a"`, "api"), fx.token(t, `"d"`, "db")))
	}
	target := []string{"--topics", "cfg", "--field", "api_key:api", "--field", "db:db"}
	plan := func() (rotation.Plan, string) {
		t.Helper()
		r := run(t, fx.env, "", append([]string{"keys", "rotate-plan", "--kid", "rx", "--scope", "api", "-o", "json"}, target...)...)
		if r.code != 0 {
			t.Fatalf("exit %d %s", r.code, r.err)
		}
		var p rotation.Plan
		if err := json.Unmarshal([]byte(r.out), &p); err != nil {
			t.Fatal(err)
		}
		var s []string
		for _, st := range p.Steps {
			s = append(s, st.Status)
		}
		return p, strings.Join(s, " ")
	}
	p, s := plan()
	if s != "unknown pending pending pending done" || p.Scope != "api" || p.Sealing != "old" || p.Scan.OldTokens != 4 ||
		!strings.Contains(p.Steps[1].Command, "flecht keys promote --keyring "+fx.keyring+" --scope api --kid rx") ||
		!strings.Contains(p.Steps[1].Detail, `the sealing key of scope "api" is "old"`) {
		t.Fatalf("before: %s %+v %+v", s, p.Steps[1], p.Scan)
	}
	// "old" stays: it is the primary, which this rotation leaves alone.
	if len(p.OldKids) != 0 {
		t.Errorf("old kids %q", p.OldKids)
	}
	mustRun(t, fx.env, "", "keys", "promote", "--kid", "rx", "--scope", "api")
	if p, s = plan(); s != "unknown done pending pending done" || p.Sealing != "rx" {
		t.Fatalf("promoted: %s", s)
	}
	// The sweep moves the api tokens to rx. (Its own verification and
	// exit code are the sweep's tests' concern; today it still expects
	// every token under the primary, see the report.)
	run(t, fx.env, "", append([]string{"secrets", "reencrypt", "--execute"}, target...)...)
	if p, s = plan(); s != "unknown done done done done" || p.Next != 1 {
		t.Fatalf("swept: %s %+v", s, p.Steps)
	}
	// Step 1 reads the readers' gauge, whatever the key's kind.
	r := run(t, fx.env, "", append([]string{"keys", "rotate-plan", "--kid", "rx", "--scope", "api", "-o", "json",
		"--metrics-url", reader(t, "old", "rx", "sg-elsewhere")}, target...)...)
	var withReaders rotation.Plan
	if err := json.Unmarshal([]byte(r.out), &withReaders); err != nil || withReaders.Steps[0].Status != "done" || withReaders.Next != 0 {
		t.Errorf("with a reader holding the x25519 key: %v %+v", err, withReaders.Steps)
	}
	// The tokens of scope db stayed under the primary.
	r = mustRun(t, fx.env, "", append([]string{"secrets", "scan", "-o", "json"}, target...)...)
	if !strings.Contains(r.out, `"kid": "old"`) || !strings.Contains(r.out, `"kid": "rx"`) {
		t.Errorf("scan after a per-scope sweep:\n%s", r.out)
	}
	// A signing key's plan is its own (TestKeysRotatePlanSigner); its
	// --scope must be one of its binding.
	mustRun(t, fx.env, "", "keys", "add", "--kid", "sg", "--type", "ed25519", "--scope", "api")
	if r := run(t, fx.env, "", "keys", "rotate-plan", "--kid", "sg", "--scope", "db"); r.code != exitcode.Usage || !strings.Contains(r.err, `bound to "api", not to scope "db"`) {
		t.Errorf("rotate-plan of a signer for a scope outside its binding: exit %d %q", r.code, r.err)
	}
}
