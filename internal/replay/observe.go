package replay

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/lineage"
	"github.com/flecht-dev/flecht/internal/stagefile"
	"github.com/flecht-dev/flecht/internal/status"
	"github.com/flecht-dev/flecht/internal/textfmt"
)

// TargetError says the target does not fit the topics (a --from-file that
// misses or adds partitions): a usage error, not a cluster failure.
type TargetError struct{ Msg string }

func (e *TargetError) Error() string { return e.Msg }

// Observe reads what a plan needs: the group and its members, the topics'
// partitions, bounds and configs, the committed offsets, the target offsets,
// whether the changelog exists, the local state stores, and the module
// file the stage file names. It changes nothing.
func Observe(ctx context.Context, cl *kgo.Client, req Request) (*Observed, error) {
	adm := kadm.NewClient(cl)
	o := &Observed{
		Request:   req,
		Topics:    map[string]Topic{},
		Committed: map[TP]int64{},
		// The lineage generation of each committed offset.
		Generations: map[TP]int64{},
		Requested:   map[TP]int64{},
	}
	if o.Kind == "" {
		o.Kind = KindTransformer
	}

	g, err := kafkax.DescribeGroup(ctx, adm, req.ApplicationID)
	switch {
	case errors.Is(err, kerr.GroupAuthorizationFailed):
		// Unseen, not absent: the plan says so and is refused.
		g = &kafkax.Group{Group: req.ApplicationID, State: status.GroupStateUnknown, Members: []kafkax.GroupMember{}}
		o.GroupUnauthorized = status.GroupNotAuthorized(req.ApplicationID)
	case err != nil:
		return nil, err
	}
	o.Group = *g

	offsetTopics := dedupe(append(append([]string{}, req.InputTopics...), req.IntermediateTopics...))
	all := dedupe(append(append([]string{}, offsetTopics...), req.ConfigTopics...))
	details, err := kafkax.DescribeTopics(ctx, adm, all...)
	if err != nil {
		return nil, err
	}
	for _, t := range all {
		var top Topic
		for _, pd := range details[t].Partitions.Sorted() {
			top.Partitions = append(top.Partitions, Partition{Partition: pd.Partition})
		}
		o.Topics[t] = top
	}

	if len(offsetTopics) > 0 {
		starts, err := adm.ListStartOffsets(ctx, offsetTopics...)
		if err == nil {
			err = starts.Error()
		}
		if err != nil {
			return nil, fmt.Errorf("listing start offsets: %w", err)
		}
		// The last stable offset, not the high watermark: the records
		// of a transaction still open lie between the two, and an
		// offset past them would skip them once it commits.
		ends, err := adm.ListCommittedOffsets(ctx, offsetTopics...)
		if err == nil {
			err = ends.Error()
		}
		if err != nil {
			return nil, fmt.Errorf("listing last stable offsets: %w", err)
		}
		for _, t := range offsetTopics {
			top := o.Topics[t]
			for i := range top.Partitions {
				p := &top.Partitions[i]
				if s, ok := starts.Lookup(t, p.Partition); ok {
					p.Start = s.Offset
				}
				if e, ok := ends.Lookup(t, p.Partition); ok {
					p.End = e.Offset
				}
			}
		}
	}

	if len(req.InputTopics) > 0 {
		if err := observeConfigs(ctx, adm, req.InputTopics, o.Topics); err != nil {
			return nil, err
		}
	}

	if g.Exists() && o.GroupUnauthorized == "" && len(offsetTopics) > 0 {
		committed, err := adm.FetchOffsets(ctx, req.ApplicationID)
		if err != nil && !errors.Is(err, kerr.GroupIDNotFound) {
			return nil, fmt.Errorf("fetching the committed offsets of group %q: %w", req.ApplicationID, err)
		}
		want := map[string]bool{}
		for _, t := range offsetTopics {
			want[t] = true
		}
		committed.Each(func(r kadm.OffsetResponse) {
			if r.Err == nil && want[r.Topic] && r.At >= 0 {
				tp := TP{Topic: r.Topic, Partition: r.Partition}
				o.Committed[tp] = r.At
				o.Generations[tp], _ = lineage.GenerationOf(r.Metadata) // none or unreadable: the first
			}
		})
	}

	if err := o.resolveTarget(ctx, adm); err != nil {
		return nil, err
	}

	changelog := stagefile.ChangelogTopic(req.ApplicationID)
	listed, err := kafkax.ListTopicsEach(ctx, adm, changelog)
	if err != nil {
		return nil, fmt.Errorf("describing %s: %w", changelog, err)
	}
	if d, ok := listed[changelog]; ok && d.Err == nil {
		o.ChangelogExists = true
		o.ChangelogPartitions = len(d.Partitions)
	} else if ok && errors.Is(d.Err, kerr.TopicAuthorizationFailed) {
		o.ChangelogExists = true // unseen: planned for deletion, which the preflight checks
	} else if ok && d.Err != nil && !errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
		return nil, fmt.Errorf("describing %s: %w", changelog, d.Err)
	}
	if o.Outputs, err = observeOutputs(ctx, adm, req.OutputTopics); err != nil {
		return nil, err
	}
	// Who else reads or writes the outputs matters only to a truncation.
	if req.OutputPolicy == OutputsTruncate {
		if err := ObserveOwners(ctx, adm, o); err != nil {
			return nil, err
		}
	}

	o.ModuleFile = status.ReadModuleFile(req.Module)
	if req.StateDir != "" {
		stores, exists, err := StateStores(req.StateDir)
		if err != nil {
			return nil, err
		}
		o.StateDirExists, o.StateStores = exists, stores
	}
	return o, nil
}

// observeConfigs reads the configs a preflight warning looks at.
func observeConfigs(ctx context.Context, adm *kadm.Client, topics []string, into map[string]Topic) error {
	rcs, err := kafkax.DescribeTopicConfigsEach(ctx, adm, topics...)
	if err != nil {
		return fmt.Errorf("describing the configs of %s: %w", strings.Join(topics, ", "), err)
	}
	for _, rc := range rcs {
		if errors.Is(rc.Err, kerr.TopicAuthorizationFailed) {
			top := into[rc.Name]
			top.Unauthorized = "DescribeConfigs on topic " + rc.Name
			into[rc.Name] = top
			continue
		}
		if rc.Err != nil {
			return fmt.Errorf("describing configs of %q: %w", rc.Name, rc.Err)
		}
		top := into[rc.Name]
		top.Configs = map[string]string{}
		for _, c := range rc.Configs {
			switch c.Key {
			case "cleanup.policy", "retention.ms", "retention.bytes":
				top.Configs[c.Key] = c.MaybeValue()
			}
		}
		into[rc.Name] = top
	}
	return nil
}

// resolveTarget fills Requested for every input partition.
func (o *Observed) resolveTarget(ctx context.Context, adm *kadm.Client) error {
	t := o.Target
	switch t.Kind {
	case "", TargetEarliest:
		for _, tp := range o.inputPartitions() {
			o.Requested[tp] = 0
		}
	case TargetOffset:
		for _, tp := range o.inputPartitions() {
			o.Requested[tp] = t.Offset
		}
	case TargetDatetime, TargetDuration:
		if t.BeforeEpoch() {
			// No record is older than the epoch, and the broker
			// reads a negative time as "latest" or "earliest" or
			// not at all: start at the log start.
			for _, tp := range o.inputPartitions() {
				o.Requested[tp] = 0
			}
			return nil
		}
		if len(o.InputTopics) == 0 {
			return nil
		}
		after, err := kafkax.OffsetsAfter(ctx, adm, t.Time.UnixMilli(), o.InputTopics...)
		if err != nil {
			return err
		}
		for _, tp := range o.inputPartitions() {
			off, ok := after[tp]
			if !ok {
				return fmt.Errorf("no offset for %s/%d at %s", tp.Topic, tp.Partition, t.Time.Format(time.RFC3339))
			}
			o.Requested[tp] = off
		}
	case TargetFile:
		inputs := map[TP]bool{}
		var missing []string
		for _, tp := range o.inputPartitions() {
			inputs[tp] = true
			off, ok := t.File[tp]
			if !ok {
				missing = append(missing, fmt.Sprintf("%s/%d", tp.Topic, tp.Partition))
				continue
			}
			o.Requested[tp] = off
		}
		var extra []string
		for tp := range t.File {
			if !inputs[tp] {
				extra = append(extra, fmt.Sprintf("%s/%d", tp.Topic, tp.Partition))
			}
		}
		sort.Strings(extra)
		switch {
		case len(missing) > 0:
			return &TargetError{Msg: fmt.Sprintf("%s lacks %s: list every input partition", t.FilePath, strings.Join(missing, ", "))}
		case len(extra) > 0:
			return &TargetError{Msg: fmt.Sprintf("%s lists %s, which %s not an input partition of the stage", t.FilePath, strings.Join(extra, ", "), textfmt.PluralForm(len(extra), "is", "are"))}
		}
	default:
		return &TargetError{Msg: fmt.Sprintf("unknown target %q", t.Kind)}
	}
	return nil
}

func (o *Observed) inputPartitions() []TP {
	var out []TP
	for _, t := range o.InputTopics {
		for _, p := range o.Topics[t].Partitions {
			out = append(out, TP{Topic: t, Partition: p.Partition})
		}
	}
	return out
}

// StateStores lists the per-partition stores under a state directory: its
// subdirectories named by a partition number (as `flecht run` lays them
// out). Nothing else there is ever touched.
func StateStores(dir string) (stores []string, exists bool, err error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return []string{}, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("reading state dir: %w", err)
	}
	type store struct {
		n    int
		path string
	}
	var found []store
	for _, e := range entries {
		n, err := strconv.Atoi(e.Name())
		if err != nil || n < 0 || strconv.Itoa(n) != e.Name() || !e.IsDir() {
			continue
		}
		path, err := stagefile.JoinName(dir, e.Name())
		if err != nil {
			return nil, false, err
		}
		found = append(found, store{n, path})
	}
	sort.Slice(found, func(i, j int) bool { return found[i].n < found[j].n })
	stores = []string{}
	for _, s := range found {
		stores = append(stores, s.path)
	}
	return stores, true, nil
}

// WaitForEmptyGroup polls the group until it has no members, for at most
// timeout. It returns the group as last seen and, on timeout, an error
// naming who is still there.
func WaitForEmptyGroup(ctx context.Context, cl *kgo.Client, group string, timeout, every time.Duration) (*kafkax.Group, error) {
	adm := kadm.NewClient(cl)
	deadline := time.Now().Add(timeout)
	for {
		g, err := kafkax.DescribeGroup(ctx, adm, group)
		if err != nil {
			return nil, err
		}
		if len(g.Members) == 0 {
			return g, nil
		}
		if !time.Now().Before(deadline) {
			return g, &LiveMembersError{Group: group, Members: g.Members, Waited: timeout}
		}
		select {
		case <-ctx.Done():
			return g, ctx.Err()
		case <-time.After(min(every, time.Until(deadline))):
		}
	}
}

// LiveMembersError refuses a replay while the stage runs.
type LiveMembersError struct {
	Group   string
	Members []kafkax.GroupMember
	// Waited is how long --wait waited, 0 without it.
	Waited time.Duration
}

func (e *LiveMembersError) Error() string {
	msg := fmt.Sprintf("group %q has %d live %s: %s", e.Group, len(e.Members), textfmt.PluralForm(len(e.Members), "member", "members"), kafkax.DescribeMembers(e.Members))
	if e.Waited > 0 {
		return msg + fmt.Sprintf(" (still there after waiting %s)", e.Waited)
	}
	return msg + "; " + stopHint(e.Members)
}

func dedupe(ss []string) []string {
	seen := map[string]bool{}
	out := ss[:0:0]
	for _, s := range ss {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}
