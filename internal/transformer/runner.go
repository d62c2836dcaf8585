package transformer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/health"
	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/lease"
	"github.com/flecht-dev/flecht/internal/metrics"
	"github.com/flecht-dev/flecht/internal/stage"
	"github.com/flecht-dev/flecht/internal/stagefile"
	"github.com/flecht-dev/flecht/internal/statekey"
)

// Options configure a transformer runner.
type Options struct {
	Stage    *stagefile.Stage
	Cluster  *kafkax.Cluster
	ClientID string
	// StateDir holds the tasks' Pebble stores (one subdirectory per
	// partition), default ${XDG_STATE_HOME:-~/.local/state}/flecht/<application_id>.
	StateDir string
	Metrics  *metrics.Observer
	Log      *slog.Logger
	// TransactionTimeout bounds a task's transaction (default
	// DefaultTransactionTimeout): a task commits once its transaction has
	// been open for a third of it, or sooner (task.mustCut).
	TransactionTimeout time.Duration
	// SessionTimeout is the group session timeout (default 10s): how long a
	// vanished instance keeps its partitions.
	SessionTimeout time.Duration
	// LeaveTimeout bounds how long shutdown waits to leave the group while
	// a rebalance is in progress (default 5s).
	LeaveTimeout time.Duration
	// LeaveGroup makes a clean stop remove this instance from the group
	// (its static member, by --client-id) at once, so that the others take
	// its partitions now rather than once its session timed out: for a
	// scale-down. Without it a stop leaves the member in place, so that a
	// restart within the session timeout (a rolling restart) takes its
	// partitions back without moving anyone else's.
	LeaveGroup bool
	// StartupTimeout bounds how long the start-up checks are retried
	// while the cluster is unreachable or changing (default 2m).
	StartupTimeout time.Duration
	// Health gets the heartbeats of the poll loop and of the tasks, and the
	// group's readiness.
	Health *health.Registry
}

// DefaultTransactionTimeout is the transaction timeout of the task
// producers; Kafka aborts a transaction open longer.
const DefaultTransactionTimeout = 60 * time.Second

// PollFit checks that one poll's records, each taking up to perRecord
// (a module's time_limit), fit in the transaction timeout: a task works
// through a poll before it hears of a rebalance, and the poll loop waits
// for it meanwhile. When they do not, suggest is a max_poll_records that
// leaves room to spare (half the timeout).
func PollFit(maxPollRecords int, perRecord, txnTimeout time.Duration) (suggest int, fits bool) {
	if perRecord <= 0 || time.Duration(maxPollRecords)*perRecord <= txnTimeout {
		return maxPollRecords, true
	}
	return max(int(txnTimeout/2/perRecord), 1), false
}

// Stateless is implemented by transformers that never emit state; the
// runner then creates no changelog and opens no store.
type Stateless interface {
	Stateless() bool
}

// Runner runs one transformer stage.
type Runner struct {
	stage      *stagefile.Stage
	cluster    *kafkax.Cluster
	clientID   string
	stateDir   string
	changelog  string
	template   *statekey.Template
	topicOrder map[string]int
	txnTimeout time.Duration
	session    time.Duration
	obs        *metrics.Observer
	log        *slog.Logger
	configs    *stage.ConfigStore

	tf Transformer
	// logic names tf in the lineage headers (LogicNamer).
	logic string
	raw   RawTransformer // tf's raw path, when it has one the state key allows
	// batchTF, when tf is one, makes each task's instance; its state is
	// kept as bytes (byteState).
	batchTF   BatchTransformer
	byteState bool
	stateful  bool
	admin     *kgo.Client
	consumer  *kgo.Client

	// keys derives state keys, guarding the template's separator.
	keys KeyRule

	counts *kafkax.PartitionCounts // of output topics
	limits *kafkax.RecordLimits    // record size limit of each topic the tasks write

	mu      sync.Mutex      // held while tasks change or records are handed out
	tasks   *lease.Set      // one lease per input partition number
	workers map[int32]*task // the running task of each held lease
	closed  bool            // shut down: late group callbacks change nothing

	commitInterval time.Duration
	// slowest is, per partition, the longest a record or a module call
	// took in its tasks so far (task.slowest), under mu: a restarted task
	// ends its transactions early enough from its first record on.
	slowest map[int32]time.Duration

	failMu  sync.Mutex
	failure error // the first fatal failure, which ends Run

	// Recovery (recovery.go): failed tasks as they reported themselves,
	// and, under mu, the tasks restarting, their backoffs, the tasks the
	// group is asked about, and the partitions sought in this round.
	failedMu    sync.Mutex
	failedTasks []taskFailure
	restarts    map[int32]*restart
	backoffs    map[int32]*kafkax.Backoff
	owners      map[int32]*ownerCheck
	fenced      map[int32]fences // runs of fences without a commit (fenceRun)
	sought      map[int32]bool

	leaveTimeout   time.Duration
	leaveGroup     bool
	stoppedCleanly bool // finishAll committed every task: shutdown may leave
	startupTimeout time.Duration
	beat           *health.Loop      // one round polls and hands out records
	taskBeat       *health.Workers   // each task's steps: process, commit
	ready          *health.Condition // joined, every task started
	// watch follows the group session from the consumer's own requests:
	// kafkaReady turns within the session timeout of an outage, whatever
	// the poll loop is doing (kafkax.SessionWatch).
	watch      *kafkax.SessionWatch
	kafkaReady *health.Condition
	// standbysShown lists the standbys kept here (standby_replicas); it
	// never makes the instance unready.
	standbysShown *health.Condition
	// sessionErrs counts the group session's failures since the last
	// assignment (onLost), and sessionSaid is when the poll loop last
	// logged one.
	sessionErrs atomic.Int32
	sessionSaid atomic.Int64 // Unix nanoseconds

	wakeMu sync.Mutex
	wake   context.CancelFunc // ends the poll in progress

	// stopping is set once Run's context ends (SIGTERM) or the stage
	// fails: the tasks take no more records, and then stopped is done,
	// which interrupts their module calls (Interrupter); stopNow does
	// both.
	stopping atomic.Bool
	stopped  context.Context
	stopNow  func()
}

// NewRunner prepares a runner; Configs is usable (empty) right away and is
// filled when Run bootstraps the config topics.
func NewRunner(o Options) *Runner {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Metrics == nil {
		o.Metrics = metrics.New(nil)
	}
	if o.TransactionTimeout == 0 {
		o.TransactionTimeout = DefaultTransactionTimeout
	}
	if o.SessionTimeout == 0 {
		o.SessionTimeout = 10 * time.Second
	}
	if o.LeaveTimeout == 0 {
		o.LeaveTimeout = 5 * time.Second
	}
	if o.StartupTimeout == 0 {
		o.StartupTimeout = 2 * time.Minute
	}
	if o.StateDir == "" {
		o.StateDir = stage.DefaultStateDir(o.Stage.ApplicationID)
	}
	order := map[string]int{}
	for i, t := range o.Stage.InputTopics {
		order[t] = i
	}
	return &Runner{
		keys:  NewKeyRule(o.Stage.Template),
		stage: o.Stage, cluster: o.Cluster, clientID: o.ClientID, stateDir: o.StateDir,
		changelog: o.Stage.ChangelogTopic(), template: o.Stage.Template, topicOrder: order,
		txnTimeout: o.TransactionTimeout, session: o.SessionTimeout, obs: o.Metrics, log: o.Log,
		configs:        stage.NewConfigStore(o.Stage.ConfigTopics, o.Log, o.Metrics),
		leaveTimeout:   o.LeaveTimeout,
		leaveGroup:     o.LeaveGroup,
		startupTimeout: o.StartupTimeout,
		workers:        map[int32]*task{},
		restarts:       map[int32]*restart{},
		backoffs:       map[int32]*kafkax.Backoff{},
		owners:         map[int32]*ownerCheck{},
		fenced:         map[int32]fences{},
		sought:         map[int32]bool{},
		slowest:        map[int32]time.Duration{},
		commitInterval: time.Duration(o.Stage.CommitInterval),
		// A round may wait for a task that waits for its commit, which
		// takes up to the transaction timeout; so may a task's step.
		beat:          o.Health.Loop("poll_loop", o.TransactionTimeout+time.Minute),
		taskBeat:      o.Health.Workers("tasks", "task", o.TransactionTimeout+time.Minute),
		ready:         o.Health.Condition("group", "starting: checking topics, not joined yet"),
		kafkaReady:    o.Health.Condition("kafka", "starting: not in contact with the group coordinator yet"),
		standbysShown: standbysCondition(o),
	}
}

// standbysCondition is the readiness check listing the standbys, for a
// stage with standby_replicas: met from the start, since a standby is no
// work the group waits for.
func standbysCondition(o Options) *health.Condition {
	if o.Stage.StandbyReplicas == 0 {
		return nil
	}
	c := o.Health.Condition("standbys", "no standby kept here yet")
	c.Set(true, "no standby kept here yet")
	return c
}

// taskCompression is zstd (docs/contract.md §1) at its fastest level for the task
// producers: a task writes every input again, so encoding is per-record
// CPU, and the fastest level also keeps each encoder's tables small.
func taskCompression() kgo.Opt {
	const zstdFastest = 1 // klauspost/compress/zstd.SpeedFastest
	return kgo.ProducerBatchCompression(kgo.ZstdCompression().WithLevel(zstdFastest))
}

// Fetch sizes of the input consumer, in compressed bytes per fetch request
// and per partition in it. Records of a well-compressed topic take ten
// times that once decompressed, and a fetch is held until its last record
// is processed: these keep a fetch's memory to a few MiB, while a fetch
// round trip still brings thousands of records.
const (
	fetchMaxBytes          = 512 << 10
	fetchMaxPartitionBytes = 64 << 10
)

// Configs is the stage's config store, for transformers that look up.
func (r *Runner) Configs() stage.Configs { return r.configs }

// Run checks the topics, bootstraps the config store, joins the group and
// processes batches until ctx ends (then it finishes the batch in hand and
// returns nil) or something fails (it returns the error: let it crash).
func (r *Runner) Run(ctx context.Context, tf Transformer) error {
	stopped, stop := context.WithCancel(context.Background())
	r.stopped = stopped
	r.stopNow = func() {
		r.stopping.Store(true) // before any call is interrupted: see flushCalls
		stop()
	}
	defer stop()
	defer context.AfterFunc(ctx, r.stopNow)()
	r.use(tf)
	if !r.template.IsDefault() && !r.stateful {
		r.log.Warn("state_key is set but the transformer keeps no state; it has no effect")
	}

	admin, err := r.cluster.Client(kgo.ClientID(r.clientID))
	if err != nil {
		return err
	}
	defer admin.Close()
	r.admin = admin
	if err := r.prepare(ctx, admin); err != nil {
		if errors.Is(err, errStopped) {
			return nil
		}
		return err
	}
	defer r.configs.Close()
	if r.stateDir == "" {
		return fmt.Errorf("state dir: %w", stagefile.CheckApplicationID(r.stage.ApplicationID))
	}
	if err := os.MkdirAll(r.stateDir, 0o700); err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	spec := lease.Spec{
		Cluster: r.cluster, Admin: admin, ApplicationID: r.stage.ApplicationID, ClientID: r.clientID,
		StateDir: r.stateDir, What: "task", Metrics: r.obs, Log: r.log,
		ProducerOpts: []kgo.Opt{
			kgo.TransactionTimeout(r.txnTimeout),
			kgo.MaxVersions(taskProducerVersions()),
			kgo.ProducerLinger(time.Millisecond),
			kgo.RecordRetries(10),
			taskCompression(),
			kgo.ProducerBatchMaxBytesFn(r.limits.Of),
		},
	}
	if r.stateful {
		spec.Changelog = r.changelog
	}
	spec.Ready, spec.Progress = r.ready, r.beat
	spec.CleanupDelay = time.Duration(r.stage.StateCleanupDelay)
	balancers := kafkax.TaskBalancers()
	var standbys *lease.Standbys
	switch n := r.stage.StandbyReplicas; {
	case n > 0 && r.stateful:
		standbys = lease.NewStandbys(&spec, 0)
		standbys.ShowIn(r.standbysShown)
		spec.Standbys = standbys
		balancers = kafkax.TaskBalancersWith(kafkax.Standbys{Replicas: n, Held: standbys.Held, Assigned: standbys.Want,
			WarmUp: true, WarmingUp: standbys.WarmUps})
	case n > 0:
		r.standbysShown.Set(true, "standby_replicas is ignored: the stage keeps no state")
		r.log.Warn("standby_replicas is ignored: the stage keeps no state, so a task that moves has nothing to restore", "standby_replicas", n)
	}
	r.tasks = lease.NewSet(spec)

	r.watch = kafkax.NewSessionWatch(r.session, r.txnTimeout)
	consumer, err := r.cluster.Client(
		r.watch.Opt(),
		kgo.ClientID(r.clientID),
		kgo.ConsumerGroup(r.stage.ApplicationID),
		// A static member (group.instance.id = --client-id): a restarted
		// process takes its own partitions back at once, without a
		// rebalance that moves everyone's tasks and without waiting for
		// its killed incarnation's session to expire.
		kafkax.StaticMember(r.clientID),
		kgo.ConsumeTopics(r.stage.InputTopics...),
		balancers,
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		// Fetched records keep their whole decompressed batch alive until
		// the last of them is committed: small fetches bound that memory,
		// and on a local network they cost little.
		kgo.FetchMaxBytes(fetchMaxBytes),
		kgo.FetchMaxPartitionBytes(fetchMaxPartitionBytes),
		kgo.SessionTimeout(r.session),
		kgo.HeartbeatInterval(min(3*time.Second, r.session/3)),
		kgo.RebalanceTimeout(r.txnTimeout),
		kgo.OnPartitionsAssigned(r.onAssigned),
		kgo.OnPartitionsRevoked(r.onRevoked),
		kgo.OnPartitionsLost(r.onLost),
	)
	if err != nil {
		return err
	}
	r.consumer = consumer
	if standbys != nil {
		standbys.ProbeWith(consumer.ForceRebalance)
	}
	defer r.shutdown()
	defer r.abortAll() // after a failure; a clean stop has finished them already
	watchCtx, stopWatch := context.WithCancel(context.WithoutCancel(ctx))
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		r.watch.Follow(watchCtx, r.log, r.kafkaReady, "the session in group "+r.stage.ApplicationID, nil)
	}()
	defer func() { stopWatch(); <-watched; r.kafkaReady.Set(false, "stopped") }()
	if standbys != nil {
		// Stopped before the group is left (deferred later, run first):
		// their stores close with their checkpoints.
		standbyCtx, stopStandbys := context.WithCancel(context.WithoutCancel(ctx))
		followed := make(chan struct{})
		go func() { defer close(followed); standbys.Run(standbyCtx) }()
		defer func() { stopStandbys(); <-followed }()
	}

	r.log.Info("transformer running", "application_id", r.stage.ApplicationID, "client_id", r.clientID,
		"input_topics", strings.Join(r.stage.InputTopics, ","), "state_dir", r.stateDir,
		"commit_interval", r.commitInterval, "max_transaction_records", r.stage.MaxTransactionRecords,
		"standby_replicas", r.stage.StandbyReplicas)
	// Records handed to the tasks are finished (committed or aborted) even
	// after ctx ends; only then does the loop stop.
	work := context.WithoutCancel(ctx)
	for {
		r.beat.Beat()
		if ctx.Err() != nil {
			return r.finishAll() // between polls: no task starts only to be closed
		}
		r.recoverTasks(work)
		if err := r.failed(); err != nil {
			return err
		}
		if err := r.initPending(work); err != nil {
			return err
		}
		r.sweepStores()
		r.fetchResumeOffsets(work)
		if err := r.drainConfigs(work); err != nil {
			return err
		}
		fetches := r.poll(ctx, r.pollWait())
		if ctx.Err() != nil {
			consumer.AllowRebalance()
			return r.finishAll()
		}
		r.resumeRestarted()
		if err := r.fetchError(fetches); err != nil {
			consumer.AllowRebalance()
			return err
		}
		r.dispatch(fetches)
		consumer.AllowRebalance()
	}
}

// sweepStores removes the stores of tasks that left this instance for
// longer than state_cleanup_delay (lease.Set.SweepStores).
func (r *Runner) sweepStores() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.closed {
		r.tasks.SweepStores(time.Now())
	}
}

// use makes tf the stage's transformer, with the paths it takes: stateful
// unless it says otherwise, the raw path when the state key allows it, a
// BatchTransformer's instances with state as bytes.
func (r *Runner) use(tf Transformer) {
	r.tf, r.logic = tf, unnamedLogic
	if n, ok := tf.(LogicNamer); ok {
		r.logic = n.Logic()
	}
	r.stateful = true
	if s, ok := tf.(Stateless); ok && s.Stateless() {
		r.stateful = false
	}
	if raw, ok := tf.(RawTransformer); ok && !r.template.UsesValue() {
		r.raw = raw
	}
	if b, ok := tf.(BatchTransformer); ok {
		r.batchTF, r.byteState, r.raw = b, true, nil
	}
}

// poll waits up to wait for records, but returns early when partitions
// are assigned (their tasks must start before anything is fetched for
// them).
func (r *Runner) poll(ctx context.Context, wait time.Duration) kgo.Fetches {
	pollCtx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	r.wakeMu.Lock()
	r.wake = cancel
	r.wakeMu.Unlock()
	fs := r.consumer.PollRecords(pollCtx, r.stage.MaxPollRecords)
	r.wakeMu.Lock()
	r.wake = nil
	r.wakeMu.Unlock()
	return fs
}

// pollWait is how long the next poll may wait for records: a second, so
// config topics are drained while input is idle; less when a restarting
// task's backoff ends sooner; hardly at all when a restarted task waits to
// be sought to its offsets after the poll.
func (r *Runner) pollWait() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	const least = time.Millisecond // franz-go returns nothing at all for a context already done
	wait := time.Second
	for n, rs := range r.restarts {
		if _, running := r.workers[n]; running {
			if rs.offsets != nil {
				return least
			}
			continue
		}
		if _, asking := r.owners[n]; !asking {
			wait = min(wait, max(time.Until(rs.notBefore), least))
		}
	}
	return wait
}

func (r *Runner) wakeUp() {
	r.wakeMu.Lock()
	defer r.wakeMu.Unlock()
	if r.wake != nil {
		r.wake()
	}
}

// fetchError returns the poll's first error that ends the stage. A
// retriable one (a node down, a coordinator moving: franz-go fetches and
// rejoins the group again by itself, and a lost membership has ended the
// tasks through onLost) is logged and ridden out.
func (r *Runner) fetchError(fs kgo.Fetches) error {
	for _, fe := range fs.Errors() {
		if errors.Is(fe.Err, context.Canceled) || errors.Is(fe.Err, context.DeadlineExceeded) {
			continue
		}
		what := fmt.Sprintf("fetching %s/%d", fe.Topic, fe.Partition)
		if fe.Topic == "" {
			what = "the group session"
		}
		err := fmt.Errorf("%s: %w", what, fe.Err)
		switch {
		case errors.Is(err, kerr.FencedInstanceID):
			return fmt.Errorf("%w: another process joined group %s with this --client-id (%s), which is its group.instance.id; every instance needs its own client id, and this one, the older, stops",
				err, r.stage.ApplicationID, r.clientID)
		case !kafkax.Fatal(err) && kafkax.Retriable(err):
			if fe.Topic != "" {
				kafkax.LogRetry(r.log, what, fe.Err, 1, 0)
				continue
			}
			// franz-go rejoins after a backoff and says so every few
			// seconds while Kafka is away: count the failures, and say
			// so again at most every sessionRepeat (the session watch
			// says when Kafka answers again).
			if now := time.Now(); now.Sub(time.Unix(0, r.sessionSaid.Load())) >= sessionRepeat {
				r.sessionSaid.Store(now.UnixNano())
				kafkax.LogRetry(r.log, what, fe.Err, max(int(r.sessionErrs.Load()), 1), 0)
			}
			continue
		}
		return err
	}
	return nil
}

// sessionRepeat bounds how often the poll loop repeats that the group
// session failed again.
const sessionRepeat = 15 * time.Second

// drainConfigs applies new config records; the config consumer retries
// what a node's failure costs it, so only other errors end the stage.
func (r *Runner) drainConfigs(ctx context.Context) error {
	err := r.configs.Drain(ctx)
	if err != nil && !kafkax.Fatal(err) && kafkax.Retriable(err) {
		kafkax.LogRetry(r.log, "reading the config topics", err, 1, 0)
		return nil
	}
	return err
}

// dispatch hands each task its records of one poll, in the order it
// processes them: input topics in the stage file's order, offsets rising.
// A task's channel is short, so a task that falls behind holds the poll
// loop back (and with it the fetching) rather than memory filling up.
func (r *Runner) dispatch(fs kgo.Fetches) {
	r.mu.Lock()
	defer r.mu.Unlock()
	byTask := map[int32][]*kgo.Record{}
	n := 0
	fs.EachRecord(func(rec *kgo.Record) {
		byTask[rec.Partition] = append(byTask[rec.Partition], rec)
		n++
	})
	if n == 0 {
		return
	}
	r.obs.BatchSize.Observe(float64(n))
	b := &batchTracker{start: time.Now(), r: r}
	b.add() // the dispatch itself, released below
	order := r.topicOrder
	for p, recs := range byTask {
		t, ok := r.workers[p]
		if !ok || r.stale(p) {
			// Fetched before a rebalance took the partition away, or before
			// its task restarted: never committed, so the partition's
			// owner reads it again from the committed offsets.
			r.log.Debug("records of an unowned or restarting partition dropped", "partition", p, "records", len(recs))
			continue
		}
		if len(r.stage.InputTopics) > 1 {
			sort.SliceStable(recs, func(i, j int) bool {
				if a, b := order[recs[i].Topic], order[recs[j].Topic]; a != b {
					return a < b
				}
				return recs[i].Offset < recs[j].Offset
			})
		}
		b.add()
		if !t.send(taskMsg{recs: recs, batch: b}) {
			b.committed() // a stopped task: its failure ends the run
		}
	}
	b.committed()
}

// generation is the consumer's group membership for an offset commit.
func (r *Runner) generation() groupGeneration {
	member, generation := r.consumer.GroupMetadata()
	return groupGeneration{MemberID: member, Generation: generation}
}

// fail records a failure that ends the stage; the poll loop returns it.
func (r *Runner) fail(err error) {
	r.failMu.Lock()
	first := r.failure == nil
	if first {
		r.failure = err
	}
	r.failMu.Unlock()
	if first {
		r.log.Debug("stopping on a failure retrying cannot help", "class", classify(err), "error", err)
		if r.stopNow != nil {
			r.stopNow() // the other tasks' long calls need not run on
		}
	}
	r.wakeUp()
}

func (r *Runner) failed() error {
	r.failMu.Lock()
	defer r.failMu.Unlock()
	return r.failure
}

// finishAll commits every task's open transaction and stops the tasks
// (SIGTERM): the group membership is still current, so the offsets commit
// before the group is left.
func (r *Runner) finishAll() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var first error
	for p, t := range r.workers {
		if err := t.end(endFinish); err != nil && first == nil {
			first = err
		}
		delete(r.workers, p)
	}
	if first == nil {
		first = r.failed()
	}
	r.stoppedCleanly = first == nil
	return first
}

// abortAll stops every task, aborting what it has open (after a failure).
func (r *Runner) abortAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for p, t := range r.workers {
		_ = t.end(endAbort)
		delete(r.workers, p)
	}
}
