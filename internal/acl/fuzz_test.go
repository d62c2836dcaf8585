package acl

import (
	"strings"
	"testing"
	"unicode"
)

// FuzzPrincipal: any principal is refused or rendered into commands with
// no raw control character and no unquoted shell metacharacter.
func FuzzPrincipal(f *testing.F) {
	for _, s := range []string{"User:alice", "User:CN=a b", "User:x;rm -rf /", "User:\x1b[31m", "alice", "User:", ":x"} {
		f.Add(s)
	}
	top := Topics{Kind: "transformer", ApplicationID: "app", Inputs: []string{"raw"}, Outputs: []string{"out"}, Changelog: "app-changelog"}
	f.Fuzz(func(t *testing.T, principal string) {
		p, err := NewPlan(principal, top, Options{Role: RoleRun})
		if err != nil {
			return
		}
		for _, g := range Commands(p.ACLs, "", "") {
			if strings.IndexFunc(g.Command, unicode.IsControl) >= 0 {
				t.Fatalf("raw control character in %q", g.Command)
			}
			if !strings.Contains(g.Command, "--allow-principal "+principal+" ") && !strings.Contains(g.Command, "--allow-principal '") && !strings.Contains(g.Command, "--allow-principal $'") {
				t.Fatalf("principal %q not quoted in %q", principal, g.Command)
			}
		}
		_ = Strimzi(p)
	})
}
