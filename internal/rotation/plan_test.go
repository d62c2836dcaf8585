package rotation

import (
	"context"
	"strings"
	"testing"

	"github.com/flecht-dev/flecht/internal/reencrypt"
	"github.com/flecht-dev/flecht/internal/secret"
)

// A sealing key's rotation step by step, checked against the keyring, the
// readers and a scan, without a broker: each step's status follows what
// has been done, and the next step is the first not done.
func TestPlanFollowsTheRotation(t *testing.T) {
	ctx := context.Background()
	old, err := secret.NewKeyring("old")
	if err != nil {
		t.Fatal(err)
	}
	added, err := old.Add("new")
	if err != nil {
		t.Fatal(err)
	}
	statuses := func(p *Plan) string {
		var s []string
		for _, st := range p.Steps {
			s = append(s, st.Status)
		}
		return strings.Join(s, " ")
	}

	// The key is not in the keyring yet: add it first.
	p, err := NewPlan(ctx, Inputs{Keyring: old, KeyringPath: "kr.json", Kid: "new"})
	if err != nil {
		t.Fatal(err)
	}
	if p.Role != RoleSealing || p.Next != 1 || p.Steps[0].Status != StepPending || !strings.Contains(p.Steps[0].Command, "flecht keys add --keyring kr.json --kid new") {
		t.Fatalf("before add: next %d, %s, step 1 %+v", p.Next, statuses(p), p.Steps[0])
	}

	// Added, readers all have it, not promoted: step 2 is next; the scan
	// is not given, so 3 and 4 cannot be checked.
	scrape := func(_ context.Context, url string) Reader { return Reader{URL: url, Kids: []string{"old", "new"}} }
	p, err = NewPlan(ctx, Inputs{Keyring: added, KeyringPath: "kr.json", Kid: "new", URLs: []string{"a:1", "b:1", "a:1"}, Scrape: scrape})
	if err != nil {
		t.Fatal(err)
	}
	if got := statuses(p); got != "done pending unknown unknown pending" || p.Next != 2 || len(p.Readers.Readers) != 2 {
		t.Fatalf("after add: next %d, %s, readers %+v", p.Next, got, p.Readers)
	}

	// Promoted, the scan clean: only the old key is left to retire.
	promoted, err := added.Promote("new")
	if err != nil {
		t.Fatal(err)
	}
	clean := func(context.Context) (*reencrypt.ScanReport, error) { return &reencrypt.ScanReport{Clean: true}, nil }
	p, err = NewPlan(ctx, Inputs{Keyring: promoted, KeyringPath: "kr.json", Kid: "new", URLs: []string{"a:1"}, Scrape: scrape,
		Scan: clean, Topics: []string{"cfg"}, Fields: []reencrypt.Field{{Path: []string{"api_key"}, Scope: "api"}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := statuses(p); got != "done done done done pending" || p.Next != 5 || len(p.OldKids) != 1 || p.OldKids[0] != "old" ||
		!strings.Contains(p.Steps[4].Command, "flecht keys remove --keyring kr.json --kid old --topics cfg --field api_key:api") {
		t.Fatalf("after the sweep: next %d, %s, old %v, step 5 %+v", p.Next, got, p.OldKids, p.Steps[4])
	}

	// A reader that lacks the key holds step 1 back.
	lacking := func(_ context.Context, url string) Reader { return Reader{URL: url, Kids: []string{"old"}} }
	p, err = NewPlan(ctx, Inputs{Keyring: promoted, KeyringPath: "kr.json", Kid: "new", URLs: []string{"a:1"}, Scrape: lacking})
	if err != nil {
		t.Fatal(err)
	}
	if p.Steps[0].Status != StepPending || p.Next != 1 || p.Readers.Lacking != 1 {
		t.Fatalf("a reader without the key: %+v", p.Steps[0])
	}
}
