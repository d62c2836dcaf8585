package cli

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/attr"
	"github.com/flecht-dev/flecht/internal/budget"
	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/mqtt"
	"github.com/flecht-dev/flecht/internal/stage"
	"github.com/flecht-dev/flecht/internal/stagefile"
	"github.com/flecht-dev/flecht/internal/ui"
)

// LintTopicsOptions are the inputs of `flecht lint topics`.
type LintTopicsOptions struct {
	IO      *ui.IOStreams
	Printer func() *ui.Printer

	StageFile     string
	ApplicationID string
	Raw           []string
	ConfigTopics  []string
	Input         []string
	MinRetention  string

	// Kafka connects to the cluster; the caller closes the client.
	Kafka func(ctx context.Context) (*kgo.Client, error)
}

// TopicFacts is what lint topics reads of one topic.
type TopicFacts struct {
	Exists     bool
	Partitions int
	Configs    map[string]string
}

// Topic roles in a pipeline.
const (
	roleRaw       = "raw"
	roleConfig    = "config"
	roleInput     = "input"
	roleChangelog = "changelog"
	roleDLQ       = "dlq"
)

// LintTopicsReport is what `flecht lint topics -o json` prints.
type LintTopicsReport struct {
	ApplicationID string `json:"application_id,omitempty"`
	// MinRetention is the retention raw topics need: "infinite" (-1) or
	// a duration.
	MinRetention string         `json:"min_retention"`
	Topics       []LintTopic    `json:"topics"`
	Problems     []TopicProblem `json:"problems"`
	Findings     int            `json:"findings"`
	Notes        []string       `json:"notes"`
}

// LintTopic is one checked topic.
type LintTopic struct {
	Topic          string   `json:"topic"`
	Roles          []string `json:"roles"`
	Exists         bool     `json:"exists"`
	Partitions     int      `json:"partitions"`
	CleanupPolicy  string   `json:"cleanup_policy,omitempty"`
	RetentionMs    string   `json:"retention_ms,omitempty"`
	RetentionBytes string   `json:"retention_bytes,omitempty"`
	OK             bool     `json:"ok"`
}

// TopicProblem is one finding; Kind is stable for scripts.
type TopicProblem struct {
	Kind    string `json:"kind"`
	Topic   string `json:"topic,omitempty"`
	Message string `json:"message"`
}

// Problem kinds.
const (
	problemMissing              = "missing_topic"
	problemRawCompacted         = "raw_compacted"
	problemRawRetention         = "raw_retention"
	problemRawRetentionBytes    = "raw_retention_bytes"
	problemConfigNotCompacted   = "config_not_compacted"
	problemChangelogNotCompact  = "changelog_not_compacted"
	problemChangelogPartitions  = "changelog_partitions"
	problemInputPartitions      = "input_partitions"
	problemMissingDLQ           = "missing_dlq"
	infiniteRetentionMillis     = "-1"
	defaultMinRetentionDescribe = "infinite"
)

// topicsSpec is what to check: topic lists by role.
type topicsSpec struct {
	Raw, Config, Input, DLQ []string
	Changelog               string
	// TaskTopics give the changelog's expected partition count (the
	// inputs of a transformer, the config topics of an extractor).
	TaskTopics []string
	// MinRetention is the least retention.ms of a raw topic; 0 means
	// only infinite (-1) passes.
	MinRetention time.Duration
	// DefaultRaw is an mqtt-relay stage's extract.output_topic: the raw
	// topic of every config record that names none.
	DefaultRaw string
}

const lintTopicsLong = `Check a pipeline's topics against the best practices ("Keep the Raw Topic
Retained, Not Compacted"):

  raw topics      retained: cleanup.policy=delete (not compact) and
                  retention.ms=-1, or at least --min-retention; no
                  retention.bytes limit. A replay reaches only as far back
                  as the raw topic still holds.
  config topics   compacted (cleanup.policy=compact): the latest value per
                  key, kept forever.
  changelog       APP-changelog compacted, with one partition per task (the
                  input partition count); absent is fine before the first run.
  input topics    a transformer's inputs have equal partition counts.
  dead letters    <input>.dlq exists for every input when the stage uses
                  invalid_messages: dlq.

With -f stage.yaml the roles come from the stage file: a transformer's
input_topics are its raw and input topics, config_topics its config topics.
An extractor's (and an MQTT bridge's) raw topics are the output_topic of its
active configs: lint reads its config topics to their end (the latest value
per key; deleted and suspended configs left out) and says so in a note when
it cannot. --raw, --config-topics and --input replace the list of their
role. Names are checked before connecting (exit 2). Exit 0 when clean, 4 with
findings.`

// NewCmdLintTopics builds `flecht lint topics`.
func NewCmdLintTopics(f *Factory, runF func(*LintTopicsOptions) error) *cobra.Command {
	opts := &LintTopicsOptions{IO: f.IO, Printer: f.Printer}
	opts.Kafka = f.KafkaClient
	cmd := &cobra.Command{
		Use:   "topics (-f stage.yaml | --raw T,... --config-topics T,... --input T,...)",
		Short: "Check that raw topics are retained, config topics and changelogs compacted, inputs co-partitioned",
		Long:  lintTopicsLong,
		Example: `  flecht lint topics -f examples/count.yaml
  flecht lint topics --raw sensors.raw --min-retention 365d --config-topics devices.config
  flecht lint topics --input a.raw,b.raw --application-id enrich -o json`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(opts)
			}
			return runLintTopics(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&opts.StageFile, "file", "f", "", "take the topics and their roles from this stage file")
	fl.StringVar(&opts.ApplicationID, "application-id", "", "check the changelog APP-changelog of this application (implied by -f)")
	fl.StringSliceVar(&opts.Raw, "raw", nil, "raw topics: must be retained, not compacted")
	// Not --config: that is the global flag naming flecht's config file.
	fl.StringSliceVar(&opts.ConfigTopics, "config-topics", nil, "config topics: must be compacted")
	fl.StringSliceVar(&opts.Input, "input", nil, "a transformer's input topics: must have equal partition counts")
	fl.StringVar(&opts.MinRetention, "min-retention", "", "the least retention.ms a raw topic may have (e.g. 365d); default: only infinite (-1)")
	return cmd
}

func runLintTopics(ctx context.Context, opts *LintTopicsOptions) error {
	spec, app, fromConfigs, err := lintTopicsSpec(opts)
	if err != nil {
		return err
	}
	cl, err := opts.Kafka(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	var notes []string
	if fromConfigs {
		spec.Raw, notes = extractorRawTopics(ctx, cl, spec.Config, spec.DefaultRaw)
	}
	facts, err := describeTopicFacts(ctx, kadm.NewClient(cl), spec.topics())
	if err != nil {
		return err
	}
	rep := checkTopics(spec, facts)
	rep.ApplicationID = app
	rep.Notes = append(rep.Notes, notes...)
	if err := opts.Printer().Print(rep, func(h *ui.Human) error { printLintTopics(h, rep); return nil }); err != nil {
		return err
	}
	if rep.Findings > 0 {
		return &exitcode.Silent{Code: exitcode.Findings}
	}
	return nil
}

// lintTopicsSpec turns the flags (and the stage file) into what to check,
// every name validated. fromConfigs says the raw topics are to be learnt
// from the config records (an extractor's, without --raw).
func lintTopicsSpec(opts *LintTopicsOptions) (spec topicsSpec, app string, fromConfigs bool, err error) {
	usage := func(format string, args ...any) error { return exitcode.UsageError(fmt.Errorf(format, args...)) }
	spec = topicsSpec{Raw: dedupeStrings(opts.Raw), Config: dedupeStrings(opts.ConfigTopics), Input: dedupeStrings(opts.Input)}
	app = strings.TrimSpace(opts.ApplicationID)
	if opts.StageFile != "" {
		st, err := stagefile.Load(opts.StageFile)
		if err != nil {
			return spec, app, false, exitcode.UsageError(err)
		}
		if app != "" && app != st.ApplicationID {
			return spec, app, false, usage("--application-id %q differs from %s's application_id %q", app, opts.StageFile, st.ApplicationID)
		}
		app = st.ApplicationID
		if len(opts.ConfigTopics) == 0 {
			spec.Config = st.ConfigTopics
		}
		switch st.Kind {
		case stagefile.KindTransformer:
			if len(opts.Raw) == 0 {
				spec.Raw = st.InputTopics
			}
			if len(opts.Input) == 0 {
				spec.Input = st.InputTopics
			}
			spec.TaskTopics = spec.Input
			spec.Changelog = stagefile.ChangelogTopic(app)
			if st.InvalidMessages == stagefile.InvalidDLQ {
				for _, t := range spec.Input {
					spec.DLQ = append(spec.DLQ, stagefile.DLQTopic(t))
				}
			}
		case stagefile.KindExtractor, stagefile.KindMQTT:
			fromConfigs = len(opts.Raw) == 0
			if st.Kind == stagefile.KindMQTT {
				d, err := mqtt.ParseRelayDefaults(st.Extract)
				if err != nil {
					return spec, app, false, exitcode.UsageError(fmt.Errorf("%s: %w", opts.StageFile, err))
				}
				spec.DefaultRaw = d.OutputTopic
			}
			if st.Kind == stagefile.KindExtractor {
				spec.TaskTopics = spec.Config
				spec.Changelog = stagefile.ChangelogTopic(app)
			}
		}
	} else if app != "" {
		spec.Changelog = stagefile.ChangelogTopic(app)
		spec.TaskTopics = spec.Input
	}
	if len(spec.Raw)+len(spec.Config)+len(spec.Input)+len(spec.DLQ) == 0 && spec.Changelog == "" {
		return spec, app, false, usage("give -f stage.yaml, or topics with --raw, --config-topics and --input")
	}
	if err := checkNames(app, spec.Raw, spec.Config, spec.Input); err != nil {
		return spec, app, false, err
	}
	if opts.MinRetention != "" {
		d, err := budget.ParseDuration(opts.MinRetention)
		if err != nil || d <= 0 {
			return spec, app, false, usage("--min-retention %q: want a duration such as 30d or 8760h", opts.MinRetention)
		}
		spec.MinRetention = d
	}
	return spec, app, fromConfigs, nil
}

// extractorRawTopics learns a built-in extractor's raw topics: http-poll
// and mqtt-relay take output_topic from each config record (mqtt-relay
// falls back to the stage's default), so it reads the config topics to
// their end (latest value per key; null, "" and {} remove) and collects the
// output_topic of every active config. What it could not learn is said in
// the notes: those raw topics go unchecked.
func extractorRawTopics(ctx context.Context, cl *kgo.Client, configTopics []string, defaultRaw string) (topics, notes []string) {
	where := strings.Join(configTopics, ", ")
	configs := map[string]attr.Config{}
	undecodable := 0
	_, err := kafkax.ReadToEndFunc(ctx, cl, configTopics, func(r *kgo.Record) error {
		key, kerr := attr.DecodeKey(r.Key)
		if kerr == nil && attr.IsStoreTombstone(r.Value) {
			delete(configs, key) // null, "" and {} delete a config
			return nil
		}
		cfg, _, verr := attr.Decode[attr.Config](r.Value)
		switch {
		case kerr != nil, verr != nil:
			undecodable++
		default:
			configs[key] = cfg
		}
		return nil
	})
	if err != nil {
		return nil, []string{fmt.Sprintf("the raw topics were not checked: reading the config topics (%s) for the output_topic of each config failed: %v", where, err)}
	}
	if undecodable > 0 {
		notes = append(notes, fmt.Sprintf("config records in %s that did not decode were skipped: %d", where, undecodable))
	}
	set := map[string]bool{}
	if defaultRaw != "" {
		set[defaultRaw] = true
	}
	for key, cfg := range configs {
		if held, err := stage.Suspended(cfg); err != nil || held {
			continue
		}
		v, _ := attr.At(cfg, []string{"output_topic"})
		t, _ := v.(string)
		switch {
		case t == "":
		case !stagefile.ValidTopicName(t):
			notes = append(notes, fmt.Sprintf("config %q in %s names output_topic %q, which is not a valid topic name", key, where, t))
		default:
			set[t] = true
		}
	}
	for t := range set {
		topics = append(topics, t)
	}
	sort.Strings(topics)
	sort.Strings(notes)
	if len(topics) == 0 {
		notes = append(notes, fmt.Sprintf("no active config in %s names an output_topic: no raw topic to check", where))
	}
	return topics, notes
}

func (s topicsSpec) topics() []string {
	all := append(append(append(append([]string{}, s.Raw...), s.Config...), s.Input...), s.DLQ...)
	all = append(all, s.TaskTopics...)
	if s.Changelog != "" {
		all = append(all, s.Changelog)
	}
	return dedupeStrings(all)
}

// checkTopics is the pure check: findings from the facts.
func checkTopics(spec topicsSpec, facts map[string]TopicFacts) *LintTopicsReport {
	rep := &LintTopicsReport{MinRetention: defaultMinRetentionDescribe, Topics: []LintTopic{}, Problems: []TopicProblem{}, Notes: []string{}}
	if spec.MinRetention > 0 {
		rep.MinRetention = budget.FormatDuration(spec.MinRetention)
	}
	bad := map[string]bool{}
	problem := func(kind, topic, format string, args ...any) {
		rep.Problems = append(rep.Problems, TopicProblem{Kind: kind, Topic: topic, Message: fmt.Sprintf(format, args...)})
		if topic != "" {
			bad[topic] = true
		}
	}
	roles := map[string][]string{}
	var order []string
	addRole := func(role string, topics []string) {
		for _, t := range topics {
			if _, seen := roles[t]; !seen {
				order = append(order, t)
			}
			if !slices.Contains(roles[t], role) {
				roles[t] = append(roles[t], role)
			}
		}
	}
	addRole(roleRaw, spec.Raw)
	addRole(roleConfig, spec.Config)
	addRole(roleInput, spec.Input)
	if spec.Changelog != "" {
		addRole(roleChangelog, []string{spec.Changelog})
	}
	addRole(roleDLQ, spec.DLQ)

	missing := func(t, role string) bool {
		if facts[t].Exists {
			return false
		}
		switch role {
		case roleChangelog:
			rep.Notes = append(rep.Notes, fmt.Sprintf("%s does not exist yet: the stage creates it (compacted) at its first start", t))
		case roleDLQ:
			problem(problemMissingDLQ, t, "%s does not exist, but the stage sends invalid messages to it (invalid_messages: dlq); create it with the input's partition count", t)
		default:
			if !bad[t] {
				problem(problemMissing, t, "%s does not exist", t)
			}
		}
		return true
	}

	for _, t := range spec.Raw {
		if missing(t, roleRaw) {
			continue
		}
		cfg := facts[t].Configs
		policy := cfg["cleanup.policy"]
		if hasPolicyItem(policy, "compact") {
			problem(problemRawCompacted, t, "%s is compacted (cleanup.policy=%s): a raw topic is a history, keep it retained with cleanup.policy=delete, or a replay sees only the latest record per key", t, policy)
		}
		if ms, ok := cfg["retention.ms"]; ok && ms != infiniteRetentionMillis {
			v, err := strconv.ParseInt(ms, 10, 64)
			short := err != nil || v < 0 || spec.MinRetention == 0 || time.Duration(v)*time.Millisecond < spec.MinRetention
			if short {
				want := "-1 (infinite)"
				if spec.MinRetention > 0 {
					want = fmt.Sprintf("at least %s (%d ms)", budget.FormatDuration(spec.MinRetention), spec.MinRetention.Milliseconds())
				}
				problem(problemRawRetention, t, "%s has retention.ms=%s%s: a replay reaches back only that far; set retention.ms to %s", t, ms, describeRetention(ms), want)
			}
		}
		if b, ok := cfg["retention.bytes"]; ok && b != "-1" {
			problem(problemRawRetentionBytes, t, "%s has retention.bytes=%s: old history is deleted once a partition outgrows it; set retention.bytes=-1", t, b)
		}
	}
	for _, t := range spec.Config {
		if missing(t, roleConfig) {
			continue
		}
		if policy := facts[t].Configs["cleanup.policy"]; policy != "compact" {
			why := "it must keep the latest value of every key forever"
			if hasPolicyItem(policy, "compact") {
				why = "compact,delete also deletes values older than retention.ms, so a config not rewritten in time vanishes"
			}
			problem(problemConfigNotCompacted, t, "config topic %s has cleanup.policy=%s: %s; set cleanup.policy=compact", t, dash(policy), why)
		}
	}
	counts := map[string]int{}
	for _, t := range spec.Input {
		if missing(t, roleInput) {
			continue
		}
		counts[t] = facts[t].Partitions
	}
	if len(counts) > 1 && !kafkax.EqualCounts(counts) {
		problem(problemInputPartitions, "", "the input topics must have equal partition counts (one task per partition number spans them all): %s", kafkax.DescribeCounts(counts))
	}
	if cl := spec.Changelog; cl != "" && !missing(cl, roleChangelog) {
		if policy := facts[cl].Configs["cleanup.policy"]; policy != "compact" {
			problem(problemChangelogNotCompact, cl, "changelog %s has cleanup.policy=%s: it must be compact, or it grows without bound (and with delete it loses state); set cleanup.policy=compact", cl, dash(policy))
		}
		tasks := 0
		for _, t := range spec.TaskTopics {
			tasks = max(tasks, facts[t].Partitions)
		}
		if tasks > 0 && facts[cl].Partitions != tasks {
			problem(problemChangelogPartitions, cl, "changelog %s has %d partitions but the stage has %d tasks: partition p of the input maps to partition p of the changelog (the stage refuses to start; 'flecht replay' rebuilds it)", cl, facts[cl].Partitions, tasks)
		}
	}
	for _, t := range spec.DLQ {
		missing(t, roleDLQ)
	}

	for _, t := range order {
		f := facts[t]
		lt := LintTopic{Topic: t, Roles: roles[t], Exists: f.Exists, Partitions: f.Partitions, OK: !bad[t]}
		if f.Configs != nil {
			lt.CleanupPolicy, lt.RetentionMs, lt.RetentionBytes = f.Configs["cleanup.policy"], f.Configs["retention.ms"], f.Configs["retention.bytes"]
		}
		if !f.Exists && slices.Contains(roles[t], roleChangelog) && len(roles[t]) == 1 {
			lt.OK = true
		}
		rep.Topics = append(rep.Topics, lt)
	}
	rep.Findings = len(rep.Problems)
	return rep
}

func describeRetention(ms string) string {
	v, err := strconv.ParseInt(ms, 10, 64)
	if err != nil || v < 0 {
		return ""
	}
	return " (" + budget.FormatDuration(time.Duration(v)*time.Millisecond) + ")"
}

func hasPolicyItem(policy, want string) bool {
	for _, p := range strings.Split(policy, ",") {
		if strings.TrimSpace(p) == want {
			return true
		}
	}
	return false
}

// describeTopicFacts reads existence, partition counts and the three
// configs the checks need.
func describeTopicFacts(ctx context.Context, adm *kadm.Client, topics []string) (map[string]TopicFacts, error) {
	out := map[string]TopicFacts{}
	if len(topics) == 0 {
		return out, nil
	}
	listed, err := adm.ListTopics(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("describing topics: %w", err)
	}
	var existing []string
	for _, t := range topics {
		d, ok := listed[t]
		switch {
		case !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition):
			out[t] = TopicFacts{}
		case d.Err != nil:
			return nil, fmt.Errorf("describing topic %q: %w", t, d.Err)
		default:
			out[t] = TopicFacts{Exists: true, Partitions: len(d.Partitions), Configs: map[string]string{}}
			existing = append(existing, t)
		}
	}
	if len(existing) == 0 {
		return out, nil
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, existing...)
	if err != nil {
		return nil, fmt.Errorf("describing topic configs: %w", err)
	}
	for _, rc := range rcs {
		if rc.Err != nil {
			return nil, fmt.Errorf("describing configs of %q: %w", rc.Name, rc.Err)
		}
		f := out[rc.Name]
		for _, c := range rc.Configs {
			switch c.Key {
			case "cleanup.policy", "retention.ms", "retention.bytes":
				f.Configs[c.Key] = c.MaybeValue()
			}
		}
		out[rc.Name] = f
	}
	return out, nil
}

func printLintTopics(h *ui.Human, r *LintTopicsReport) {
	rows := make([][]string, len(r.Topics))
	for i, t := range r.Topics {
		mark := h.Good("✓")
		if !t.OK {
			mark = h.Bad("✗")
		}
		parts := "-"
		if t.Exists {
			parts = strconv.Itoa(t.Partitions)
		}
		retention := dash(t.RetentionMs)
		if t.RetentionMs != "" {
			retention += describeRetention(t.RetentionMs)
		}
		rows[i] = []string{mark, t.Topic, strings.Join(t.Roles, ","), parts, dash(t.CleanupPolicy), retention}
	}
	h.Table([]string{"", "topic", "role", "partitions", "cleanup.policy", "retention.ms"}, rows)
	if len(r.Problems) > 0 {
		h.Printf("\n")
	}
	for _, p := range r.Problems {
		h.Printf("%s %s\n", h.Bad("✗"), p.Message)
	}
	for _, n := range r.Notes {
		h.Printf("%s %s\n", h.Faint("note:"), n)
	}
	printFindingsLine(h, r.Findings)
}
