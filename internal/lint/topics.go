package lint

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/attr"
	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/mqtt"
	"github.com/flecht-dev/flecht/internal/stage"
	"github.com/flecht-dev/flecht/internal/stagefile"
	"github.com/flecht-dev/flecht/internal/textfmt"
)

// The topic checks behind `flecht lint topics` and `flecht doctor`: a
// pipeline's topics against the best practices ("Keep the Raw Topic
// Retained, Not Compacted"). Topics gathers what to check and the facts,
// CheckTopics is the pure check.

// TopicFacts is what lint topics reads of one topic.
type TopicFacts struct {
	Exists     bool
	Partitions int
	Configs    map[string]string
	// Unauthorized is the ACL a look at the topic lacks ("Describe on
	// topic T", "DescribeConfigs on topic T"); what it hides is unknown.
	Unauthorized string
}

// Topic roles in a pipeline.
const (
	RoleRaw       = "raw"
	RoleConfig    = "config"
	RoleInput     = "input"
	RoleChangelog = "changelog"
	RoleDLQ       = "dlq"
)

// TopicsReport is what `flecht lint topics -o json` prints.
type TopicsReport struct {
	ApplicationID string `json:"application_id,omitempty"`
	// MinRetention is the retention raw topics need: "infinite" (-1) or
	// a duration.
	MinRetention string         `json:"min_retention"`
	Topics       []Topic        `json:"topics"`
	Problems     []TopicProblem `json:"problems"`
	Findings     int            `json:"findings"`
	Notes        []string       `json:"notes"`
}

// Topic is one checked topic.
type Topic struct {
	Topic          string   `json:"topic"`
	Roles          []string `json:"roles"`
	Exists         bool     `json:"exists"`
	Partitions     int      `json:"partitions"`
	CleanupPolicy  string   `json:"cleanup_policy,omitempty"`
	RetentionMs    string   `json:"retention_ms,omitempty"`
	RetentionBytes string   `json:"retention_bytes,omitempty"`
	OK             bool     `json:"ok"`
	// Authorized is false when the principal may not see all of the
	// topic (a not_authorized problem says what it needs).
	Authorized *bool `json:"authorized,omitempty"`
}

// TopicProblem is one finding; Kind is stable for scripts.
type TopicProblem struct {
	Kind    string `json:"kind"`
	Topic   string `json:"topic,omitempty"`
	Message string `json:"message"`
}

// Problem kinds.
const (
	ProblemMissing               = "missing_topic"
	ProblemNotAuthorized         = "not_authorized"
	ProblemRawCompacted          = "raw_compacted"
	ProblemRawRetention          = "raw_retention"
	ProblemRawRetentionBytes     = "raw_retention_bytes"
	ProblemConfigNotCompacted    = "config_not_compacted"
	ProblemChangelogNotCompacted = "changelog_not_compacted"
	ProblemChangelogPartitions   = "changelog_partitions"
	ProblemInputPartitions       = "input_partitions"
	ProblemMissingDLQ            = "missing_dlq"
	infiniteRetentionMillis      = "-1"
	defaultMinRetentionDescribe  = "infinite"
)

// TopicsSpec is what to check: topic lists by role.
type TopicsSpec struct {
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
	// RawFromConfigs says the raw topics are the output_topic of the
	// active config records (an extractor's or a bridge's): Topics reads
	// the config topics for them.
	RawFromConfigs bool
}

// SpecFromStage is what to check for a stage: a transformer's inputs are
// its raw and input topics (and, under dlq, their dead-letter topics); its
// changelog has one partition per input partition number. An extractor's
// and a bridge's raw topics are the output_topic of their active configs
// (RawFromConfigs), an extractor's changelog one partition per config
// partition.
func SpecFromStage(st *stagefile.Stage) (TopicsSpec, error) {
	spec := TopicsSpec{Config: st.ConfigTopics}
	switch st.Kind {
	case stagefile.KindTransformer:
		spec.Raw, spec.Input, spec.TaskTopics = st.InputTopics, st.InputTopics, st.InputTopics
		spec.Changelog = stagefile.ChangelogTopic(st.ApplicationID)
		if st.InvalidMessages == stagefile.InvalidDLQ {
			for _, t := range st.InputTopics {
				spec.DLQ = append(spec.DLQ, stagefile.DLQTopic(t))
			}
		}
	case stagefile.KindExtractor:
		spec.RawFromConfigs = true
		spec.TaskTopics = st.ConfigTopics
		spec.Changelog = stagefile.ChangelogTopic(st.ApplicationID)
	case stagefile.KindMQTT:
		spec.RawFromConfigs = true
		d, err := mqtt.ParseRelayDefaults(st.Extract)
		if err != nil {
			return spec, err
		}
		spec.DefaultRaw = d.OutputTopic
	}
	return spec, nil
}

// Topics checks the topics spec names: it learns the raw topics from the
// config records when RawFromConfigs is set, reads the facts and checks
// them.
func Topics(ctx context.Context, cl *kgo.Client, spec TopicsSpec) (*TopicsReport, error) {
	var notes []string
	if spec.RawFromConfigs {
		spec.Raw, notes = ExtractorRawTopics(ctx, cl, spec.Config, spec.DefaultRaw)
	}
	facts, err := DescribeTopicFacts(ctx, kadm.NewClient(cl), spec.topics())
	if err != nil {
		return nil, err
	}
	rep := CheckTopics(spec, facts)
	rep.Notes = append(rep.Notes, notes...)
	return rep, nil
}

// ExtractorRawTopics learns a built-in extractor's raw topics: http-poll
// and mqtt-relay take output_topic from each config record (mqtt-relay
// falls back to the stage's default), so it reads the config topics to
// their end (latest value per key; null, "" and {} remove) and collects the
// output_topic of every active config. What it could not learn is said in
// the notes: those raw topics go unchecked.
func ExtractorRawTopics(ctx context.Context, cl *kgo.Client, configTopics []string, defaultRaw string) (topics, notes []string) {
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

func (s TopicsSpec) topics() []string {
	all := append(append(append(append([]string{}, s.Raw...), s.Config...), s.Input...), s.DLQ...)
	all = append(all, s.TaskTopics...)
	if s.Changelog != "" {
		all = append(all, s.Changelog)
	}
	return uniqueInOrder(all)
}

// CheckTopics is the pure check: findings from the facts.
func CheckTopics(spec TopicsSpec, facts map[string]TopicFacts) *TopicsReport {
	rep := &TopicsReport{MinRetention: defaultMinRetentionDescribe, Topics: []Topic{}, Problems: []TopicProblem{}, Notes: []string{}}
	if spec.MinRetention > 0 {
		rep.MinRetention = textfmt.FormatDuration(spec.MinRetention)
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
	addRole(RoleRaw, spec.Raw)
	addRole(RoleConfig, spec.Config)
	addRole(RoleInput, spec.Input)
	if spec.Changelog != "" {
		addRole(RoleChangelog, []string{spec.Changelog})
	}
	addRole(RoleDLQ, spec.DLQ)

	for _, t := range order {
		if u := facts[t].Unauthorized; u != "" {
			problem(ProblemNotAuthorized, t, "%s: unknown: not authorized (needs %s)", t, u)
		}
	}
	missing := func(t, role string) bool {
		if facts[t].Exists {
			return false
		}
		if facts[t].Unauthorized != "" {
			return true // unknown, said above
		}
		switch role {
		case RoleChangelog:
			rep.Notes = append(rep.Notes, fmt.Sprintf("%s does not exist yet: the stage creates it (compacted) at its first start", t))
		case RoleDLQ:
			problem(ProblemMissingDLQ, t, "%s does not exist, but the stage sends invalid messages to it (invalid_messages: dlq); create it with the input's partition count", t)
		default:
			if !bad[t] {
				problem(ProblemMissing, t, "%s does not exist", t)
			}
		}
		return true
	}

	for _, t := range spec.Raw {
		if missing(t, RoleRaw) {
			continue
		}
		cfg := facts[t].Configs
		policy := cfg["cleanup.policy"]
		if hasPolicyItem(policy, "compact") {
			problem(ProblemRawCompacted, t, "%s is compacted (cleanup.policy=%s): a raw topic is a history, keep it retained with cleanup.policy=delete, or a replay sees only the latest record per key", t, policy)
		}
		if ms, ok := cfg["retention.ms"]; ok && ms != infiniteRetentionMillis {
			v, err := strconv.ParseInt(ms, 10, 64)
			short := err != nil || v < 0 || spec.MinRetention == 0 || time.Duration(v)*time.Millisecond < spec.MinRetention
			if short {
				want := "-1 (infinite)"
				if spec.MinRetention > 0 {
					want = fmt.Sprintf("at least %s (%d ms)", textfmt.FormatDuration(spec.MinRetention), spec.MinRetention.Milliseconds())
				}
				problem(ProblemRawRetention, t, "%s has retention.ms=%s%s: a replay reaches back only that far; set retention.ms to %s", t, ms, DescribeRetention(ms), want)
			}
		}
		if b, ok := cfg["retention.bytes"]; ok && b != "-1" {
			problem(ProblemRawRetentionBytes, t, "%s has retention.bytes=%s: old history is deleted once a partition outgrows it; set retention.bytes=-1", t, b)
		}
	}
	for _, t := range spec.Config {
		if missing(t, RoleConfig) || facts[t].Configs == nil {
			continue
		}
		if policy := facts[t].Configs["cleanup.policy"]; policy != "compact" {
			why := "it must keep the latest value of every key forever"
			if hasPolicyItem(policy, "compact") {
				why = "compact,delete also deletes values older than retention.ms, so a config not rewritten in time vanishes"
			}
			problem(ProblemConfigNotCompacted, t, "config topic %s has cleanup.policy=%s: %s; set cleanup.policy=compact", t, orDash(policy), why)
		}
	}
	counts := map[string]int{}
	for _, t := range spec.Input {
		if missing(t, RoleInput) {
			continue
		}
		counts[t] = facts[t].Partitions
	}
	if len(counts) > 1 && !kafkax.EqualCounts(counts) {
		problem(ProblemInputPartitions, "", "the input topics must have equal partition counts (one task per partition number spans them all): %s", kafkax.DescribeCounts(counts))
	}
	if cl := spec.Changelog; cl != "" && !missing(cl, RoleChangelog) {
		if policy := facts[cl].Configs["cleanup.policy"]; facts[cl].Configs != nil && policy != "compact" {
			problem(ProblemChangelogNotCompacted, cl, "changelog %s has cleanup.policy=%s: it must be compact, or it grows without bound (and with delete it loses state); set cleanup.policy=compact", cl, orDash(policy))
		}
		tasks := 0
		for _, t := range spec.TaskTopics {
			tasks = max(tasks, facts[t].Partitions)
		}
		if tasks > 0 && facts[cl].Partitions != tasks {
			problem(ProblemChangelogPartitions, cl, "changelog %s has %d partitions but the stage has %d tasks: partition p of the input maps to partition p of the changelog (the stage refuses to start; 'flecht replay' rebuilds it)", cl, facts[cl].Partitions, tasks)
		}
	}
	for _, t := range spec.DLQ {
		missing(t, RoleDLQ)
	}

	for _, t := range order {
		f := facts[t]
		lt := Topic{Topic: t, Roles: roles[t], Exists: f.Exists, Partitions: f.Partitions, OK: !bad[t]}
		if f.Configs != nil {
			lt.CleanupPolicy, lt.RetentionMs, lt.RetentionBytes = f.Configs["cleanup.policy"], f.Configs["retention.ms"], f.Configs["retention.bytes"]
		}
		if !f.Exists && slices.Contains(roles[t], RoleChangelog) && len(roles[t]) == 1 && f.Unauthorized == "" {
			lt.OK = true
		}
		if f.Unauthorized != "" {
			no := false
			lt.Authorized = &no
		}
		rep.Topics = append(rep.Topics, lt)
	}
	rep.Findings = len(rep.Problems)
	return rep
}

func DescribeRetention(ms string) string {
	v, err := strconv.ParseInt(ms, 10, 64)
	if err != nil || v < 0 {
		return ""
	}
	return " (" + textfmt.FormatDuration(time.Duration(v)*time.Millisecond) + ")"
}

func hasPolicyItem(policy, want string) bool {
	for _, p := range strings.Split(policy, ",") {
		if strings.TrimSpace(p) == want {
			return true
		}
	}
	return false
}

// DescribeTopicFacts reads existence, partition counts and the three
// configs the checks need.
func DescribeTopicFacts(ctx context.Context, adm *kadm.Client, topics []string) (map[string]TopicFacts, error) {
	out := map[string]TopicFacts{}
	if len(topics) == 0 {
		return out, nil
	}
	listed, err := kafkax.ListTopicsEach(ctx, adm, topics...)
	if err != nil {
		return nil, fmt.Errorf("describing topics: %w", err)
	}
	var existing []string
	for _, t := range topics {
		d, ok := listed[t]
		switch {
		case !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition):
			out[t] = TopicFacts{}
		case errors.Is(d.Err, kerr.TopicAuthorizationFailed):
			out[t] = TopicFacts{Unauthorized: "Describe on topic " + t}
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
	rcs, err := kafkax.DescribeTopicConfigsEach(ctx, adm, existing...)
	if err != nil {
		return nil, fmt.Errorf("describing topic configs: %w", err)
	}
	for _, rc := range rcs {
		if errors.Is(rc.Err, kerr.TopicAuthorizationFailed) {
			f := out[rc.Name]
			f.Configs, f.Unauthorized = nil, "DescribeConfigs on topic "+rc.Name
			out[rc.Name] = f
			continue
		}
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

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func uniqueInOrder(ss []string) []string {
	seen := map[string]bool{}
	out := []string{}
	for _, s := range ss {
		if s != "" && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}
