// Package lease starts and holds what a group member owns by partition
// number: a transformer's tasks (one per input partition) and an extractor's
// tokens (one per config-topic partition). Both are the same thing to
// Kafka: a transactional producer <application_id>-<n>, initialised first so
// that the previous owner is fenced and its open transaction aborted, and,
// for a stateful stage, a local store restored from changelog partition n
// before any work resumes (docs/contract.md §3, §4).
package lease

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/health"
	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/metrics"
	"github.com/flecht-dev/flecht/internal/stagefile"
	"github.com/flecht-dev/flecht/internal/state"
	"github.com/flecht-dev/flecht/internal/textfmt"
)

// Lease is one owned partition number: its fenced producer and its store.
type Lease struct {
	N     int32
	TxnID string
	Prod  *kgo.Client
	// Settler holds a transaction's first produce until the coordinator
	// completed the one before (kafkax.TxnSettler).
	Settler *kafkax.TxnSettler
	Store   *state.Store // nil for a stateless stage
	// Restored is the number of changelog records the start replayed, and
	// Restore how: a tail of the kept store, or a full read (with why).
	Restored int
	Restore  state.Plan
	// release, when set, runs once the lease is closed.
	release func()
}

// Close releases the lease: its producer, and its store, whose files stay
// for the next start of n here (which then reads only the changelog after
// the store's checkpoint).
func (l *Lease) Close() {
	if l.Prod != nil {
		l.Prod.Close()
	}
	if l.Store != nil {
		_ = l.Store.Close()
	}
	if l.release != nil {
		l.release()
		l.release = nil
	}
}

// Spec says how leases of one stage are started.
type Spec struct {
	Cluster       *kafkax.Cluster
	Admin         *kgo.Client // reads the changelog on restore
	ApplicationID string
	ClientID      string
	// StateDir holds one store per lease, in a subdirectory named n.
	StateDir string
	// Changelog is the stage's changelog topic; empty for a stateless
	// stage, whose leases open no store.
	Changelog string
	// ProducerOpts are added to the producer's identity (client id,
	// transactional id, explicit partitions).
	ProducerOpts []kgo.Opt
	// What names a lease in messages: "task" or "token".
	What    string
	Metrics *metrics.Observer
	Log     *slog.Logger
	// Ready, when set, tells the readiness probe whether the member has
	// joined its group and started every lease assigned to it; Progress is
	// beaten while a lease starts, so a long restore is not a stall.
	Ready    *health.Condition
	Progress *health.Loop
	// Standbys, when set, holds the standby replicas this member keeps: a
	// lease takes its store over (Start), and gives it back (Close).
	Standbys *Standbys
	// CleanupDelay, when positive, removes a store in StateDir that no
	// lease or standby used for that long (SweepStores).
	CleanupDelay time.Duration

	// restoring holds the restores under way, for the readiness probe.
	restoring *restoreBoard
}

// Start brings up lease n in the order the contract requires: initialise
// the producer (fencing the previous owner and aborting its open
// transaction), then bring the store up to the changelog partition's end
// as it is now: the kept store and the changelog after its checkpoint, or
// the whole changelog when the kept store cannot be trusted (state.Prepare
// says when). Only then may the caller resume work on n.
func Start(ctx context.Context, s *Spec, n int32) (*Lease, error) {
	log, obs := s.Log, s.Metrics
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if obs == nil {
		obs = metrics.New(nil)
	}
	// The store's path is checked before anything starts: a stage whose
	// state directory is unset has nowhere to put it.
	var dir string
	if s.Changelog != "" {
		var err error
		if dir, err = stagefile.JoinName(s.StateDir, strconv.Itoa(int(n))); err != nil {
			return nil, fmt.Errorf("%s %d: state store: %w", s.What, n, err)
		}
	}
	l := &Lease{N: n, TxnID: stagefile.TransactionalID(s.ApplicationID, n)}
	if s.Standbys != nil && s.Changelog != "" {
		// A standby of n here stops and closes the store before the task
		// opens it; once the lease closes, the standby may follow n again.
		s.Standbys.Activate(n)
		l.release = func() { s.Standbys.Deactivate(n) }
	}
	opts := append([]kgo.Opt{
		kgo.ClientID(s.ClientID),
		kgo.TransactionalID(l.TxnID),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
	}, s.ProducerOpts...)
	newClientMu.Lock()
	prod, err := s.Cluster.Client(opts...)
	newClientMu.Unlock()
	if err != nil {
		return nil, err
	}
	l.Prod = prod
	l.Settler = kafkax.NewTxnSettler(prod, l.TxnID)
	start := time.Now()
	if _, _, err := prod.ProducerID(ctx); err != nil {
		l.Close()
		return nil, fmt.Errorf("%s %d: initializing producer %s (fencing): %w", s.What, n, l.TxnID, kafkax.NeedsACL(err, "Write on transactional ID "+l.TxnID))
	}
	log.Debug(s.What+" fenced", "n", n, "transactional_id", l.TxnID, "took", time.Since(start))
	if s.Changelog == "" {
		return l, nil
	}
	if err := l.restore(ctx, s, n, dir, log, obs); err != nil {
		l.Close()
		return nil, fmt.Errorf("%s %d: %w", s.What, n, err)
	}
	return l, nil
}

// restore opens the lease's store and brings it up to the changelog's end.
func (l *Lease) restore(ctx context.Context, s *Spec, n int32, dir string, log *slog.Logger, obs *metrics.Observer) error {
	began := time.Now()
	cl, err := state.DescribeChangelog(ctx, kadm.NewClient(s.Admin), s.Changelog, n)
	if err != nil {
		return err
	}
	store, plan, err := state.Prepare(dir, s.ApplicationID, cl, time.Now(), log)
	if err != nil {
		return err
	}
	l.Store, l.Restore = store, plan
	s.Progress.Beat()
	obs.Restoring(n, cl.End-plan.From, 0)
	s.restoring.begin(n, cl.End-plan.From)
	defer s.restoring.end(n)
	res, err := state.Restore(ctx, s.Admin, cl, store, plan, func(p state.Progress) {
		s.Progress.Beat()
		obs.Restoring(n, p.Left, p.ETA())
		s.restoring.update(n, p)
	})
	if err != nil {
		obs.Restoring(n, 0, 0) // not restoring any more; the next start says anew
		return err
	}
	l.Restored = res.Records
	obs.Restored(n, plan.Kind(), res.Records)
	attrs := []any{"n", n, "restore", plan.Kind(), "from", plan.From, "to", res.End, "changelog_records", res.Records,
		"took", time.Since(began).Round(time.Millisecond)}
	if !plan.Tail {
		attrs = append(attrs, "why", plan.Why)
	}
	log.Info(s.What+" restored", attrs...)
	return nil
}

// newClientMu serialises building producers: franz-go dedupes the codec
// list of a ProducerBatchCompression option in place, so clients built at
// once from one shared option (Spec.ProducerOpts) would race on it.
var newClientMu sync.Mutex

// Set holds the leases a member owns and the partition numbers assigned to
// it but not started yet. Starting is left to the caller's loop, never done
// in a group callback: a restore there would stall the whole group.
//
// A Set is not safe for concurrent use; the runner's own lock guards it,
// since that lock also keeps leases from changing under a batch.
type Set struct {
	spec    Spec
	held    map[int32]*Lease
	pending map[int32]bool
	joined  bool     // an assignment arrived: the member is in its group
	janitor *janitor // nil: stores stay
}

// NewSet returns an empty set whose leases start as spec says.
func NewSet(spec Spec) *Set {
	spec.restoring = &restoreBoard{ready: spec.Ready, app: spec.ApplicationID, what: spec.What}
	s := &Set{spec: spec, held: map[int32]*Lease{}, pending: map[int32]bool{}}
	if spec.Changelog != "" && spec.CleanupDelay > 0 && spec.StateDir != "" {
		log := spec.Log
		if log == nil {
			log = slog.New(slog.DiscardHandler)
		}
		s.janitor = &janitor{dir: spec.StateDir, delay: spec.CleanupDelay, log: log, unused: map[int32]time.Time{}}
	}
	return s
}

// SweepStores removes the stores in the state directory that no lease,
// pending start or standby has used for the spec's CleanupDelay; it looks
// at the directory at most every few seconds. Call it where the set is
// guarded, as everything else.
func (s *Set) SweepStores(now time.Time) {
	if s.janitor == nil || !s.joined {
		return // before the first assignment every store looks unused
	}
	s.janitor.sweep(now, func(n int32) bool { return s.held[n] != nil || s.pending[n] }, s.spec.Standbys)
}

// Assign marks the partition numbers of an assignment pending. A number
// assigned on several topics (co-partitioned inputs) is one lease.
func (s *Set) Assign(assigned map[string][]int32) {
	for _, parts := range assigned {
		for _, p := range parts {
			s.pending[p] = true
		}
	}
	s.joined = true
	s.report()
}

// Revoke closes the leases of a revocation and forgets pending ones.
func (s *Set) Revoke(revoked map[string][]int32) {
	for _, parts := range revoked {
		for _, p := range parts {
			delete(s.pending, p)
			if l, ok := s.held[p]; ok {
				l.Close()
				delete(s.held, p)
			}
		}
	}
	s.report()
}

// Lost closes every lease and forgets the pending numbers after the
// member's group session was lost: until an assignment arrives again the
// member is not ready.
func (s *Set) Lost(why string) {
	for p, l := range s.held {
		l.Close()
		delete(s.held, p)
	}
	clear(s.pending)
	s.joined = false
	s.spec.Ready.Set(false, fmt.Sprintf("rejoining group %s: %s", s.spec.ApplicationID, why))
}

// Restart closes lease n and marks it pending again, so that the caller's
// next StartPending fences its producer anew and brings its store up to
// the changelog: what a retriable failure of a transaction whose outcome
// is unknown needs (the changelog, not the local store, says whether it
// committed). A number not held is left alone.
func (s *Set) Restart(n int32) {
	if l, ok := s.held[n]; ok {
		l.Close()
		delete(s.held, n)
		s.pending[n] = true
		s.report() // not ready until it started again
	}
}

// Pending returns the numbers waiting to start, in order.
func (s *Set) Pending() []int32 {
	out := make([]int32, 0, len(s.pending))
	for p := range s.pending {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// StartPending starts the pending leases, each in the contract's order
// (fence, then restore) but all at once, since restores are independent and
// a restart waits for the slowest; then it calls started for each, in
// order (where a runner resumes fetching n). The first failure is
// returned; the leases that started are kept.
func (s *Set) StartPending(ctx context.Context, started func(n int32)) error {
	failed := s.StartEligible(ctx, nil, started)
	for _, p := range s.Pending() {
		if err, ok := failed[p]; ok {
			return err
		}
	}
	return nil
}

// StartEligible is StartPending for the pending numbers eligible admits
// (every one when it is nil): a caller that backs off before starting a
// lease again leaves it pending meanwhile. It returns each failure by
// number; a number that failed stays pending.
func (s *Set) StartEligible(ctx context.Context, eligible func(n int32) bool, started func(n int32)) map[int32]error {
	var pending []int32
	for _, p := range s.Pending() {
		if eligible == nil || eligible(p) {
			pending = append(pending, p)
		}
	}
	type result struct {
		l   *Lease
		err error
	}
	results := make([]result, len(pending))
	var wg sync.WaitGroup
	for i, p := range pending {
		if _, ok := s.held[p]; ok {
			continue
		}
		wg.Go(func() {
			l, err := Start(ctx, &s.spec, p)
			results[i] = result{l, err}
		})
	}
	wg.Wait()
	var failed map[int32]error
	for i, p := range pending {
		if res := results[i]; res.err != nil {
			if failed == nil {
				failed = map[int32]error{}
			}
			failed[p] = res.err
			continue
		} else if res.l != nil {
			s.held[p] = res.l
		}
		delete(s.pending, p)
		if started != nil {
			started(p)
		}
		s.spec.Progress.Beat()
		s.report() // after started: the caller's work on p has resumed
	}
	return failed
}

// Get returns the lease on n, if held.
func (s *Set) Get(n int32) (*Lease, bool) {
	l, ok := s.held[n]
	return l, ok
}

// Held returns the numbers of the leases held, in order.
func (s *Set) Held() []int32 { return slices.Sorted(maps.Keys(s.held)) }

// Len is the number of leases held.
func (s *Set) Len() int { return len(s.held) }

// CloseAll closes every lease and forgets the pending ones.
func (s *Set) CloseAll() {
	for p, l := range s.held {
		l.Close()
		delete(s.held, p)
	}
	clear(s.pending)
	s.spec.Ready.Set(false, "stopped: left group "+s.spec.ApplicationID)
}

// report tells the readiness probe where the member stands: ready once it
// has joined and every assigned lease is fenced and restored.
func (s *Set) report() {
	if s.spec.Ready == nil || !s.joined {
		return
	}
	started := textfmt.Plural(int64(len(s.held)), s.spec.What)
	if len(s.pending) > 0 {
		s.spec.Ready.Set(false, fmt.Sprintf("joined group %s; %s started, %s %v waiting to be fenced and restored",
			s.spec.ApplicationID, started, s.spec.What, s.Pending()))
		return
	}
	s.spec.Ready.Set(true, fmt.Sprintf("joined group %s; every assigned %s started (%s)", s.spec.ApplicationID, s.spec.What, started))
}
