package cli

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/reencrypt"
	"github.com/flecht-dev/flecht/internal/rotation"
	"github.com/flecht-dev/flecht/internal/secret"
)

// use017 puts a 0.17 keyring in the fixture's file: oct "old" and "new"
// (primary new), X25519 x1 then x2 sealing scope pay, Ed25519 s1 then s2
// signing it. It returns the keyring as writers had it before (old, x1,
// s1) to seal and sign the stored values with.
func (fx *secretsFixture) use017(t *testing.T) (before *secret.Keyring) {
	t.Helper()
	must := func(kr *secret.Keyring, err error) *secret.Keyring {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return kr
	}
	kr := must(fx.kr.Generate("x1", secret.TypeX25519, []string{"pay"}))
	kr = must(kr.Generate("x2", secret.TypeX25519, []string{"pay"}))
	kr = must(kr.Generate("s1", secret.TypeEd25519, []string{"pay"}))
	kr = must(kr.Generate("s2", secret.TypeEd25519, []string{"pay"}))
	kr = must(kr.SetPrimaryFor("pay", "x1"))
	before = must(kr.SetSigningFor("pay", "s1"))
	kr = must(before.Promote("new"))
	kr = must(kr.SetPrimaryFor("pay", "x2"))
	fx.kr = must(kr.SetSigningFor("pay", "s2"))
	if err := fx.kr.Save(fx.keyring); err != nil {
		t.Fatal(err)
	}
	return before
}

func signFor(t *testing.T, kr *secret.Keyring, payload, scope string) string {
	t.Helper()
	tok, err := kr.Sign([]byte(payload), scope)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func sealFor(t *testing.T, kr *secret.Keyring, payload, scope string) string {
	t.Helper()
	tok, err := kr.Encrypt([]byte(payload), scope)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func jsonQ(s string) string { b, _ := json.Marshal(s); return string(b) }

var fields017 = []string{"--field", "api_key:pay", "--field", "endpoint:pay:signed", "--field", "webhook:pay:encrypted-signed"}

// The scan through the CLI on 0.17 data: signed values are their own
// status with their signer and verdict, an encrypted-signed token's inner
// signature is verified, each scope's target is named, and a value that
// cannot be judged fails the gate.
func TestSecretsScan017(t *testing.T) {
	fx := newSecretsFixture(t)
	before := fx.use017(t)
	fx.put(t, 0, "a", `{"api_key":`+jsonQ(sealFor(t, before, `"k"`, "pay"))+`,"endpoint":`+jsonQ(signFor(t, before, `"https://api"`, "pay"))+
		`,"webhook":`+jsonQ(sealFor(t, before, jsonQ(signFor(t, before, `"w"`, "pay")), "pay"))+`}`)
	fx.put(t, 1, "b", `{"api_key":`+jsonQ(sealFor(t, fx.kr, `"k"`, "pay"))+`,"endpoint":"https://UNSIGNED-endpoint"}`)

	args := append([]string{"secrets", "scan", "--topics", "cfg"}, fields017...)
	r := run(t, fx.env, "", append(args, "-o", "json")...)
	if r.code != exitcode.Findings {
		t.Fatalf("exit %d, want 4 (the unsigned endpoint): %s", r.code, r.err)
	}
	var rep reencrypt.ScanReport
	if err := json.Unmarshal([]byte(r.out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, r.out)
	}
	got := map[string]string{}
	for _, e := range rep.Entries {
		got[e.Key+"/"+e.Field] = strings.Join([]string{string(e.Status), e.Kid, e.Alg, string(e.Decrypt), string(e.Verify), e.Signer, e.TargetKid, e.TargetSigner, string(e.Problem)}, " ")
	}
	want := map[string]string{
		"a/api_key":  "encrypted x1 ECDH-ES+A256KW ok   x2  ",
		"a/endpoint": "signed s1 Ed25519  verified s1  s2 ",
		"a/webhook":  "encrypted x1 ECDH-ES+A256KW ok verified s1 x2 s2 ",
		"b/api_key":  "encrypted x2 ECDH-ES+A256KW ok   x2  ",
		"b/endpoint": "plaintext        unsigned",
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s:\n got %q\nwant %q", k, got[k], w)
		}
	}
	if s := rep.Summary; s.Unsigned != 1 || s.Findings != 1 || s.Stale != 2 || s.OldSigner != 2 || s.ByStatus[secret.StatusSigned] != 1 {
		t.Errorf("summary %+v", s)
	}
	if len(rep.Targets) != 1 || rep.Targets[0] != (reencrypt.ScopeTarget{Scope: "pay", Sealing: "x2", Signing: "s2"}) {
		t.Errorf("targets %+v", rep.Targets)
	}
	table := run(t, fx.env, "", args...)
	for _, want := range []string{"signed", "verified", "unsigned", "x1 (old)", "s1 (old)", "sealing kid", "x2", "findings: 1 unsigned", "the sweep never signs", "unsigned in a signed field: 17-32 chars"} {
		if !strings.Contains(table.out, want) {
			t.Errorf("table lacks %q:\n%s", want, table.out)
		}
	}
	if strings.Contains(table.out+r.out, "UNSIGNED-endpoint") {
		t.Error("a plaintext value was printed")
	}
	// Without the unsigned value the scan is clean; with a keyring that
	// lacks s1, a1's signatures cannot be judged, so it is not.
	fx.put(t, 1, "b", "")
	if r := run(t, fx.env, "", args...); r.code != 0 {
		t.Fatalf("scan without the unsigned value: exit %d\n%s", r.code, r.out)
	}
	lacking, err := fx.kr.Remove("s1")
	if err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(t.TempDir(), "keyring.json")
	if err := lacking.Save(other); err != nil {
		t.Fatal(err)
	}
	r = run(t, fx.env, "", append(args, "--keyring", other, "-o", "json")...)
	rep = reencrypt.ScanReport{}
	if err := json.Unmarshal([]byte(r.out), &rep); err != nil || r.code != exitcode.Findings || rep.Summary.Unverified != 2 || rep.Summary.ByVerify[secret.KindUnknownSigner] != 2 {
		t.Errorf("a keyring lacking the signer: exit %d %v %+v", r.code, err, rep.Summary)
	}
}

// The sweep through the CLI targets each scope's sealing key, keeps
// signatures unless --resign, re-signs with it, and exits 4 while an
// ECDH-ES token under an unknown kid remains.
func TestReencrypt017(t *testing.T) {
	fx := newSecretsFixture(t)
	before := fx.use017(t)
	inner := signFor(t, before, `"w"`, "pay")
	fx.put(t, 0, "a", `{"api_key":`+jsonQ(sealFor(t, before, `"k"`, "pay"))+`,"endpoint":`+jsonQ(signFor(t, before, `"https://api"`, "pay"))+
		`,"webhook":`+jsonQ(sealFor(t, before, jsonQ(inner), "pay"))+`,"legacy":`+jsonQ(sealFor(t, before, `"l"`, ""))+`}`)
	args := append([]string{"secrets", "reencrypt", "--topics", "cfg", "--field", "legacy"}, fields017...)

	plan := run(t, fx.env, "", args...)
	if plan.code != 0 || !strings.Contains(plan.out, `pay → "x2"`) || !strings.Contains(plan.out, `unscoped → "new"`) ||
		!strings.Contains(plan.out, "signatures by an old signer: 2") {
		t.Fatalf("plan: exit %d\n%s%s", plan.code, plan.out, plan.err)
	}
	r := run(t, fx.env, "", append(args, "--execute", "-o", "json")...)
	var res reencrypt.Result
	if err := json.Unmarshal([]byte(r.out), &res); err != nil || r.code != 0 {
		t.Fatalf("sweep: exit %d %v\n%s%s", r.code, err, r.out, r.err)
	}
	if v := res.Verification; !v.Clean || v.NonPrimary != 0 || v.OldSigner != 2 || res.Totals.Values.Rotate != 3 {
		t.Errorf("sweep %+v, verification %+v", res.Totals.Values, v)
	}
	scan := func() reencrypt.ScanReport {
		r := run(t, fx.env, "", append([]string{"secrets", "scan", "--topics", "cfg", "--field", "legacy", "-o", "json"}, fields017...)...)
		var rep reencrypt.ScanReport
		if err := json.Unmarshal([]byte(r.out), &rep); err != nil {
			t.Fatalf("%v\n%s", err, r.out)
		}
		return rep
	}
	rep := scan()
	for _, e := range rep.Entries {
		if (e.Field == "api_key" || e.Field == "webhook") && e.Kid != "x2" || e.Field == "legacy" && e.Kid != "new" {
			t.Errorf("%s under %s after the sweep", e.Field, e.Kid)
		}
	}
	if rep.Summary.OldSigner != 2 || rep.TokensUnder("s1") != 2 {
		t.Errorf("signatures moved without --resign: %+v", rep.Summary)
	}

	// s1 cannot be removed while signatures name it, even ones inside
	// tokens; --resign moves them, and then it can.
	guard := append([]string{"keys", "remove", "--kid", "s1", "--topics", "cfg", "--field", "legacy"}, fields017...)
	if r := run(t, fx.env, "", guard...); r.code != exitcode.Refused || !strings.Contains(r.err, "2 value(s) signed with it") || !strings.Contains(r.err, "--resign") {
		t.Fatalf("guarded remove of a signer: exit %d\n%s", r.code, r.err)
	}
	if r := run(t, fx.env, "", append(args, "--execute", "--resign")...); r.code != 0 || !strings.Contains(r.out, "verified by a scan") {
		t.Fatalf("resign: exit %d\n%s%s", r.code, r.out, r.err)
	}
	rep = scan()
	if rep.Summary.OldSigner != 0 || rep.TokensUnder("s1") != 0 || !rep.Clean {
		t.Errorf("after --resign: %+v", rep.Summary)
	}

	// An ECDH-ES token under a kid the keyring lacks: exit 4, never clean.
	stranger, err := secret.NewKeyring("o9")
	if err == nil {
		stranger, err = stranger.Generate("x9", secret.TypeX25519, []string{"pay"})
	}
	if err == nil {
		stranger, err = stranger.SetPrimaryFor("pay", "x9")
	}
	if err != nil {
		t.Fatal(err)
	}
	fx.put(t, 1, "stranger", `{"api_key":`+jsonQ(sealFor(t, stranger, `"s"`, "pay"))+`}`)
	r = run(t, fx.env, "", append(args, "--execute")...)
	if r.code != exitcode.Findings || !strings.Contains(r.out, "unknown_kid") || !strings.Contains(r.out, "verification failed: 1 tokens not under their scope's sealing kid, 1 tokens that do not open") {
		t.Errorf("unknown ECDH-ES kid: exit %d\n%s%s", r.code, r.out, r.err)
	}
}

// rotate-plan counts, for an Ed25519 rotation, the signatures still by old
// signers in the scopes the new key signs (inside tokens too), and for a
// per-scope X25519 rotation only that scope's tokens.
func TestRotatePlan017(t *testing.T) {
	fx := newSecretsFixture(t)
	before := fx.use017(t)
	fx.put(t, 0, "a", `{"api_key":`+jsonQ(sealFor(t, before, `"k"`, "pay"))+`,"endpoint":`+jsonQ(signFor(t, before, `"e"`, "pay"))+
		`,"webhook":`+jsonQ(sealFor(t, before, jsonQ(signFor(t, before, `"w"`, "pay")), "pay"))+`,"legacy":`+jsonQ(sealFor(t, fx.kr, `"l"`, ""))+`}`)
	plan := func(kid string) rotation.Plan {
		r := run(t, fx.env, "", append([]string{"keys", "rotate-plan", "--kid", kid, "--topics", "cfg", "--field", "legacy", "-o", "json"}, fields017...)...)
		var p rotation.Plan
		if err := json.Unmarshal([]byte(r.out), &p); err != nil {
			t.Fatalf("exit %d %v\n%s%s", r.code, err, r.out, r.err)
		}
		return p
	}
	p := plan("s2")
	if p.Scan.OldSigned != 2 || p.Scan.ByOldSigner["s1"] != 2 || p.Scan.OldTokens != 0 || !strings.Contains(p.Steps[2].Command, "--resign") {
		t.Errorf("rotation to s2: %+v, step 3 %+v", p.Scan, p.Steps[2])
	}
	// s2 already signs pay (step 2 done); s1, which no role names any
	// more, is the old signer to retire, and no sealing key is.
	if p.Role != "signing" || p.Steps[1].Status != "done" || p.Steps[2].Status != "pending" || len(p.OldKids) != 1 || p.OldKids[0] != "s1" {
		t.Errorf("rotation to s2: role %s, steps %+v, old kids %q", p.Role, p.Steps, p.OldKids)
	}
	p = plan("x2")
	// api_key and webhook under x1; legacy is not pay's, and is at its target.
	if p.Scan.OldTokens != 2 || p.Scan.ByOldKid["x1"] != 2 || p.Scan.OldSigned != 0 {
		t.Errorf("rotation to x2: %+v", p.Scan)
	}
}
