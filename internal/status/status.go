// Package status takes samples of a stage's state in Kafka — its group and
// members, its input offsets and lag, its changelog, its open transactions —
// and, given its instances' metrics endpoints, which module each runs; and
// turns two samples into a report with throughput. Take does the I/O;
// Build is pure, so the report's arithmetic is tested without a broker.
package status

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

	"github.com/flecht-dev/flecht/internal/acl"
	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/lineage"
	"github.com/flecht-dev/flecht/internal/stagefile"
	"github.com/flecht-dev/flecht/internal/textfmt"
)

// TP is shorthand for a topic partition.
type TP = kafkax.TopicPartition

// Request names the stage to look at.
type Request struct {
	ApplicationID string
	// InputTopics to report lag for; empty means the topics the group has
	// committed offsets for or has assigned.
	InputTopics []string
	// Kind is the stage's kind when a stage file said it (empty: not
	// known).
	Kind string
	// ClientIDs name MQTT bridge instances: their transactional IDs are
	// APP-<client_id> (docs/contract.md §1).
	ClientIDs []string
	// ConfigTopics are an extractor's: its tokens are their partitions,
	// its transactional IDs APP-<token>.
	ConfigTopics []string
	// MetricsURLs are the instances' metrics endpoints: each sample
	// scrapes them once to tell which module each runs.
	MetricsURLs []string
	// Expect is what the stage file says the instances run, and StageFile
	// its path as a command names it, shell-quoted (both zero without -f).
	Expect    Expect
	StageFile string
}

// OwnsTransactionalID reports whether a transactional ID is the stage's
// (docs/contract.md §1): APP-<n> of a task or an extractor token, APP-<client_id> of a
// bridge instance named in ClientIDs, and, for an MQTT bridge whose client
// ids were not given, any APP-<suffix>. A bare prefix match would claim the
// IDs of another application whose id begins with APP- (a5-count-1 is task
// 1 of a5-count, not a5's).
func (r Request) OwnsTransactionalID(id string) bool {
	rest, ok := strings.CutPrefix(id, r.ApplicationID+"-")
	switch {
	case !ok || rest == "":
		return false
	case isTaskNumber(rest), slices.Contains(r.ClientIDs, rest):
		return true
	}
	return r.AnyClientID()
}

// AnyClientID reports whether every APP-<suffix> counts as the stage's: an
// MQTT bridge's client ids are chosen per instance and were not given.
func (r Request) AnyClientID() bool { return r.Kind == stagefile.KindMQTT && len(r.ClientIDs) == 0 }

// isTaskNumber reports whether s is a partition or token number as
// TransactionalID writes it: decimal, no sign, no leading zero.
func isTaskNumber(s string) bool {
	n, err := strconv.ParseInt(s, 10, 32)
	return err == nil && n >= 0 && strconv.FormatInt(n, 10) == s
}

// Sample is one look at the stage.
type Sample struct {
	// Request is what was asked for.
	Request Request
	At      time.Time
	Group   kafkax.Group
	// GroupUnauthorized says why Group is unknown when the principal may
	// not describe it ("unknown: not authorized (needs Describe on group
	// APP)"): its State is GroupStateUnknown, its members and committed
	// offsets (OffsetFetch needs Describe on the group too) are unknown,
	// and so is every lag; the rest of the sample is what it can see.
	GroupUnauthorized string
	Inputs            []string
	// Partitions per input topic, sorted.
	Partitions map[string][]int32
	// Committed holds the group's commits on the inputs (absent: none).
	Committed map[TP]int64
	// Generations holds the lineage generation each commit carries
	// (absent: none, as the Python library commits them).
	Generations map[TP]int64
	Starts      map[TP]int64
	Ends        map[TP]int64
	// Unread holds, per input partition, what a read_committed reader
	// would read past the group's position: the committed records
	// counted (transaction markers and aborted records are not), plus the
	// records of transactions still open. Absent where the distance was
	// too large to count: the lag is then the offset distance.
	Unread map[TP]int64
	// UnreadUnauthorized says why Unread is empty when the principal may
	// not read the inputs: the lag is then by offsets only.
	UnreadUnauthorized string
	Changelog          Changelog
	Transaction        Transactions
	// Instances say what each of Request.MetricsURLs runs (nil without).
	Instances []Instance
}

// Changelog describes the stage's changelog topic.
type Changelog struct {
	Topic      string `json:"topic"`
	Exists     bool   `json:"exists"`
	Partitions int    `json:"partitions"`
	// Records is the offsets the changelog spans (end - start, summed):
	// an upper bound on its records, since compaction leaves gaps.
	Records int64 `json:"records"`
	// Bytes is the size of one replica of every partition on disk, from
	// DescribeLogDirs; null when the broker would not say.
	Bytes      *int64 `json:"bytes"`
	BytesError string `json:"bytes_error,omitempty"`
	// Authorized is false (absent when true) when the principal may not
	// describe the changelog: whether it exists is unknown (Unauthorized says why).
	Authorized   *bool  `json:"authorized,omitempty"`
	Unauthorized string `json:"unauthorized,omitempty"`
}

// Transactions are the pending transactions of the stage's IDs.
type Transactions struct {
	// Supported is false when the broker does not list transactions
	// (ListTransactions, Kafka 3.0+) or does not let us; Error says why.
	Supported bool                 `json:"supported"`
	Error     string               `json:"error,omitempty"`
	Pending   []PendingTransaction `json:"pending"`
	// Authorized is false (and absent when true) when the principal may
	// not describe some of the stage's transactional IDs (Unauthorized):
	// Kafka leaves them out of ListTransactions, so whether they are open
	// is unknown.
	Authorized   *bool    `json:"authorized,omitempty"`
	Unauthorized []string `json:"unauthorized,omitempty"`
}

// NotAuthorized is what cannot be seen of the open transactions, "" when
// everything can.
func (t Transactions) NotAuthorized() string {
	if len(t.Unauthorized) == 0 {
		return ""
	}
	ids := strings.Join(t.Unauthorized, ", ")
	if n := len(t.Unauthorized); n > 3 {
		ids = fmt.Sprintf("%s and %d more", strings.Join(t.Unauthorized[:3], ", "), n-3)
	}
	return fmt.Sprintf("unknown: not authorized (needs Describe on transactional ID %s)", ids)
}

// PendingTransaction is an open transaction of one of the stage's IDs.
type PendingTransaction struct {
	TransactionalID string    `json:"transactional_id"`
	State           string    `json:"state"`
	ProducerID      int64     `json:"producer_id"`
	ProducerEpoch   int16     `json:"producer_epoch"`
	StartedAt       time.Time `json:"started_at,omitzero"`
	TimeoutMillis   int32     `json:"timeout_ms"`
	// Partitions the transaction wrote to, as topic/partition.
	Partitions []string `json:"partitions"`
}

// GroupStateUnknown is the state of a group the principal may not
// describe (Sample.GroupUnauthorized).
const GroupStateUnknown = "Unknown"

// GroupNotAuthorized is what a principal without Describe on group app
// is told of the group, its members, offsets and lag.
func GroupNotAuthorized(app string) string {
	return "unknown: not authorized (needs Describe on group " + app + ")"
}

// Take samples the stage now, scraping Request.MetricsURLs when given. A
// group the principal may not describe does not end the sample: it is
// unknown (Sample.GroupUnauthorized), as is everything read from it.
func Take(ctx context.Context, cl *kgo.Client, req Request) (*Sample, error) {
	adm := kadm.NewClient(cl)
	s := &Sample{Request: req, At: time.Now(), Partitions: map[string][]int32{}, Committed: map[TP]int64{}, Generations: map[TP]int64{}, Starts: map[TP]int64{}, Ends: map[TP]int64{}, Unread: map[TP]int64{}}
	g, err := kafkax.DescribeGroup(ctx, adm, req.ApplicationID)
	switch {
	case errors.Is(err, kerr.GroupAuthorizationFailed):
		g = &kafkax.Group{Group: req.ApplicationID, State: GroupStateUnknown, Members: []kafkax.GroupMember{}}
		s.GroupUnauthorized = GroupNotAuthorized(req.ApplicationID)
	case err != nil:
		return nil, err
	}
	s.Group = *g

	var committed kadm.OffsetResponses
	if g.Exists() && s.GroupUnauthorized == "" {
		committed, err = adm.FetchOffsets(ctx, req.ApplicationID)
		if err != nil && !errors.Is(err, kerr.GroupIDNotFound) {
			return nil, fmt.Errorf("fetching the committed offsets of group %q: %w", req.ApplicationID, err)
		}
	}
	inputs := req.InputTopics
	// An extractor's or a bridge's group only leases its config topics'
	// partitions as tokens: it never commits them, so they have no lag to
	// show (its members still show what they hold).
	if len(inputs) == 0 && req.Kind != stagefile.KindExtractor && req.Kind != stagefile.KindMQTT {
		inputs = groupTopics(g, committed, stagefile.ChangelogTopic(req.ApplicationID))
	}
	s.Inputs = inputs

	if len(inputs) > 0 {
		details, err := kafkax.DescribeTopics(ctx, adm, inputs...)
		if err != nil {
			return nil, err
		}
		for _, t := range inputs {
			for _, p := range details[t].Partitions.Sorted() {
				s.Partitions[t] = append(s.Partitions[t], p.Partition)
			}
		}
		if err := bounds(ctx, adm, inputs, s.Starts, s.Ends); err != nil {
			return nil, err
		}
		want := map[string]bool{}
		for _, t := range inputs {
			want[t] = true
		}
		committed.Each(func(r kadm.OffsetResponse) {
			if r.Err == nil && want[r.Topic] && r.At >= 0 {
				tp := TP{Topic: r.Topic, Partition: r.Partition}
				s.Committed[tp] = r.At
				if g, err := lineage.GenerationOf(r.Metadata); err == nil {
					s.Generations[tp] = g
				}
			}
		})
		// Without the group's offsets there is no position to count from.
		if s.GroupUnauthorized != "" {
			s.Unread = map[TP]int64{}
		} else if s.Unread, err = countUnread(ctx, cl, adm, s, details); kafkax.Unauthorized(err) {
			s.Unread, s.UnreadUnauthorized = map[TP]int64{}, "unknown: not authorized (needs Read on topic "+strings.Join(s.Inputs, ", ")+")"
		} else if err != nil {
			return nil, err
		}
	}

	s.Changelog, err = takeChangelog(ctx, adm, stagefile.ChangelogTopic(req.ApplicationID))
	if err != nil {
		return nil, err
	}
	s.Transaction = takeTransactions(ctx, adm, req)
	if s.Transaction.Unauthorized = unseenTransactions(ctx, cl, req, s.Partitions); len(s.Transaction.Unauthorized) > 0 {
		s.Transaction.Authorized = new(bool)
	}
	if len(req.MetricsURLs) > 0 {
		s.Instances = ScrapeInstances(ctx, nil, req.MetricsURLs)
	}
	s.At = time.Now()
	return s, nil
}

// groupTopics are the topics a group reads: those it has commits for and
// those assigned to its members (never its own changelog).
func groupTopics(g *kafkax.Group, committed kadm.OffsetResponses, changelog string) []string {
	set := map[string]bool{}
	committed.Each(func(r kadm.OffsetResponse) {
		if r.Err == nil && r.At >= 0 {
			set[r.Topic] = true
		}
	})
	for _, m := range g.Members {
		for _, a := range m.Assigned {
			set[a.Topic] = true
		}
	}
	delete(set, changelog)
	out := make([]string, 0, len(set))
	for t := range set {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// Counting what is unread reads the records between a partition's
// position and its last stable offset: up to countPerPartition offsets of
// one partition and countTotal of all, so that a status on a stage far
// behind stays quick.
const (
	countPerPartition = 10_000
	countTotal        = 200_000
)

// countUnread counts what a read_committed reader would read past each
// input partition's position (see Sample.Unread). A drained partition
// written transactionally keeps its commit marker past the group's
// committed offset: by offsets it shows lag 1 for ever, counted it shows 0.
func countUnread(ctx context.Context, cl *kgo.Client, adm *kadm.Client, s *Sample, details kadm.TopicDetails) (map[TP]int64, error) {
	stable, err := adm.ListCommittedOffsets(ctx, s.Inputs...)
	if err == nil {
		err = stable.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("listing last stable offsets: %w", err)
	}
	var ranges []kafkax.Range
	after := map[TP]int64{} // records of open transactions, past the stable offset
	left := int64(countTotal)
	for _, t := range s.Inputs {
		for _, p := range s.Partitions[t] {
			tp := TP{Topic: t, Partition: p}
			from, end := s.Position(tp), s.Ends[tp]
			lso, ok := stable.Lookup(t, p)
			if !ok {
				continue
			}
			upto := min(max(lso.Offset, from), end)
			dist := upto - from
			if dist > countPerPartition || dist > left {
				continue
			}
			left -= dist
			ranges = append(ranges, kafkax.Range{TP: tp, TopicID: details[t].ID, From: from, End: upto})
			after[tp] = end - upto
		}
	}
	counted := map[TP]int64{}
	if _, err := kafkax.ReadRanges(ctx, cl, ranges, func(r *kgo.Record) error {
		counted[TP{Topic: r.Topic, Partition: r.Partition}]++
		return nil
	}); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if kafkax.Unauthorized(err) {
			return nil, err
		}
		return map[TP]int64{}, nil // retention passed a position meanwhile: the offsets will do
	}
	out := make(map[TP]int64, len(after))
	for tp, open := range after {
		out[tp] = counted[tp] + open
	}
	return out, nil
}

// Position is where the group reads tp from next: its committed offset,
// or the log start without one (or when retention passed it).
func (s *Sample) Position(tp TP) int64 {
	c, ok := s.Committed[tp]
	return kafkax.ReadPosition(s.Starts[tp], c, ok)
}

// Lag is what tp has left to read: counted where Unread has it, the
// offset distance otherwise.
func (s *Sample) Lag(tp TP) (lag int64, counted bool) {
	if n, ok := s.Unread[tp]; ok {
		return n, true
	}
	return kafkax.OffsetLag(s.Ends[tp], s.Position(tp)), false
}

func bounds(ctx context.Context, adm *kadm.Client, topics []string, starts, ends map[TP]int64) error {
	so, err := adm.ListStartOffsets(ctx, topics...)
	if err == nil {
		err = so.Error()
	}
	if err != nil {
		return fmt.Errorf("listing start offsets: %w", err)
	}
	eo, err := adm.ListEndOffsets(ctx, topics...)
	if err == nil {
		err = eo.Error()
	}
	if err != nil {
		return fmt.Errorf("listing end offsets: %w", err)
	}
	so.Each(func(o kadm.ListedOffset) { starts[TP{Topic: o.Topic, Partition: o.Partition}] = o.Offset })
	eo.Each(func(o kadm.ListedOffset) { ends[TP{Topic: o.Topic, Partition: o.Partition}] = o.Offset })
	return nil
}

func takeChangelog(ctx context.Context, adm *kadm.Client, topic string) (Changelog, error) {
	c := Changelog{Topic: topic}
	listed, err := kafkax.ListTopicsEach(ctx, adm, topic)
	if err != nil {
		return c, fmt.Errorf("describing %s: %w", topic, err)
	}
	d, ok := listed[topic]
	if !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
		return c, nil
	}
	if errors.Is(d.Err, kerr.TopicAuthorizationFailed) {
		c.Authorized, c.Unauthorized = new(bool), "unknown: not authorized (needs Describe on topic "+topic+")"
		return c, nil
	}
	if d.Err != nil {
		return c, fmt.Errorf("describing %s: %w", topic, d.Err)
	}
	c.Exists = true
	c.Partitions = len(d.Partitions)
	starts, ends := map[TP]int64{}, map[TP]int64{}
	if err := bounds(ctx, adm, []string{topic}, starts, ends); err != nil {
		return c, err
	}
	for tp, e := range ends {
		c.Records += e - starts[tp]
	}
	set := kadm.TopicsSet{}
	for _, p := range d.Partitions.Numbers() {
		set.Add(topic, p)
	}
	dirs, err := adm.DescribeAllLogDirs(ctx, set)
	if err != nil {
		c.BytesError = kafkax.NeedsACL(err, "Describe on the cluster").Error()
		return c, nil
	}
	size := map[int32]int64{}
	dirs.Each(func(ld kadm.DescribedLogDir) {
		for p, dp := range ld.Topics[topic] {
			size[p] = max(size[p], dp.Size)
		}
	})
	var total int64
	for _, b := range size {
		total += b
	}
	c.Bytes = &total
	return c, nil
}

func takeTransactions(ctx context.Context, adm *kadm.Client, req Request) Transactions {
	tx := Transactions{Pending: []PendingTransaction{}}
	listed, err := adm.ListTransactions(ctx, nil, nil)
	if err != nil {
		tx.Error = err.Error()
		return tx
	}
	tx.Supported = true
	var ids []string
	for id, l := range listed {
		if req.OwnsTransactionalID(id) && kafkax.TransactionPending(l.State) {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return tx
	}
	sort.Strings(ids)
	described, err := adm.DescribeTransactions(ctx, ids...)
	if err != nil && len(described) == 0 {
		tx.Error = err.Error()
	}
	for _, id := range ids {
		pt := PendingTransaction{TransactionalID: id, State: listed[id].State, ProducerID: listed[id].ProducerID, Partitions: []string{}}
		if d, ok := described[id]; ok && d.Err == nil {
			if !kafkax.TransactionPending(d.State) {
				continue // ended between the two requests
			}
			pt.State, pt.ProducerID, pt.ProducerEpoch, pt.TimeoutMillis = d.State, d.ProducerID, d.ProducerEpoch, d.TimeoutMillis
			if d.StartTimestamp > 0 {
				pt.StartedAt = time.UnixMilli(d.StartTimestamp).UTC()
			}
			for _, t := range d.Topics.Sorted() {
				for _, p := range t.Partitions {
					pt.Partitions = append(pt.Partitions, fmt.Sprintf("%s/%d", t.Topic, p))
				}
			}
		}
		tx.Pending = append(tx.Pending, pt)
	}
	return tx
}

// unseenTransactions are the stage's transactional IDs the principal may
// not describe (APP-p for each input partition p, APP-t for each token of
// an extractor, APP-CLIENT_ID for each bridge instance named), and
// whether there is none. A probe that fails leaves them as seen: the
// listing's own error says so.
func unseenTransactions(ctx context.Context, cl *kgo.Client, req Request, partitions map[string][]int32) []string {
	seen := map[int32]bool{}
	var ids []string
	if req.Kind == stagefile.KindExtractor && len(req.ConfigTopics) > 0 {
		names, err := acl.TxnNames(ctx, cl, acl.Topics{Kind: req.Kind, ApplicationID: req.ApplicationID, Configs: req.ConfigTopics}, "")
		if err != nil {
			return nil
		}
		ids = append(ids, names[req.ApplicationID+"-"]...)
	}
	for _, ps := range partitions {
		for _, p := range ps {
			if !seen[p] {
				seen[p] = true
				ids = append(ids, stagefile.TransactionalID(req.ApplicationID, p))
			}
		}
	}
	for _, c := range req.ClientIDs {
		ids = append(ids, req.ApplicationID+"-"+c)
	}
	ids = textfmt.Dedupe(ids) // an extractor's config topics given as inputs too (doctor)
	sort.Strings(ids)
	unseen, err := acl.Undescribable(ctx, cl, ids)
	if err != nil {
		return nil
	}
	return unseen
}

// Sleep waits d, or until ctx ends (and returns its error): the wait
// between two samples.
func Sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
