package stage

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/health"
	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/lease"
	"github.com/flecht-dev/flecht/internal/metrics"
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
	// TransactionTimeout bounds a batch's transaction (default 60s).
	TransactionTimeout time.Duration
	// SessionTimeout is the group session timeout (default 10s): how long a
	// vanished instance keeps its partitions.
	SessionTimeout time.Duration
	// LeaveTimeout bounds how long shutdown waits to leave the group while
	// a rebalance is in progress (default 5s).
	LeaveTimeout time.Duration
	// Health gets the poll loop's heartbeat and the group's readiness.
	Health *health.Registry
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
	configs    *ConfigStore

	tf       Transformer
	stateful bool
	admin    *kgo.Client
	consumer *kgo.Client

	// keySep, when guardKeys is set, is the rune no key may hold for the
	// state key to refine it (statekey.Template.KeySeparator).
	keySep    rune
	guardKeys bool

	counts *kafkax.PartitionCounts // of output topics

	mu     sync.Mutex // held while tasks change or a batch runs
	tasks  *lease.Set // one task per input partition number
	closed bool       // shut down: late group callbacks change nothing

	leaveTimeout time.Duration
	beat         *health.Loop      // one round polls, processes and commits
	ready        *health.Condition // joined, every task started

	wakeMu sync.Mutex
	wake   context.CancelFunc // ends the poll in progress
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
		o.TransactionTimeout = 60 * time.Second
	}
	if o.SessionTimeout == 0 {
		o.SessionTimeout = 10 * time.Second
	}
	if o.LeaveTimeout == 0 {
		o.LeaveTimeout = 5 * time.Second
	}
	if o.StateDir == "" {
		o.StateDir = DefaultStateDir(o.Stage.ApplicationID)
	}
	order := map[string]int{}
	for i, t := range o.Stage.InputTopics {
		order[t] = i
	}
	sep, guard := o.Stage.Template.KeySeparator()
	return &Runner{
		keySep: sep, guardKeys: guard,
		stage: o.Stage, cluster: o.Cluster, clientID: o.ClientID, stateDir: o.StateDir,
		changelog: o.Stage.ChangelogTopic(), template: o.Stage.Template, topicOrder: order,
		txnTimeout: o.TransactionTimeout, session: o.SessionTimeout, obs: o.Metrics, log: o.Log,
		configs:      NewConfigStore(o.Stage.ConfigTopics, o.Log, o.Metrics),
		leaveTimeout: o.LeaveTimeout,
		// A round may take a batch's whole transaction timeout.
		beat:  o.Health.Loop("poll_loop", o.TransactionTimeout+time.Minute),
		ready: o.Health.Condition("group", "starting: checking topics, not joined yet"),
	}
}

// DefaultStateDir is ${XDG_STATE_HOME:-~/.local/state}/flecht/<application_id>.
func DefaultStateDir(applicationID string) string {
	base := os.Getenv("XDG_STATE_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			home = os.TempDir()
		}
		base = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(base, "flecht", applicationID)
}

// Configs is the stage's config store, for transformers that look up.
func (r *Runner) Configs() Configs { return r.configs }

// Run checks the topics, bootstraps the config store, joins the group and
// processes batches until ctx ends (then it finishes the batch in hand and
// returns nil) or something fails (it returns the error: let it crash).
func (r *Runner) Run(ctx context.Context, tf Transformer) error {
	r.tf = tf
	r.stateful = true
	if s, ok := tf.(Stateless); ok && s.Stateless() {
		r.stateful = false
	}
	if !r.template.IsDefault() && !r.stateful {
		r.log.Warn("state_key is set but the transformer keeps no state; it has no effect")
	}

	admin, err := r.cluster.Client(kgo.ClientID(r.clientID))
	if err != nil {
		return err
	}
	defer admin.Close()
	r.admin = admin
	if err := r.cluster.Ping(ctx, admin); err != nil {
		return err
	}
	r.counts = kafkax.NewPartitionCounts(kadm.NewClient(admin))
	if err := r.prepareTopics(ctx, kadm.NewClient(admin)); err != nil {
		return err
	}
	if err := r.configs.Bootstrap(ctx, r.cluster, r.clientID); err != nil {
		return err
	}
	defer r.configs.Close()
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
		},
	}
	if r.stateful {
		spec.Changelog = r.changelog
	}
	spec.Ready, spec.Progress = r.ready, r.beat
	r.tasks = lease.NewSet(spec)

	consumer, err := r.cluster.Client(
		kgo.ClientID(r.clientID),
		kgo.ConsumerGroup(r.stage.ApplicationID),
		kgo.ConsumeTopics(r.stage.InputTopics...),
		kgo.Balancers(kgo.RangeBalancer()),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.SessionTimeout(r.session),
		kgo.HeartbeatInterval(min(3*time.Second, r.session/3)),
		kgo.RebalanceTimeout(r.txnTimeout),
		kgo.OnPartitionsAssigned(r.onAssigned),
		kgo.OnPartitionsRevoked(r.onRevoked),
		kgo.OnPartitionsLost(r.onRevoked),
	)
	if err != nil {
		return err
	}
	r.consumer = consumer
	defer r.shutdown()

	r.log.Info("transformer running", "application_id", r.stage.ApplicationID, "client_id", r.clientID,
		"input_topics", strings.Join(r.stage.InputTopics, ","), "state_dir", r.stateDir)
	// A batch in hand is finished (committed or aborted) even after ctx
	// ends; only then does the loop stop.
	work := context.WithoutCancel(ctx)
	for {
		r.beat.Beat()
		if ctx.Err() != nil {
			return nil // stopped between batches: no task starts only to be closed
		}
		if err := r.initPending(work); err != nil {
			return err
		}
		if err := r.configs.Drain(work); err != nil {
			return err
		}
		fetches := r.poll(ctx)
		if ctx.Err() != nil {
			consumer.AllowRebalance()
			return nil
		}
		if err := r.fetchError(fetches); err != nil {
			consumer.AllowRebalance()
			return err
		}
		// A batch cannot outlive its transactions: past the transaction
		// timeout the coordinator aborts them, so waiting longer (on a
		// broker that keeps answering "retry") only delays the crash.
		batchCtx, cancel := context.WithTimeout(work, r.txnTimeout)
		err := r.processBatch(batchCtx, fetches)
		cancel()
		consumer.AllowRebalance()
		if err != nil {
			return err
		}
	}
}

// poll waits for records, but returns early when partitions are assigned
// (their tasks must start before anything is fetched for them) and at least
// once a second, so config topics are drained while input is idle.
func (r *Runner) poll(ctx context.Context) kgo.Fetches {
	pollCtx, cancel := context.WithTimeout(ctx, time.Second)
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

func (r *Runner) wakeUp() {
	r.wakeMu.Lock()
	defer r.wakeMu.Unlock()
	if r.wake != nil {
		r.wake()
	}
}

func (r *Runner) fetchError(fs kgo.Fetches) error {
	for _, fe := range fs.Errors() {
		if errors.Is(fe.Err, context.Canceled) || errors.Is(fe.Err, context.DeadlineExceeded) {
			continue
		}
		return fmt.Errorf("fetching %s/%d: %w", fe.Topic, fe.Partition, fe.Err)
	}
	return nil
}

// processBatch splits a poll by task and commits each task's part in its
// own transaction; tasks commit concurrently and independently.
func (r *Runner) processBatch(ctx context.Context, fs kgo.Fetches) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	byTask := map[int32][]*kgo.Record{}
	n := 0
	fs.EachRecord(func(rec *kgo.Record) {
		byTask[rec.Partition] = append(byTask[rec.Partition], rec)
		n++
	})
	if n == 0 {
		return nil
	}
	start := time.Now()
	r.obs.BatchSize.Observe(float64(n))
	member, generation := r.consumer.GroupMetadata()
	gen := groupGeneration{MemberID: member, Generation: generation}

	var wg sync.WaitGroup
	errs := make(chan error, len(byTask))
	for p, recs := range byTask {
		t, ok := r.tasks.Get(p)
		if !ok {
			// Fetched before a rebalance took the partition away: never
			// committed, so the new owner reads it again.
			r.log.Debug("records of an unowned partition dropped", "partition", p, "records", len(recs))
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := r.processTask(ctx, t, recs, gen); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	r.obs.BatchProcessing.Observe(time.Since(start).Seconds())
	return nil
}
