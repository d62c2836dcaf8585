package kafkax

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/suggest"
)

// UnknownApplicationError says that nothing in the cluster belongs to an
// application id: no group, no committed offset, no changelog. Most
// often a typo; Nearest holds the known ids closest to it.
type UnknownApplicationError struct {
	ID      string
	Nearest []string
}

func (e *UnknownApplicationError) Error() string {
	msg := fmt.Sprintf("no application %q: the cluster has no group, no committed offset and no changelog of it", e.ID)
	if len(e.Nearest) > 0 {
		msg += "; did you mean " + strings.Join(e.Nearest, " or ") + "?"
	}
	return msg + " (--new-app if it is new)"
}

// ProduceTransactionalIDPrefix begins the transactional ID of each
// `flecht topic produce` run (docs/contract.md §1): a run commits or
// aborts as a whole, and an ACL prefixed with it lets the runs write.
const ProduceTransactionalIDPrefix = "flecht-produce-"

// changelogSuffix is what every stage's changelog topic name ends with.
const changelogSuffix = "-changelog"

// KnownApplications lists the application ids the cluster knows of: its
// consumer groups and the owners of its <id>-changelog topics.
func KnownApplications(ctx context.Context, adm *kadm.Client) ([]string, error) {
	set := map[string]bool{}
	groups, err := adm.ListGroups(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing groups: %w", err)
	}
	for _, g := range groups.Groups() {
		set[g] = true
	}
	topics, err := adm.ListTopics(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing topics: %w", err)
	}
	for _, t := range topics.Names() {
		if id, ok := strings.CutSuffix(t, changelogSuffix); ok && id != "" {
			set[id] = true
		}
	}
	out := make([]string, 0, len(set))
	for id := range set {
		out = append(out, id)
	}
	sort.Strings(out)
	return out, nil
}

// UnknownApp refuses an application id nothing in the cluster belongs to
// (exit 3), naming the known ids nearest to it: most often it is a typo.
func UnknownApp(ctx context.Context, cl *kgo.Client, id string) error {
	e := &UnknownApplicationError{ID: id}
	if known, err := KnownApplications(ctx, kadm.NewClient(cl)); err == nil {
		e.Nearest = suggest.Nearest(id, known)
	}
	return exitcode.RefusedError(e)
}
