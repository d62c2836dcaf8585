package cli

import (
	"encoding/json"
	"strings"
	"testing"
)

// rotate-plan walks through the five steps as the rotation proceeds.
func TestKeysRotatePlanFollowsTheRotation(t *testing.T) {
	fx := newSecretsFixture(t) // keyring: old (primary), new
	fx.put(t, 0, "a", `{"api_key":"`+fx.token(t, `"x"`, "")+`"}`)
	ready, lagging := reader(t, "old", "new"), reader(t, "old")
	plan := func(urls ...string) RotatePlan {
		t.Helper()
		args := []string{"keys", "rotate-plan", "--kid", "new", "--topics", "cfg", "--field", "api_key", "-o", "json"}
		for _, u := range urls {
			args = append(args, "--metrics-url", u)
		}
		r := run(t, fx.env, "", args...)
		if r.code != 0 {
			t.Fatalf("exit %d %s", r.code, r.err)
		}
		var p RotatePlan
		if err := json.Unmarshal([]byte(r.out), &p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	statuses := func(p RotatePlan) string {
		var s []string
		for _, st := range p.Steps {
			s = append(s, st.Status)
		}
		return strings.Join(s, " ")
	}
	p := plan(ready, lagging)
	if statuses(p) != "pending pending pending pending pending" || p.Next != 1 || !strings.Contains(p.Steps[0].Detail, "1 of 2 readers lack it") {
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
