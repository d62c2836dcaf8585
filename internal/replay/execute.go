package replay

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/lineage"
	"github.com/flecht-dev/flecht/internal/textfmt"
)

// ExecOptions tune Execute.
type ExecOptions struct {
	// StateDir is the directory the plan's StateDirs live in; it is
	// removed too when the replay leaves it empty.
	StateDir string
	// Concurrency bounds the InitProducerId requests in flight
	// (default 32).
	Concurrency int
	// OnStep is called as each step starts (progress), when not nil.
	OnStep func(step string)
}

// Execute carries out a plan. Every step is idempotent, so running a fresh
// plan again after a partial failure finishes the job: fencing an ID twice
// only bumps its epoch again, a changelog already gone is skipped, the
// offsets are committed to the same values, missing stores are skipped.
//
// The group is checked for members before anything changes and again right
// before the offsets are committed; a member that appears refuses the rest
// with a *LiveMembersError. plan.Executed is set only when every step
// succeeded; plan.Steps records the steps done.
func Execute(ctx context.Context, cl *kgo.Client, plan *Plan, opts ExecOptions) error {
	adm := kadm.NewClient(cl)
	if opts.Concurrency <= 0 {
		opts.Concurrency = 32
	}
	step := func(name string) func(detail string) {
		if opts.OnStep != nil {
			opts.OnStep(name)
		}
		start := time.Now()
		return func(detail string) {
			plan.Steps = append(plan.Steps, Step{Step: name, Detail: detail, Millis: time.Since(start).Milliseconds()})
		}
	}
	if why := plan.OutputRefusal(); why != "" {
		return &OutputsError{Why: why}
	}
	if why := plan.TruncateRefusal(); why != "" {
		return &OutputsError{Why: why}
	}
	if err := requireEmpty(ctx, adm, plan.ApplicationID); err != nil {
		return err
	}
	if err := checkPermissions(ctx, cl, plan); err != nil {
		return err
	}

	// 1. Fence every transactional ID: InitProducerId bumps its epoch and
	// makes the coordinator abort whatever transaction it had open.
	if len(plan.Fence) > 0 {
		done := step("fence")
		if err := FenceAll(ctx, cl, plan.Fence, opts.Concurrency); err != nil {
			return err
		}
		done(fmt.Sprintf("initialised %d transactional %s (any open transaction aborted, its producer fenced)", len(plan.Fence), textfmt.PluralForm(len(plan.Fence), "ID", "IDs")))
	}

	// 2. Delete exactly the listed topics, and wait until they are gone.
	if len(plan.DeleteTopics) > 0 {
		done := step("delete_topics")
		deleted, err := deleteTopics(ctx, cl, plan.DeleteTopics)
		if err != nil {
			return err
		}
		done(deleted)
	}

	// 3. Offsets, while the group is empty.
	if len(plan.Offsets) > 0 {
		done := step("offsets")
		if err := requireEmpty(ctx, adm, plan.ApplicationID); err != nil {
			return err
		}
		if err := commitOffsets(ctx, adm, plan.ApplicationID, plan.Offsets, plan.Generation); err != nil {
			return err
		}
		in, mid := 0, 0
		for _, o := range plan.Offsets {
			if o.Role == RoleIntermediate {
				mid++
			} else {
				in++
			}
		}
		detail := fmt.Sprintf("committed %d input %s for group %s", in, textfmt.PluralForm(in, "offset", "offsets"), plan.ApplicationID)
		if mid > 0 {
			detail += fmt.Sprintf(", %d intermediate at their end", mid)
		}
		if plan.Generation > 0 {
			detail += fmt.Sprintf(", with lineage generation %d", plan.Generation)
		}
		done(detail)
	}

	// 4. Outputs the operator chose to truncate: after the fence, so no
	// transaction of the old run can still add to them.
	if n := plan.truncating(); n > 0 {
		done := step("truncate_outputs")
		if err := truncateOutputs(ctx, adm, plan.Outputs); err != nil {
			return err
		}
		done(fmt.Sprintf("deleted the records of %d output %s up to their end", n, textfmt.PluralForm(n, "topic", "topics")))
	}

	// 5. Local stores.
	if len(plan.StateDirs) > 0 {
		done := step("state_dirs")
		for _, d := range plan.StateDirs {
			if err := os.RemoveAll(d); err != nil {
				return fmt.Errorf("removing local state %s: %w", d, err)
			}
		}
		if opts.StateDir != "" {
			_ = os.Remove(opts.StateDir) // only when empty
		}
		done(fmt.Sprintf("removed %d local %s", len(plan.StateDirs), textfmt.PluralForm(len(plan.StateDirs), "store", "stores")))
	}
	plan.Executed = true
	// What the replay left (an empty group holding the new offsets), so
	// the printed result does not show the state from before as current.
	// Every step is done: a failure to look is no failure of the replay.
	if g, err := kafkax.DescribeGroup(ctx, adm, plan.ApplicationID); err == nil {
		plan.GroupStateAfter = g.State
	}
	return nil
}

// OutputsError refuses a replay whose rebuild would write the records of
// its outputs again without the operator having chosen what happens to
// them, or that would truncate an output the stage does not alone own.
type OutputsError struct{ Why string }

func (e *OutputsError) Error() string { return e.Why }

func requireEmpty(ctx context.Context, adm *kadm.Client, group string) error {
	g, err := kafkax.DescribeGroup(ctx, adm, group)
	if err != nil {
		return err
	}
	if len(g.Members) > 0 {
		return &LiveMembersError{Group: group, Members: g.Members}
	}
	return nil
}

// FenceAll initialises every transactional ID, at most concurrency at a
// time, and returns the first error.
func FenceAll(ctx context.Context, cl *kgo.Client, ids []string, concurrency int) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sem := make(chan struct{}, max(concurrency, 1))
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	for _, id := range ids {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := Fence(ctx, cl, id); err != nil {
				once.Do(func() { first = err; cancel() })
			}
		}()
	}
	wg.Wait()
	if first == nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return first
}

// Fence sends InitProducerId for one transactional ID, as a transactional
// producer does when it starts (and as kgo's ProducerID does): the
// coordinator bumps the epoch, so the previous owner is fenced, and aborts
// the transaction it had open, answering CONCURRENT_TRANSACTIONS until the
// abort is written. One client serves every ID; no producer is left behind.
func Fence(ctx context.Context, cl *kgo.Client, id string) error {
	// An abort takes the coordinator milliseconds to seconds; a coordinator
	// that answers CONCURRENT_TRANSACTIONS for minutes is stuck.
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	backoff := 20 * time.Millisecond
	for {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID = kmsg.StringPtr(id)
		req.TransactionTimeoutMillis = 60_000
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return fmt.Errorf("fencing transactional ID %s: %w", id, err)
		}
		err = kerr.ErrorForCode(resp.ErrorCode)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, kerr.ConcurrentTransactions), errors.Is(err, kerr.CoordinatorLoadInProgress),
			errors.Is(err, kerr.NotCoordinator), errors.Is(err, kerr.CoordinatorNotAvailable):
			select {
			case <-ctx.Done():
				return fmt.Errorf("fencing transactional ID %s: %w (last answer: %v)", id, ctx.Err(), err)
			case <-time.After(backoff):
			}
			backoff = min(backoff*2, time.Second)
		default:
			return fmt.Errorf("fencing transactional ID %s: %w", id, kafkax.NeedsACL(err, "Write on transactional ID "+id))
		}
	}
}

// deleteTopics deletes the topics (a topic already gone is fine) and waits
// until no broker lists any of them.
func deleteTopics(ctx context.Context, cl *kgo.Client, topics []string) (string, error) {
	resps, err := kadm.NewClient(cl).DeleteTopics(ctx, topics...)
	if err != nil {
		return "", fmt.Errorf("deleting %v: %w", topics, err)
	}
	var deleted, gone []string
	for _, t := range topics {
		r, ok := resps[t]
		switch {
		case !ok, errors.Is(r.Err, kerr.UnknownTopicOrPartition), errors.Is(r.Err, kerr.UnknownTopicID):
			gone = append(gone, t)
		case r.Err != nil:
			msg := r.Err.Error()
			if r.ErrMessage != "" {
				msg += ": " + r.ErrMessage
			}
			return "", fmt.Errorf("deleting %s: %s", t, msg)
		default:
			deleted = append(deleted, t)
		}
	}
	if err := WaitGone(ctx, cl, topics, 60*time.Second); err != nil {
		return "", err
	}
	detail := ""
	if len(deleted) > 0 {
		detail = fmt.Sprintf("deleted %v and waited until no broker lists %s", deleted, textfmt.PluralForm(len(deleted), "it", "them"))
	}
	if len(gone) > 0 {
		if detail != "" {
			detail += "; "
		}
		detail += fmt.Sprintf("%v already gone", gone)
	}
	return detail, nil
}

// WaitGone asks every broker directly (no client-side metadata cache) until
// none of them lists any of the topics, for at most timeout: a stage
// restarted afterwards cannot find a half-deleted topic on any broker.
func WaitGone(ctx context.Context, cl *kgo.Client, topics []string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	for _, t := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	listedBy := func(resp *kmsg.MetadataResponse) []string {
		var still []string
		for _, t := range resp.Topics {
			err := kerr.ErrorForCode(t.ErrorCode)
			if t.Topic != nil && !errors.Is(err, kerr.UnknownTopicOrPartition) && !errors.Is(err, kerr.UnknownTopicID) {
				still = append(still, *t.Topic)
			}
		}
		return still
	}
	for {
		var still []string
		seed, err := req.RequestWith(ctx, cl)
		if err == nil {
			still = listedBy(seed)
			for _, b := range seed.Brokers {
				if len(still) > 0 {
					break
				}
				kr, berr := cl.Broker(int(b.NodeID)).RetriableRequest(ctx, req)
				if berr != nil {
					err = berr
					break
				}
				still = listedBy(kr.(*kmsg.MetadataResponse))
			}
		}
		if err == nil && len(still) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			if err != nil {
				return fmt.Errorf("waiting for %v to disappear: %w", topics, err)
			}
			return fmt.Errorf("%v still listed %s after deleting", still, timeout)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// commitOffsets commits the plan's targets for the group as an admin
// (group generation -1), which the coordinator accepts only while the
// group is empty; a member that joined meanwhile is reported as such.
// Their metadata carries the lineage generation the stage's tasks write
// from then on (none: 0, an extractor's).
func commitOffsets(ctx context.Context, adm *kadm.Client, group string, offsets []Offset, generation int64) error {
	meta := ""
	if generation > 0 {
		meta = lineage.OffsetMetadata(generation)
	}
	offs := make(kadm.Offsets)
	for _, o := range offsets {
		offs.Add(kadm.Offset{Topic: o.Topic, Partition: o.Partition, At: o.Target, LeaderEpoch: -1, Metadata: meta})
	}
	resps, err := adm.CommitOffsets(ctx, group, offs)
	if err == nil {
		err = resps.Error()
	}
	if err != nil {
		if errors.Is(err, kerr.UnknownMemberID) || errors.Is(err, kerr.IllegalGeneration) || errors.Is(err, kerr.RebalanceInProgress) || errors.Is(err, kerr.StaleMemberEpoch) {
			if lerr := requireEmpty(ctx, adm, group); lerr != nil {
				return lerr
			}
		}
		return fmt.Errorf("committing offsets for group %q: %w", group, err)
	}
	// Read them back: the plan must be what the group now holds.
	fetched, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return fmt.Errorf("reading back the offsets of group %q: %w", group, err)
	}
	for _, o := range offsets {
		r, ok := fetched.Lookup(o.Topic, o.Partition)
		if !ok || r.Err != nil || r.At != o.Target || r.Metadata != meta {
			return fmt.Errorf("group %q: %s/%d reads back as %d (metadata %q) after committing %d (%q): did a member commit meanwhile?", group, o.Topic, o.Partition, r.At, r.Metadata, o.Target, meta)
		}
	}
	return nil
}
