package acl

import (
	"context"
	"strconv"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/stagefile"
)

// Flags are what `flecht acl plan` and `flecht acl check` were given.
type Flags struct {
	StageFile       string
	Principal       string
	Role            string
	OutputTopics    []string
	TruncateOutputs bool
	// ClientID names a bridge's transactional ID (APP-CLIENT_ID) for
	// check; "" probes none.
	ClientID string
}

// Load reads the stage file and the role: the inputs of plan and check.
// Everything wrong is a usage error.
func Load(f Flags) (Topics, Options, error) {
	role, err := ParseRole(f.Role)
	if err != nil {
		return Topics{}, Options{}, exitcode.UsageError(err)
	}
	if f.StageFile == "" {
		return Topics{}, Options{}, exitcode.Usagef("give the stage file: -f stage.yaml")
	}
	if f.TruncateOutputs && role != RoleReplay {
		return Topics{}, Options{}, exitcode.Usagef("--truncate-outputs belongs to --role replay")
	}
	st, err := stagefile.LoadFor(f.StageFile, "", "")
	if err != nil {
		return Topics{}, Options{}, err
	}
	t, err := StageTopics(st, f.OutputTopics)
	if err != nil {
		return t, Options{}, exitcode.Usagef("stage %s: %w", f.StageFile, err)
	}
	o := Options{Role: role, TruncateOutputs: f.TruncateOutputs}
	if _, err := Needs(t, o); err != nil {
		return t, o, exitcode.UsageError(err)
	}
	return t, o, nil
}

// NewPlanFrom is the plan `flecht acl plan` prints.
func NewPlanFrom(f Flags) (*Plan, error) {
	t, o, err := Load(f)
	if err != nil {
		return nil, err
	}
	p, err := NewPlan(f.Principal, t, o)
	if err != nil {
		return nil, exitcode.UsageError(err)
	}
	return p, nil
}

// Report is what `flecht acl check` found.
type Report struct {
	Principal string   `json:"principal"`
	Role      Role     `json:"role"`
	Stage     Topics   `json:"stage"`
	Results   []Result `json:"results"`
	Missing   int      `json:"missing"`
	Unknown   int      `json:"unknown"`
}

// MissingACLs are the ACLs that grant the missing needs (the principal
// placeholder User:PRINCIPAL when the report's principal is unknown).
func (r *Report) MissingACLs() []ACL {
	var needs []Need
	for _, res := range r.Results {
		if res.Status == Missing {
			needs = append(needs, res.Need)
		}
	}
	return ACLs(r.principal(), needs)
}

func (r *Report) principal() string {
	if r.Principal == "" {
		return "User:PRINCIPAL"
	}
	return r.Principal
}

// Check probes every need of the role for the stage with the client's
// credentials. principal only names the grants in the report ("" when
// the caller does not know it).
func Check(ctx context.Context, cl *kgo.Client, f Flags) (*Report, error) {
	t, o, err := Load(f)
	if err != nil {
		return nil, err
	}
	if f.Principal != "" {
		if err := CheckPrincipal(f.Principal); err != nil {
			return nil, exitcode.UsageError(err)
		}
	}
	needs, _ := Needs(t, o)
	names, err := TxnNames(ctx, cl, t, f.ClientID)
	if err != nil {
		return nil, err
	}
	res, err := Probe(ctx, cl, needs, names)
	if err != nil {
		return nil, err
	}
	r := &Report{Principal: f.Principal, Role: o.Role, Stage: t, Results: res}
	for _, x := range res {
		switch x.Status {
		case Missing:
			r.Missing++
		case Unknown:
			r.Unknown++
		}
	}
	return r, nil
}

// TxnNames are the stage's transactional IDs, under their prefix APP-:
// APP-p for each input partition of a transformer, APP-t for each token
// of an extractor, APP-CLIENT_ID of a bridge (with a client id).
func TxnNames(ctx context.Context, cl *kgo.Client, t Topics, clientID string) (map[string][]string, error) {
	prefix := t.ApplicationID + "-"
	var from []string
	switch t.Kind {
	case stagefile.KindTransformer:
		from = t.Inputs
	case stagefile.KindExtractor:
		from = t.Configs
	case stagefile.KindMQTT:
		if clientID == "" {
			return nil, nil
		}
		return map[string][]string{prefix: {prefix + clientID}}, nil
	}
	if len(from) == 0 {
		return nil, nil
	}
	// A topic the principal may not describe still has partition 0: its
	// ID APP-0 is probed at least (and the topic's own need is missing).
	n := 1
	if details, err := kadm.NewClient(cl).ListTopics(ctx, from...); err == nil {
		for _, d := range details {
			if d.Err == nil {
				n = max(n, len(d.Partitions))
			}
		}
	} else if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	ids := make([]string, 0, n)
	for p := range n {
		ids = append(ids, prefix+strconv.Itoa(p))
	}
	return map[string][]string{prefix: ids}, nil
}
