// Package doctor checks a running pipeline stage end to end, the runbook
// step an operator runs when an alert fires or before a change: its group
// members against its tasks, the lag trend over two samples, old or
// hanging transactions, its topics (changelog, raw retention, config
// compaction), and, from each instance's metrics, record sizes against the
// 1 MiB ceiling, invalid messages, the module each runs, MQTT churn and
// the outage budget, and the keyring kids every reader holds. Every finding comes with the
// command that fixes or diagnoses it.
//
// Run gathers (status samples, lint's topic checks, scrapes) through
// Sources, so tests substitute fakes; Diagnose is pure.
package doctor

import (
	"context"
	"fmt"
	"time"

	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/lint"
	"github.com/flecht-dev/flecht/internal/promscrape"
	"github.com/flecht-dev/flecht/internal/stagefile"
	"github.com/flecht-dev/flecht/internal/status"
)

// Check names, stable for scripts.
const (
	CheckMembers      = "members"
	CheckLag          = "lag"
	CheckTransactions = "transactions"
	CheckTopics       = "topics"
	CheckMetrics      = "metrics"
	CheckRecordSize   = "record_size"
	CheckInvalid      = "invalid_messages"
	CheckModule       = "module"
	CheckMQTT         = "mqtt_connection"
	CheckBudget       = "outage_budget"
	CheckKeyring      = "keyring"
	CheckStandbys     = "standbys"
)

// Check statuses.
const (
	StatusOK       = "ok"
	StatusFindings = "findings"
	StatusSkipped  = "skipped"
)

// Inputs say what to check and against what limits.
type Inputs struct {
	Stage *stagefile.Stage
	// Brokers name the cluster in the commands of findings, and
	// CommandConfig the client properties file a secured cluster needs
	// there (--command-config; "" for none).
	Brokers       string
	CommandConfig string
	// MetricsURLs are the instances' metrics endpoints. MetricsFromStage
	// says the one URL is the stage file's metrics.listen, not given: when
	// it does not answer here (the doctor runs on another host), the
	// metric checks are skipped rather than failed.
	MetricsURLs      []string
	MetricsFromStage bool
	// Interval separates the two samples (lag trend, rates).
	Interval time.Duration
	// IntervalGiven says the user asked for Interval: without it, a stage
	// with no group member and no instance answering (nothing moves
	// between two samples) is sampled once.
	IntervalGiven bool
	// Kids are the kids every reader must hold (the keyring file's);
	// empty: the readers must agree with each other.
	Kids []string
	// QueueLimit is the MQTT broker's per-session queue (0: Mosquitto's
	// default, 1000).
	QueueLimit int64
	// MinBudget is the least outage budget that is no finding.
	MinBudget time.Duration
	// MinRetention is the least retention.ms of a raw topic (0: only
	// infinite).
	MinRetention time.Duration
	// Stateless says the transformer keeps no state, so it has no
	// changelog to miss.
	Stateless bool
	// Module is the module file the stage file names, as read (nil: a
	// builtin, or not read, so only the stage file's pin is known).
	Module *status.ModuleFile
	// DLQSince acknowledges the dead-lettered records written before it
	// (--dlq-since): a transformer's dead letters are a finding only when
	// its dead-letter topics hold a record written since. Zero: every
	// dead letter since the instances started is one.
	DLQSince time.Time
}

// Defaults.
const (
	DefaultInterval   = 10 * time.Second
	DefaultQueueLimit = 1000
	DefaultMinBudget  = 5 * time.Minute
	// RecordCeiling is Kafka's default record limit (max.message.bytes);
	// a record above NearCeiling of it is a finding.
	RecordCeiling = 1 << 20
	NearCeiling   = 0.8
)

// Report is what `flecht doctor -o json` prints.
type Report struct {
	ApplicationID string    `json:"application_id"`
	Kind          string    `json:"kind"`
	IntervalS     float64   `json:"interval_s"`
	Checks        []Check   `json:"checks"`
	Findings      []Finding `json:"findings"`
	Notes         []string  `json:"notes"`
}

// Check is one check and how it went.
type Check struct {
	Name   string `json:"name"`
	Status string `json:"status"` // ok, findings, skipped
	Detail string `json:"detail"`
}

// Finding is one problem and the command that fixes or diagnoses it.
type Finding struct {
	Check   string `json:"check"`
	Subject string `json:"subject,omitempty"` // a topic, an instance, a transactional ID
	Message string `json:"message"`
	Command string `json:"command"`
}

// Scrape is one instance's metrics, sampled twice.
type Scrape struct {
	URL           string
	First, Second *promscrape.Sample
	Err           error
}

// Observations are what Run gathered.
type Observations struct {
	First, Second *status.Sample
	Topics        *lint.TopicsReport
	Scrapes       []Scrape
	// Unread says, when a transformer's lag stood still between the
	// samples, whether its range holds a record a read_committed reader
	// would still read (nil: not read; UnreadErr says why when it failed).
	// A lag of transaction markers and aborted records holds none.
	Unread    *bool
	UnreadErr error
	// DeadLettered counts, with Inputs.DLQSince, the records of each
	// dead-letter topic written since then (read_committed); DeadErr
	// says why a topic could not be read.
	DeadLettered map[string]int
	DeadErr      map[string]error
	// OneSample says Second is First: nothing moved to sample twice.
	OneSample bool
	// Watched is how long the group was watched after Second because a
	// member sat idle while the others committed, and Gone says when each
	// such member (by member id) was first seen gone from the group: its
	// session lapsed, so it had stopped without leaving.
	Watched time.Duration
	Gone    map[string]time.Time
}

// Sources are where Run gathers from.
type Sources struct {
	Status func(ctx context.Context, req status.Request) (*status.Sample, error)
	Topics func(ctx context.Context, spec lint.TopicsSpec) (*lint.TopicsReport, error)
	Scrape func(ctx context.Context, url string) (*promscrape.Sample, error)
	Sleep  func(ctx context.Context, d time.Duration) error
	// Unread reports whether any of the ranges [from, to) of the input
	// partitions holds a record a read_committed reader would read.
	Unread func(ctx context.Context, ranges map[status.TP][2]int64) (bool, error)
	// DeadLettered counts the records of a dead-letter topic written at
	// or after since, as a read_committed reader sees them.
	DeadLettered func(ctx context.Context, topic string, since time.Time) (int, error)
	// Group describes the stage's group: who is a member now.
	Group func(ctx context.Context, app string) (*kafkax.Group, error)
	// Now is the clock the watch of an idle member reads (nil: time.Now).
	Now func() time.Time
}

func (s Sources) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// Request is the status request for a stage: a transformer's inputs, an
// extractor's config topics (its tokens are their partition numbers).
func Request(st *stagefile.Stage) status.Request {
	req := status.Request{ApplicationID: st.ApplicationID, Kind: st.Kind}
	switch st.Kind {
	case stagefile.KindTransformer:
		req.InputTopics = st.InputTopics
	case stagefile.KindExtractor:
		req.InputTopics = st.ConfigTopics
	}
	return req
}

// Run gathers two samples Interval apart (status and every instance's
// metrics) and the topic checks, then diagnoses. An error means the
// pipeline could not be checked (Kafka did not answer); an instance that
// cannot be scraped is a finding.
func Run(ctx context.Context, in Inputs, src Sources) (*Report, error) {
	if in.Interval <= 0 {
		in.Interval = DefaultInterval
	}
	spec, err := lint.SpecFromStage(in.Stage)
	if err != nil {
		return nil, err
	}
	spec.MinRetention = in.MinRetention
	req := Request(in.Stage)
	var obs Observations
	if obs.First, err = src.Status(ctx, req); err != nil {
		return nil, err
	}
	obs.Scrapes = make([]Scrape, len(in.MetricsURLs))
	for i, u := range in.MetricsURLs {
		obs.Scrapes[i].URL = promscrape.URL(u)
		obs.Scrapes[i].First, obs.Scrapes[i].Err = src.Scrape(ctx, u)
	}
	if obs.Topics, err = src.Topics(ctx, spec); err != nil {
		return nil, err
	}
	deadLettered(ctx, in, src, &obs)
	if !in.IntervalGiven && len(obs.First.Group.Members) == 0 && !anyScraped(obs.Scrapes) {
		obs.Second, obs.OneSample = obs.First, true
		return Diagnose(in, obs), nil
	}
	if err := src.Sleep(ctx, in.Interval); err != nil {
		return nil, err
	}
	if obs.Second, err = src.Status(ctx, req); err != nil {
		return nil, err
	}
	for i, u := range in.MetricsURLs {
		if obs.Scrapes[i].Err != nil {
			continue
		}
		obs.Scrapes[i].Second, obs.Scrapes[i].Err = src.Scrape(ctx, u)
	}
	if err := watchIdle(ctx, src, req, &obs); err != nil {
		return nil, err
	}
	if ranges := standingLag(in.Stage, obs.First, obs.Second); len(ranges) > 0 && src.Unread != nil {
		unread, err := src.Unread(ctx, ranges)
		if err == nil {
			obs.Unread = &unread
		}
		obs.UnreadErr = err
	}
	return Diagnose(in, obs), nil
}

// SessionWatch is how long the doctor watches a member that sat idle while
// the others committed: past flecht's default group session (10 s), so a
// member that stopped without leaving is seen dropped, and one that stays
// is seen heartbeating.
const (
	SessionWatch = 12 * time.Second
	watchStep    = time.Second
)

// watchIdle watches the members IdleMembers names until each has left the
// group or SessionWatch has passed: a member whose session lapses had
// stopped; one that stays heartbeats, so its process runs and its tasks
// are stuck (or its session is longer than the watch).
func watchIdle(ctx context.Context, src Sources, req status.Request, obs *Observations) error {
	idle, busy := status.IdleMembers(obs.First, obs.Second)
	if len(idle) == 0 || busy == 0 {
		return nil
	}
	obs.Gone = map[string]time.Time{}
	start := obs.Second.At
	for obs.Watched < SessionWatch && len(obs.Gone) < len(idle) {
		if err := src.Sleep(ctx, watchStep); err != nil {
			return err
		}
		g, err := src.Group(ctx, req.ApplicationID)
		if err != nil {
			return err
		}
		at := src.now()
		present := map[string]bool{}
		for _, m := range g.Members {
			present[m.MemberID] = true
		}
		for _, m := range idle {
			if _, seen := obs.Gone[m.MemberID]; !seen && !present[m.MemberID] {
				obs.Gone[m.MemberID] = at
			}
		}
		obs.Watched = max(obs.Watched+watchStep, at.Sub(start))
	}
	return nil
}

// deadLettered counts, with --dlq-since, what each dead-letter topic of a
// transformer received since then.
func deadLettered(ctx context.Context, in Inputs, src Sources, obs *Observations) {
	if in.DLQSince.IsZero() || in.Stage.Kind != stagefile.KindTransformer || src.DeadLettered == nil {
		return
	}
	obs.DeadLettered, obs.DeadErr = map[string]int{}, map[string]error{}
	for _, t := range in.Stage.InputTopics {
		dlq := stagefile.DLQTopic(t)
		n, err := src.DeadLettered(ctx, dlq, in.DLQSince)
		if err != nil {
			obs.DeadErr[dlq] = err
			continue
		}
		obs.DeadLettered[dlq] = n
	}
}

func anyScraped(scrapes []Scrape) bool {
	for _, s := range scrapes {
		if s.Err == nil {
			return true
		}
	}
	return false
}

// Diagnose turns the observations into the report.
func Diagnose(in Inputs, obs Observations) *Report {
	if in.Interval <= 0 {
		in.Interval = DefaultInterval
	}
	d := &diagnosis{in: in, obs: obs, st: in.Stage, rep: &Report{
		ApplicationID: in.Stage.ApplicationID, Kind: in.Stage.Kind, IntervalS: in.Interval.Seconds(),
		Checks: []Check{}, Findings: []Finding{}, Notes: []string{},
	}}
	switch {
	case obs.OneSample && obs.First.GroupUnauthorized != "":
		d.rep.IntervalS = 0
		d.rep.Notes = append(d.rep.Notes, fmt.Sprintf("sampled once: the members of group %s are %s and no instance answered (--interval samples twice regardless)", in.Stage.ApplicationID, obs.First.GroupUnauthorized))
	case obs.OneSample:
		d.rep.IntervalS = 0
		d.rep.Notes = append(d.rep.Notes, fmt.Sprintf("sampled once: group %s has no member and no instance answered, so nothing moves between two samples (--interval samples twice regardless)", in.Stage.ApplicationID))
	}
	d.members()
	d.lag()
	d.transactions()
	d.topics()
	d.metrics()
	return d.rep
}

type diagnosis struct {
	in  Inputs
	obs Observations
	st  *stagefile.Stage
	rep *Report
	// found counts the findings of the check in progress.
	found int
}

// finding adds a finding to the check in progress.
func (d *diagnosis) finding(check, subject, command, format string, args ...any) {
	d.rep.Findings = append(d.rep.Findings, Finding{Check: check, Subject: subject, Message: fmt.Sprintf(format, args...), Command: command})
	d.found++
}

// done records a check: findings when any was added since begin, else ok.
func (d *diagnosis) done(name string, before int, detail string) {
	s := StatusOK
	if d.found > before {
		s = StatusFindings
	}
	d.rep.Checks = append(d.rep.Checks, Check{Name: name, Status: s, Detail: detail})
}

func (d *diagnosis) skipped(name, why string) {
	d.rep.Checks = append(d.rep.Checks, Check{Name: name, Status: StatusSkipped, Detail: why})
}

func (d *diagnosis) note(format string, args ...any) {
	d.rep.Notes = append(d.rep.Notes, fmt.Sprintf(format, args...))
}

// stageFlags are the flags that name the stage in a suggested command.
func (d *diagnosis) stageFlags() string {
	if d.st.Path != "" {
		return "-f " + shellQuote(d.st.Path)
	}
	return shellQuote(d.st.ApplicationID)
}

func (d *diagnosis) brokers() string {
	b := "<brokers>"
	if d.in.Brokers != "" {
		b = d.in.Brokers
	}
	if d.in.CommandConfig != "" {
		b += " --command-config " + shellQuote(d.in.CommandConfig)
	}
	return b
}
