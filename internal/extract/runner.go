package extract

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/attr"
	"github.com/flecht-dev/flecht/internal/health"
	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/lease"
	"github.com/flecht-dev/flecht/internal/logx"
	"github.com/flecht-dev/flecht/internal/metrics"
	"github.com/flecht-dev/flecht/internal/stage"
	"github.com/flecht-dev/flecht/internal/stagefile"
	"github.com/flecht-dev/flecht/internal/statekey"
)

// Options configure an extractor runner.
type Options struct {
	Stage          *stagefile.Stage
	Cluster        *kafkax.Cluster
	ClientID       string
	StateDir       string
	Metrics        *metrics.Observer
	Log            *slog.Logger
	SessionTimeout time.Duration
	// Health gets the cycle loop's heartbeat and the group's readiness.
	Health *health.Registry
}

// TransactionTimeout bounds one page (docs/contract.md §4: a page may not outlive it).
const TransactionTimeout = 10 * time.Minute

// Runner runs one extractor stage.
type Runner struct {
	stage     *stagefile.Stage
	cluster   *kafkax.Cluster
	clientID  string
	stateDir  string
	changelog string
	template  *statekey.Template
	interval  time.Duration
	session   time.Duration
	obs       *metrics.Observer
	log       *slog.Logger
	configs   *stage.ConfigStore
	// problems logs each config's error once, not every cycle.
	problems *logx.Recurring
	// beat is the cycle loop's heartbeat, also beaten by every page; ready
	// says whether the member joined and started its tokens.
	beat  *health.Loop
	ready *health.Condition
	// watch follows the group session from the group client's own
	// requests, so kafkaReady turns within the session timeout of an
	// outage (kafkax.SessionWatch).
	watch      *kafkax.SessionWatch
	kafkaReady *health.Condition

	ex     Extractor
	admin  *kgo.Client
	group  *kgo.Client
	tokens int // the config topics' common partition count: the token space

	counts *kafkax.PartitionCounts // of output topics

	// assigned wakes the cycle loop when tokens are assigned, so that they
	// start and their configs are polled at once, not a poll_interval
	// later; polledAt is when a cycle last polled each token's configs
	// (the cycle loop's alone).
	assigned chan struct{}
	polledAt map[int32]time.Time

	mu   sync.Mutex
	held *lease.Set // the tokens this instance owns
	// lostSessions counts the group sessions lost since the last
	// assignment.
	lostSessions int
	// cycle is the poll cycle in progress; a revoke cancels it and waits.
	cycleCancel context.CancelFunc
	cycleDone   chan struct{}
}

// NewRunner prepares a runner.
func NewRunner(o Options) *Runner {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Metrics == nil {
		o.Metrics = metrics.New(nil)
	}
	if o.SessionTimeout == 0 {
		o.SessionTimeout = 10 * time.Second
	}
	if o.StateDir == "" {
		o.StateDir = stage.DefaultStateDir(o.Stage.ApplicationID)
	}
	interval := time.Duration(o.Stage.PollInterval)
	return &Runner{
		stage: o.Stage, cluster: o.Cluster, clientID: o.ClientID, stateDir: o.StateDir,
		changelog: o.Stage.ChangelogTopic(), template: o.Stage.Template, interval: interval,
		session: o.SessionTimeout, obs: o.Metrics, log: o.Log,
		configs:  stage.NewConfigStore(o.Stage.ConfigTopics, o.Log, o.Metrics),
		problems: logx.NewRecurring(o.Log),
		// A page may run for its whole transaction timeout.
		beat:       o.Health.Loop("cycle_loop", TransactionTimeout+time.Minute),
		ready:      o.Health.Condition("group", "starting: checking topics, not joined yet"),
		kafkaReady: o.Health.Condition("kafka", "starting: not in contact with the group coordinator yet"),
		assigned:   make(chan struct{}, 1),
		polledAt:   map[int32]time.Time{},
	}
}

// Configs is the stage's config store.
func (r *Runner) Configs() stage.Configs { return r.configs }

// CheckStage refuses an extractor stage that cannot run: poll_interval
// has no default (as upstream), since how often a source may be asked is
// the operator's call, not ours.
func CheckStage(st *stagefile.Stage) error {
	if st.PollInterval <= 0 {
		return fmt.Errorf("stage %s: an extractor needs poll_interval, how often each config is polled (e.g. \"poll_interval: 1m\"); there is no default", stageName(st))
	}
	return nil
}

func stageName(st *stagefile.Stage) string {
	if st.Path != "" {
		return st.Path
	}
	return st.ApplicationID
}

// Run checks the stage and the topics, leases tokens through group
// <application_id> on the config topics, and polls every owned active
// config once per poll_interval until ctx ends or something fails. When
// ctx ends, the page in hand is aborted, not finished: its config's cursor
// stays at the last committed page, which the next owner polls again.
func (r *Runner) Run(ctx context.Context, ex Extractor) error {
	if err := CheckStage(r.stage); err != nil {
		return err
	}
	r.ex = ex
	admin, err := r.cluster.Client(kgo.ClientID(r.clientID))
	if err != nil {
		return err
	}
	defer admin.Close()
	r.admin = admin
	if err := r.cluster.Ping(ctx, admin); err != nil {
		return err
	}
	adm := kadm.NewClient(admin)
	r.counts = kafkax.NewPartitionCounts(adm)
	n, err := kafkax.CommonPartitionCount(ctx, adm, r.stage.ConfigTopics...)
	if err != nil {
		return fmt.Errorf("config topics: %w (their common partition count is the token space)", err)
	}
	r.tokens = n
	if err := r.ensureChangelog(ctx, adm); err != nil {
		return err
	}
	if err := r.configs.Bootstrap(ctx, r.cluster, r.clientID); err != nil {
		return err
	}
	defer r.configs.Close()
	if r.stateDir == "" { // DefaultStateDir of an id that names no directory
		return fmt.Errorf("state dir: %w", stagefile.CheckApplicationID(r.stage.ApplicationID))
	}
	if err := os.MkdirAll(r.stateDir, 0o700); err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	r.held = lease.NewSet(lease.Spec{
		Cluster: r.cluster, Admin: admin, ApplicationID: r.stage.ApplicationID, ClientID: r.clientID,
		StateDir: r.stateDir, Changelog: r.changelog, What: "token", Metrics: r.obs, Log: r.log,
		ProducerOpts: []kgo.Opt{kgo.TransactionTimeout(TransactionTimeout)},
		Ready:        r.ready, Progress: r.beat,
	})

	// The group only leases tokens: its partitions are never fetched. Its
	// members are static (group.instance.id = --client-id): a restarted
	// replica gets its own tokens back at once, with no rebalance of the
	// others and no wait for its killed incarnation's session to expire.
	r.watch = kafkax.NewSessionWatch(r.session, rebalanceTimeout)
	group, err := r.cluster.Client(
		r.watch.Opt(),
		kgo.ClientID(r.clientID),
		kgo.ConsumerGroup(r.stage.ApplicationID),
		kafkax.StaticMember(r.clientID),
		kgo.ConsumeTopics(r.stage.ConfigTopics...),
		kafkax.TaskBalancers(),
		kgo.DisableAutoCommit(),
		kgo.SessionTimeout(r.session),
		kgo.RebalanceTimeout(rebalanceTimeout),
		kgo.OnPartitionsAssigned(r.onAssigned),
		kgo.OnPartitionsRevoked(r.onRevoked),
		kgo.OnPartitionsLost(r.onLost),
	)
	if err != nil {
		return err
	}
	r.group = group
	defer r.shutdown()
	watchCtx, stopWatch := context.WithCancel(context.WithoutCancel(ctx))
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		r.watch.Follow(watchCtx, r.log, r.kafkaReady, "the session in group "+r.stage.ApplicationID, nil)
	}()
	defer func() { stopWatch(); <-watched; r.kafkaReady.Set(false, "stopped") }()

	r.log.Info("extractor running", "application_id", r.stage.ApplicationID, "client_id", r.clientID,
		"tokens", n, "poll_interval", r.interval)
	work := context.WithoutCancel(ctx)
	ticker := time.NewTicker(r.interval)
	defer ticker.Stop()
	// A node killed, paused or restarting fails requests for a while; the
	// stage waits with a bounded backoff and carries on, and only an error
	// kafkax.Retriable does not recognise ends it.
	bo := kafkax.Backoff{Min: 200 * time.Millisecond, Max: 5 * time.Second}
	onlyNew := false // a wake by an assignment polls only the tokens it started
	for {
		r.beat.Beat()
		err := r.step(ctx, work, onlyNew)
		switch {
		case err == nil:
			if bo.Attempts() > 0 {
				r.log.Info("Kafka is back: the extractor polls again", "failed_attempts", bo.Attempts())
			}
			bo.Reset()
		case errors.As(err, new(*fencedError)):
			r.log.Warn("a token's producer was fenced: waiting a session timeout for the group to revoke it if another member owns it now, then restarting it",
				"error", err, "wait", r.session)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(r.session):
			}
			continue
		case kafkax.Retriable(err):
			if werr := bo.Wait(ctx, r.log, "the extractor's cycle", err); werr != nil {
				return nil
			}
			continue
		default:
			return err
		}
		r.beat.Idle(r.interval) // the ticker's wait is not a stall
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
			onlyNew = false
		case <-r.assigned:
			onlyNew = true
		}
	}
}

// step starts the tokens assigned since the last cycle, reads config
// changes and polls every owned config once; with onlyNew, only the
// configs of the tokens it started (the others keep their interval).
func (r *Runner) step(ctx, work context.Context, onlyNew bool) error {
	started, err := r.startPending(work)
	if err != nil {
		return err
	}
	if onlyNew && len(started) == 0 {
		return nil
	}
	if err := r.configs.Drain(work); err != nil {
		return err
	}
	var only map[int32]bool
	if onlyNew {
		// A token this process polled less than an interval ago (one the
		// rebalance took and gave back) waits for the ticker.
		only = map[int32]bool{}
		for t := range started {
			if at, ok := r.polledAt[t]; !ok || time.Since(at) >= r.interval {
				only[t] = true
			}
		}
		if len(only) == 0 {
			return nil
		}
	}
	return r.runCycle(ctx, only)
}

func (r *Runner) ensureChangelog(ctx context.Context, adm *kadm.Client) error {
	details, err := kafkax.DescribeTopics(ctx, adm, r.changelog)
	var missing *kafkax.MissingTopicsError
	if errors.As(err, &missing) {
		err = kafkax.CreateTopic(ctx, adm, r.changelog, int32(r.tokens), map[string]string{"cleanup.policy": "compact"})
		if err == nil {
			r.log.Info("created changelog", "topic", r.changelog, "partitions", r.tokens)
			return nil
		}
		if !errors.As(err, &missing) {
			return fmt.Errorf("changelog: %w", err)
		}
		// Another replica created it a moment ago and the metadata does
		// not show it yet: wait for it, then check it like any other.
		if err := kafkax.WaitTopic(ctx, adm, r.changelog, true); err != nil {
			return fmt.Errorf("changelog: %w", err)
		}
		details, err = kafkax.DescribeTopics(ctx, adm, r.changelog)
	}
	if err != nil {
		return fmt.Errorf("changelog: %w", err)
	}
	if got := len(details[r.changelog].Partitions); got != r.tokens {
		return fmt.Errorf("changelog %q has %d partitions but the config topics have %d: token t keeps its state in changelog partition t", r.changelog, got, r.tokens)
	}
	return nil
}

func (r *Runner) onAssigned(_ context.Context, cl *kgo.Client, assigned map[string][]int32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.lostSessions > 0 {
		// The runbook's check after an outage shorter than the session
		// timeout too, which the session watch does not call one.
		r.log.Info("Kafka is back: rejoined group "+r.stage.ApplicationID+" after its session failed", "failed_attempts", r.lostSessions)
		r.lostSessions = 0
	}
	r.held.Assign(assigned)
	cl.PauseFetchPartitions(assigned) // leased, never fetched
	select {
	case r.assigned <- struct{}{}:
	default: // a wake is pending already
	}
}

// onRevoked stops the cycle in flight (its open pages abort) before the
// revoked tokens go, so the next owner finds no transaction of ours still
// open. The tokens are removed in the same critical section that found no
// cycle running, so a cycle starting meanwhile can never pick up a closed
// token. Under the cooperative assignment the member keeps its other
// tokens, and a cycle stopped mid-page leaves their last transaction's
// outcome unknown (a commit cut short may have landed): they restart,
// fenced anew and brought up to their changelog, as after a retriable
// failure. A session's end with nothing revoked (every cooperative
// rebalance) stops nothing.
func (r *Runner) onRevoked(_ context.Context, _ *kgo.Client, revoked map[string][]int32) {
	if !kafkax.AnyPartition(revoked) {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	stopped := false
	for r.cycleCancel != nil {
		cancel, done := r.cycleCancel, r.cycleDone
		r.mu.Unlock()
		cancel()
		<-done
		r.mu.Lock()
		stopped = true
	}
	r.held.Revoke(revoked)
	if stopped {
		for _, t := range r.held.Held() {
			r.held.Restart(t)
		}
	}
	r.obs.TokensAssigned.Set(float64(r.held.Len()))
}

// onLost stops the cycle in flight and closes every token after the
// group session was lost (a coordinator gone, or this member dropped):
// their pages could not commit, and another member may own them now.
// Until franz-go has rejoined and tokens are assigned again, the member
// is not ready, and says why. franz-go calls it on every failed rejoin,
// with nothing left to lose.
func (r *Runner) onLost(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for r.cycleCancel != nil {
		cancel, done := r.cycleCancel, r.cycleDone
		r.mu.Unlock()
		cancel()
		<-done
		r.mu.Lock()
	}
	r.lostSessions++
	r.held.Lost("the group session was lost (a coordinator unavailable, or this member dropped)")
	r.obs.TokensAssigned.Set(0)
	if kafkax.AnyPartition(lost) {
		r.log.Warn("group session lost: every token stopped; they start again once the group assigns them", "tokens", kafkax.FormatPartitions(lost))
	}
}

// rebalanceTimeout bounds a rebalance of the extractor's group: how long
// the coordinator waits for every member to rejoin (franz-go's default).
const rebalanceTimeout = time.Minute

// startPending fences and restores the tokens assigned since the last
// cycle and returns those it started.
func (r *Runner) startPending(ctx context.Context) (map[int32]bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	started := map[int32]bool{}
	err := r.held.StartPending(ctx, func(t int32) {
		started[t] = true
		r.log.Info("token started", "token", t)
	})
	r.obs.TokensAssigned.Set(float64(r.held.Len()))
	return started, err
}

func (r *Runner) shutdown() {
	r.group.Close() // leaves the group; revoke closes the tokens
	r.mu.Lock()
	defer r.mu.Unlock()
	r.held.CloseAll()
	r.obs.TokensAssigned.Set(0)
}

// runCycle polls every owned active config once (of the tokens in only,
// when it is not nil): configs of one token in turn (one producer, one
// transaction at a time), tokens concurrently.
func (r *Runner) runCycle(ctx context.Context, only map[int32]bool) error {
	start := time.Now()
	cycleCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	r.mu.Lock()
	r.cycleCancel, r.cycleDone = cancel, done
	work := map[*lease.Lease][]owned{}
	active := 0
	mine := map[string]bool{} // the configs this cycle answers for
	for key, cfg := range r.configs.Snapshot() {
		if held, err := stage.Suspended(cfg); err != nil || held {
			if err != nil {
				r.log.Error("config skipped", "config", key, "error", err)
			}
			continue
		}
		active++
		sk, err := r.stateKey(key, cfg)
		if err != nil {
			mine[key] = true
			r.problems.Failed(key, err, "config skipped: its state key does not render", "config", key)
			continue
		}
		t := kafkax.Partition([]byte(sk), r.tokens)
		if tk, ok := r.held.Get(t); ok && (only == nil || only[t]) {
			r.polledAt[t] = start
			mine[key] = true
			work[tk] = append(work[tk], owned{key: key, stateKey: sk, cfg: cfg})
		}
	}
	r.mu.Unlock()
	if only == nil { // a partial cycle does not answer for the others
		r.problems.Retain(func(key string) bool { return mine[key] })
	}
	r.obs.ActiveConfigs.Set(float64(active))
	defer func() {
		r.mu.Lock()
		r.cycleCancel, r.cycleDone = nil, nil
		r.mu.Unlock()
		cancel()
		close(done)
		r.obs.PollCycle.Observe(time.Since(start).Seconds())
	}()

	// Stop the cycle when the process is asked to stop: the page in hand
	// aborts, and its cursor stays where the last committed page left it.
	stop := context.AfterFunc(ctx, cancel)
	defer stop()

	var wg sync.WaitGroup
	errs := make(chan error, len(work))
	retry := make(chan retriedToken, len(work))
	for tk, configs := range work {
		sort.Slice(configs, func(i, j int) bool { return configs[i].key < configs[j].key })
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, c := range configs {
				if cycleCtx.Err() != nil {
					return
				}
				err := r.pollOne(cycleCtx, tk, c)
				switch {
				case err == nil:
					r.problems.Recovered(c.key, "config recovered: polled without error", "config", c.key)
				case IsConfigError(err):
					r.problems.Failed(c.key, err, "poll failed; the config is retried next cycle (logged again only when its error changes)", "config", c.key)
				case cycleCtx.Err() != nil:
					return // revoked or stopping: the page was aborted
				case kafkax.Retriable(err), kafkax.Fenced(err):
					// The page was aborted; whether an unconfirmed commit
					// went through only the changelog knows, so the token
					// restarts: fenced anew, restored, polled again. A
					// fence is either a newer owner (then the group
					// revokes the token before it restarts, see Run) or a
					// transaction coordinator that moved mid-commit.
					retry <- retriedToken{n: tk.N, config: c.key, err: err}
					return
				default:
					errs <- err
					cancel()
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	close(retry)
	var first error
	for rt := range retry {
		r.mu.Lock()
		r.held.Restart(rt.n)
		r.mu.Unlock()
		r.log.Warn("poll failed on a retriable Kafka error: the page was aborted; the token restarts (fence, changelog restore) and its configs are polled again",
			"token", rt.n, "config", rt.config, "error", rt.err)
		if first == nil {
			first = rt.err
		}
	}
	if err := <-errs; err != nil {
		return err
	}
	if first != nil && kafkax.Fenced(first) {
		return &fencedError{err: first}
	}
	return first // retriable: Run backs off before the next cycle
}

// fencedError: a token's producer was fenced. If another member owns the
// token now, this member's group session has ended and the group revokes
// the token within a heartbeat; Run waits a session timeout before
// restarting it, so a zombie never takes a token back from its new owner.
type fencedError struct{ err error }

func (e *fencedError) Error() string { return "fenced: " + e.err.Error() }
func (e *fencedError) Unwrap() error { return e.err }

// retriedToken is a token whose page failed on a retriable error.
type retriedToken struct {
	n      int32
	config string
	err    error
}

type owned struct {
	key, stateKey string
	cfg           attr.Config
}

func (r *Runner) stateKey(key string, cfg attr.Config) (string, error) {
	if r.template.IsDefault() {
		return key, nil
	}
	return r.template.Render(key, cfg.View())
}
