package cli

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/flecht-dev/flecht/internal/rotation"
	"github.com/flecht-dev/flecht/internal/secret"
)

// rotate-plan walks through the five steps as the rotation proceeds.
func TestKeysRotatePlanFollowsTheRotation(t *testing.T) {
	fx := newSecretsFixture(t) // keyring: old (primary), new
	fx.put(t, 0, "a", `{"api_key":"`+fx.token(t, `"x"`, "")+`"}`)
	ready, lagging := reader(t, "old", "new"), reader(t, "old")
	plan := func(urls ...string) rotation.Plan {
		t.Helper()
		args := []string{"keys", "rotate-plan", "--kid", "new", "--topics", "cfg", "--field", "api_key", "-o", "json"}
		for _, u := range urls {
			args = append(args, "--metrics-url", u)
		}
		r := run(t, fx.env, "", args...)
		if r.code != 0 {
			t.Fatalf("exit %d %s", r.code, r.err)
		}
		var p rotation.Plan
		if err := json.Unmarshal([]byte(r.out), &p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	statuses := func(p rotation.Plan) string {
		var s []string
		for _, st := range p.Steps {
			s = append(s, st.Status)
		}
		return strings.Join(s, " ")
	}
	p := plan(ready, lagging)
	if statuses(p) != "pending pending pending pending pending" || p.Next != 1 || !strings.Contains(p.Steps[0].Detail, "1 of 2 readers lack it") || !strings.Contains(p.Steps[0].Detail, "restart it") {
		t.Errorf("start: %s next %d %+v", statuses(p), p.Next, p.Steps[0])
	}
	if p.Scan == nil || p.Scan.OldTokens != 1 || p.Scan.ByOldKid["old"] != 1 {
		t.Errorf("scan %+v", p.Scan)
	}
	p = plan(ready)
	if statuses(p) != "done pending pending pending pending" || p.Next != 2 {
		t.Errorf("readers ready: %s", statuses(p))
	}
	fx.promote(t, "new")
	if p = plan(ready); statuses(p) != "done done pending pending pending" || !strings.Contains(p.Steps[2].Command, "secrets reencrypt --topics cfg --field api_key") {
		t.Errorf("promoted: %s %+v", statuses(p), p.Steps[2])
	}
	if r := run(t, fx.env, "", "secrets", "reencrypt", "--topics", "cfg", "--field", "api_key", "--execute"); r.code != 0 {
		t.Fatalf("sweep: exit %d %s", r.code, r.err)
	}
	if p = plan(ready); statuses(p) != "done done done done pending" || p.Next != 5 || !strings.Contains(p.Steps[4].Command, "keys remove") {
		t.Errorf("swept: %s %+v", statuses(p), p.Steps[4])
	}
	if r := run(t, fx.env, "", "keys", "remove", "--kid", "old", "--topics", "cfg", "--field", "api_key"); r.code != 0 {
		t.Fatalf("remove: exit %d %s", r.code, r.err)
	}
	if p = plan(ready); statuses(p) != "done done done done done" || p.Next != 0 {
		t.Errorf("done: %s", statuses(p))
	}
	// Without metrics or topics the steps that need them say unknown.
	r := run(t, fx.env, "", "keys", "rotate-plan", "--kid", "new")
	if r.code != 0 || strings.Count(r.out, "unknown") != 3 {
		t.Errorf("no inputs: exit %d\n%s", r.code, r.out)
	}
}

// rotate-plan follows a signer's rotation: step 2 makes NEW the signing
// key of the scopes of its binding (or of --scope S), step 3 is the sweep
// with --resign, and step 5 retires the old signers of those scopes that
// no role names, never a sealing key nor another scope's signer. Followed
// step by step, each command it prints brings the next step.
func TestKeysRotatePlanSigner(t *testing.T) {
	fx := newSecretsFixture(t) // oct old (primary), new
	kr, err := fx.kr.Generate("sig1", secret.TypeEd25519, []string{"api"})
	if err == nil {
		kr, err = kr.Generate("sigdb", secret.TypeEd25519, []string{"db"})
	}
	if err == nil {
		kr, err = kr.SetSigningFor("api", "sig1")
	}
	if err == nil {
		kr, err = kr.SetSigningFor("db", "sigdb")
	}
	fx.save(t, kr, err)
	inner, _ := json.Marshal(fx.sign(t, `"sk-live-1"`, "api"))
	fx.put(t, 0, "a", `{"endpoint":`+strconv.Quote(fx.sign(t, `"https://hooks.example/1"`, "api"))+
		`,"api_key":"`+fx.token(t, string(inner), "api")+`","hook":`+strconv.Quote(fx.sign(t, `"https://db.example"`, "db"))+`}`)
	mustRun(t, fx.env, "", "keys", "add", "--kid", "sig2", "--type", "ed25519", "--scope", "api", "--scope", "db")
	target := []string{"--topics", "cfg", "--field", "endpoint:api:signed", "--field", "api_key:api", "--field", "hook:db:signed"}
	readers := reader(t, "old", "new", "sig1", "sigdb", "sig2")
	plan := func(scope ...string) (rotation.Plan, string) {
		t.Helper()
		args := append([]string{"keys", "rotate-plan", "--kid", "sig2", "--metrics-url", readers, "-o", "json"}, target...)
		if len(scope) > 0 {
			args = append(args, "--scope", scope[0])
		}
		r := run(t, fx.env, "", args...)
		var p rotation.Plan
		if err := json.Unmarshal([]byte(r.out), &p); err != nil || r.code != 0 {
			t.Fatalf("exit %d %v\n%s", r.code, err, r.err)
		}
		var st []string
		for _, s := range p.Steps {
			st = append(st, s.Status)
		}
		return p, strings.Join(st, " ")
	}

	// Every scope of its binding: api and db, each with its old signer.
	p, s := plan()
	if s != "done pending pending pending pending" || p.Role != "signing" || !slices.Equal(p.Scopes, []string{"api", "db"}) ||
		p.Signing["api"] != "sig1" || p.Signing["db"] != "sigdb" || p.Sealing != "" {
		t.Fatalf("whole binding: %s %+v", s, p)
	}
	if p.Scan.OldSigned != 3 || p.Scan.ByOldSigner["sig1"] != 2 || p.Scan.ByOldSigner["sigdb"] != 1 || p.Scan.OldTokens != 0 ||
		!slices.Equal(p.OldKids, []string{"sig1", "sigdb"}) {
		t.Errorf("whole binding: scan %+v, old kids %q", p.Scan, p.OldKids)
	}
	if c := p.Steps[1].Command; !strings.Contains(c, "flecht keys signing --keyring "+fx.keyring+" --kid sig2 --scope api") ||
		!strings.Contains(c, "--kid sig2 --scope db") {
		t.Errorf("step 2: %+v", p.Steps[1])
	}

	// --scope api: that scope's signatures and old signers only.
	p, s = plan("api")
	if s != "done pending pending pending pending" || !slices.Equal(p.Scopes, []string{"api"}) || p.Scan.OldSigned != 2 ||
		p.Scan.ByOldSigner["sig1"] != 2 || !slices.Equal(p.OldKids, []string{"sig1"}) ||
		!strings.Contains(p.Steps[1].Detail, `scope "api" is signed by "sig1"`) || strings.Contains(p.Steps[1].Command, "--scope db") ||
		!strings.Contains(p.Steps[2].Command, "--resign --execute") || !strings.Contains(p.Steps[2].Detail, "sweep after step 2") {
		t.Fatalf("scope api: %s %+v", s, p)
	}
	mustRun(t, fx.env, "", strings.Fields(strings.TrimPrefix(p.Steps[1].Command, "flecht "))...)
	if p, s = plan("api"); s != "done done pending pending pending" {
		t.Fatalf("signing key moved: %s %+v", s, p.Steps[1])
	}
	mustRun(t, fx.env, "", append([]string{"secrets", "reencrypt", "--resign", "--execute"}, target...)...)
	if p, s = plan("api"); s != "done done done done pending" || !strings.Contains(p.Steps[4].Command, "flecht keys remove --keyring "+fx.keyring+" --kid sig1 --topics cfg") ||
		!strings.Contains(p.Steps[4].Detail, "first keep a copy with them offline: cp "+fx.keyring+" "+fx.keyring+".escrow && flecht keys protect --keyring "+fx.keyring+".escrow") {
		t.Fatalf("re-signed: %s %+v", s, p.Steps)
	}
	mustRun(t, fx.env, "", strings.Fields(strings.TrimPrefix(p.Steps[4].Command, "flecht "))...)
	if p, s = plan("api"); s != "done done done done done" || p.Next != 0 {
		t.Fatalf("old signer removed: %s %+v", s, p.Steps)
	}
	// The db half of its binding is still to do, and sigdb signs it.
	if p, s = plan(); s != "done pending pending pending pending" || p.Scan.OldSigned != 1 || p.Scan.ByOldSigner["sigdb"] != 1 ||
		!slices.Equal(p.OldKids, []string{"sigdb"}) {
		t.Errorf("whole binding afterwards: %s %+v", s, p)
	}
	// The human form says what rotates.
	r := mustRun(t, fx.env, "", append([]string{"keys", "rotate-plan", "--kid", "sig2", "--scope", "api"}, target...)...)
	if !strings.Contains(r.out, `rotation of the signing key of scope "api" to key "sig2"`) || !strings.Contains(r.out, "remove the old signers") {
		t.Errorf("human plan:\n%s", r.out)
	}
}
