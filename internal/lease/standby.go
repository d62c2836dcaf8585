package lease

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/flecht-dev/flecht/internal/health"
	"github.com/flecht-dev/flecht/internal/metrics"
	"github.com/flecht-dev/flecht/internal/stagefile"
	"github.com/flecht-dev/flecht/internal/state"
)

// DefaultStandbyPoll is how often a standby reads its changelog's new
// records: what a task that fails over to it reads at most is what the
// owner committed in about this long.
const DefaultStandbyPoll = 500 * time.Millisecond

// Standbys keeps the standby replicas the group gave this member: stores
// of tasks another member runs, each kept in the directory its task
// would use here and brought up to its changelog partition's last stable
// offset every poll (read_committed, as a restore; the same checkpoint
// and trust rules). When the task comes here, Start finds the store warm
// and reads only what was committed since the last poll. A standby costs
// no transaction and fences nothing. A task running here is never also a
// standby (Activate).
type Standbys struct {
	spec *Spec
	poll time.Duration
	obs  *metrics.Observer
	log  *slog.Logger

	mu     sync.Mutex
	want   map[int32]bool // the standbys of the latest assignment
	active map[int32]bool // tasks running (or starting) here
	slots  map[int32]*standby
	warm   map[int32]bool // standbys whose store is open and followed
	kick   chan struct{}
	shown  *health.Condition // the readiness check that lists them
	// warmUps are the standbys of tasks the group is to move here once
	// warm; probe asks for the rebalance that moves them (nil: none).
	warmUps map[int32]bool
	probe   func()
	polls   sync.WaitGroup // the polls under way
}

// standby is one kept store; mu is held while it is polled or closed.
type standby struct {
	mu     sync.Mutex
	store  *state.Store
	plan   state.Plan
	cancel context.CancelFunc // the poll under way, if any
	failed bool               // the last poll failed (logged once)
	busy   bool               // a poll of it runs (guarded by Standbys.mu)
}

// NewStandbys returns the standbys of the leases spec starts, polled
// every poll (DefaultStandbyPoll when 0). Run follows them; set it as
// spec.Standbys so that Start takes a store over from its standby.
func NewStandbys(spec *Spec, poll time.Duration) *Standbys {
	if poll <= 0 {
		poll = DefaultStandbyPoll
	}
	s := &Standbys{spec: spec, poll: poll, obs: spec.Metrics, log: spec.Log, want: map[int32]bool{}, active: map[int32]bool{},
		slots: map[int32]*standby{}, warm: map[int32]bool{}, warmUps: map[int32]bool{}, kick: make(chan struct{}, 1)}
	if s.obs == nil {
		s.obs = metrics.New(nil)
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	return s
}

// ProbeWith sets how a member asks for a rebalance once a warm-up is
// warm (the consumer's ForceRebalance: its join metadata, which lists the
// warm standbys, has changed, so the group rebalances).
func (s *Standbys) ProbeWith(probe func()) {
	s.mu.Lock()
	s.probe = probe
	s.mu.Unlock()
}

// WarmUps sets which of the standbys are warm-ups, as the latest
// assignment says; one already warm asks for the rebalance at once. It
// never blocks: it is called inside the group's sync.
func (s *Standbys) WarmUps(tasks []int32) {
	s.mu.Lock()
	clear(s.warmUps)
	ready := false
	for _, n := range tasks {
		s.warmUps[n] = true
		ready = ready || s.warm[n]
	}
	probe := s.probe
	s.mu.Unlock()
	if ready && probe != nil {
		s.log.Info("a warm-up is warm already: asking the group to move its task here", "warm_ups", tasks)
		probe()
	}
}

// Want sets the standbys this member is to keep, as its latest
// assignment says. It never blocks: it is called inside the group's sync.
func (s *Standbys) Want(tasks []int32) {
	s.mu.Lock()
	clear(s.want)
	for _, n := range tasks {
		s.want[n] = true
	}
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// keeps reports whether n is a standby here (wanted, or its store still
// open) or its task runs here; a nil Standbys keeps none.
func (s *Standbys) keeps(n int32) bool {
	if s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.keepsLocked(n)
}

func (s *Standbys) keepsLocked(n int32) bool { return s.want[n] || s.slots[n] != nil || s.active[n] }

// removeUnkept runs remove for n's store unless n is a standby here or its
// task runs here, holding the lock that keeps a standby from starting
// meanwhile. A nil Standbys just removes.
func (s *Standbys) removeUnkept(n int32, remove func() error) (bool, error) {
	if s == nil {
		return true, remove()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.keepsLocked(n) {
		return false, nil
	}
	return true, remove()
}

// Held lists the standbys whose store is warm here, for the member's join
// metadata: the leader leaves them here.
func (s *Standbys) Held() []int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(maps.Keys(s.warm))
}

// Activate stops following n and closes its store, before a task of n
// opens the same directory here: a poll under way is cancelled (what it
// loaded stays, with its checkpoint).
func (s *Standbys) Activate(n int32) {
	s.mu.Lock()
	s.active[n] = true
	sb := s.slots[n]
	if sb != nil && sb.cancel != nil {
		sb.cancel()
	}
	s.mu.Unlock()
	if sb != nil {
		s.closeSlot(n, sb)
	}
}

// Deactivate says that the task of n no longer runs here: a standby of n
// may follow it again.
func (s *Standbys) Deactivate(n int32) {
	s.mu.Lock()
	delete(s.active, n)
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// ShowIn lists the standbys in a readiness check of their own, which
// always holds: a standby that is still copying its task's state
// (warming up) does no work for the group, so it never makes an instance
// unready; the check only tells warm standbys, warming ones and warm-ups
// apart.
func (s *Standbys) ShowIn(c *health.Condition) {
	s.shown = c
	s.show()
}

// show updates the readiness check and the metric of standbys by state.
func (s *Standbys) show() {
	s.mu.Lock()
	var warm, warming, warmUps []int32
	for n := range s.want {
		switch {
		case s.active[n]:
		case s.warmUps[n]:
			warmUps = append(warmUps, n)
		case s.warm[n]:
			warm = append(warm, n)
		default:
			warming = append(warming, n)
		}
	}
	s.mu.Unlock()
	slices.Sort(warm)
	slices.Sort(warming)
	slices.Sort(warmUps)
	s.obs.StandbysKept(len(warm), len(warming), len(warmUps))
	s.shown.Set(true, standbysDetail(warm, warming, warmUps))
}

// standbysDetail says which standbys an instance keeps, by state.
func standbysDetail(warm, warming, warmUps []int32) string {
	if len(warm)+len(warming)+len(warmUps) == 0 {
		return "no standby kept here"
	}
	var parts []string
	if len(warm) > 0 {
		parts = append(parts, fmt.Sprintf("warm standbys of tasks %v (following their changelogs)", warm))
	}
	if len(warming) > 0 {
		parts = append(parts, fmt.Sprintf("standbys of tasks %v warming up (copying their state from the changelog)", warming))
	}
	if len(warmUps) > 0 {
		parts = append(parts, fmt.Sprintf("warm-ups of tasks %v (their state copied here before the tasks move here)", warmUps))
	}
	return strings.Join(parts, "; ")
}

// Run follows the standbys until ctx ends, then closes their stores.
func (s *Standbys) Run(ctx context.Context) {
	t := time.NewTicker(s.poll)
	defer t.Stop()
	for {
		s.round(ctx)
		select {
		case <-ctx.Done():
			s.polls.Wait()
			s.closeAll()
			return
		case <-t.C:
		case <-s.kick:
		}
	}
}

// round starts a poll of every standby wanted and not active here whose
// last poll has ended, with one description of their changelog
// partitions, and closes the stores of those no longer wanted. It does
// not wait for the polls: a standby copying a long changelog for the
// first time holds up no other.
func (s *Standbys) round(ctx context.Context) {
	s.mu.Lock()
	var follow []int32
	slots := map[int32]*standby{}
	var drop []int32
	for n := range s.want {
		if s.active[n] {
			continue
		}
		sb := s.slots[n]
		if sb == nil {
			sb = &standby{}
			s.slots[n] = sb
		}
		if !sb.busy {
			sb.busy = true
			follow = append(follow, n)
			slots[n] = sb
		}
	}
	for n, sb := range s.slots {
		if !s.want[n] || s.active[n] {
			drop = append(drop, n)
			if sb.cancel != nil {
				sb.cancel()
			}
		}
	}
	s.mu.Unlock()
	for _, n := range drop {
		s.mu.Lock()
		sb := s.slots[n]
		s.mu.Unlock()
		if sb != nil {
			s.closeSlot(n, sb)
		}
	}
	if len(follow) > 0 {
		slices.Sort(follow)
		cls, err := state.DescribeChangelogs(ctx, kadm.NewClient(s.spec.Admin), s.spec.Changelog, follow)
		for _, n := range follow {
			sb := slots[n]
			s.polls.Go(func() {
				defer func() {
					s.mu.Lock()
					sb.busy = false
					s.mu.Unlock()
				}()
				s.pollOne(ctx, n, sb, cls[n], err)
			})
		}
	}
	s.show()
}

// pollOne brings standby n up to its changelog's last stable offset, as
// described (cl), unless describing it failed (described).
func (s *Standbys) pollOne(ctx context.Context, n int32, sb *standby, cl state.Changelog, described error) {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s.mu.Lock()
	if s.slots[n] != sb || s.active[n] || !s.want[n] {
		s.mu.Unlock()
		return // activated, or closed, meanwhile
	}
	sb.cancel = cancel
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		sb.cancel = nil
		s.mu.Unlock()
	}()
	err := described
	if err == nil {
		err = s.follow(ctx, n, sb, cl)
	}
	if err != nil && ctx.Err() == nil {
		if !sb.failed {
			s.log.Warn("standby cannot follow its changelog; retrying", "n", n, "error", err)
		}
		sb.failed = true
		return
	}
	if sb.failed {
		s.log.Info("standby follows its changelog again", "n", n)
		sb.failed = false
	}
}

func (s *Standbys) follow(ctx context.Context, n int32, sb *standby, cl state.Changelog) error {
	if sb.store == nil {
		dir, err := stagefile.JoinName(s.spec.StateDir, strconv.Itoa(int(n)))
		if err != nil {
			return err
		}
		store, plan, err := state.Prepare(dir, s.spec.ApplicationID, cl, time.Now(), s.log)
		if err != nil {
			return err
		}
		sb.store, sb.plan = store, plan
		s.log.Info("standby started", "n", n, "restore", plan.Kind(), "from", plan.From, "to", cl.End)
	}
	s.obs.StandbyLag(n, cl.End-sb.plan.From)
	res, err := state.Restore(ctx, s.spec.Admin, cl, sb.store, sb.plan, nil)
	if err != nil {
		// What was loaded stays with its checkpoint; the next poll opens
		// the store anew and goes on from there.
		_ = sb.store.Close()
		sb.store = nil
		return err
	}
	sb.plan = sb.plan.Then(res, cl)
	s.mu.Lock()
	warmed := !s.warm[n]
	s.warm[n] = true
	probe := s.probe
	warmUp := s.warmUps[n]
	s.mu.Unlock()
	if warmed && warmUp && probe != nil {
		s.log.Info("warm-up caught up: asking the group to move its task here", "n", n, "to", res.End)
		probe()
	}
	return nil
}

// closeSlot closes standby n's store, keeping its files (and checkpoint)
// for a task or a standby of n here later.
func (s *Standbys) closeSlot(n int32, sb *standby) {
	sb.mu.Lock()
	if sb.store != nil {
		_ = sb.store.Close()
		sb.store = nil
	}
	sb.mu.Unlock()
	s.mu.Lock()
	if s.slots[n] == sb {
		delete(s.slots, n)
	}
	delete(s.warm, n)
	s.mu.Unlock()
	s.obs.StandbyDropped(n)
}

func (s *Standbys) closeAll() {
	s.mu.Lock()
	slots := maps.Clone(s.slots)
	s.mu.Unlock()
	for n, sb := range slots {
		s.closeSlot(n, sb)
	}
}
