// Package verify audits what a stage wrote against what it committed,
// through the lineage headers every output and dead letter carries
// (internal/lineage): the exactly-once check an operator runs on a
// running or stopped stage.
//
// The rules, stated here and in docs/replay.md (After: verify and trace):
//
//   - duplicate: two records of one generation with the same source
//     record, output topic, key and value. A source processed twice in one
//     generation writes the same outputs twice (the logic is deterministic);
//     a logic that on purpose writes one key and value twice for one input
//     is reported too, and the content rerun, which knows what the logic
//     makes, is the judge there.
//   - past the committed offset: a record whose source is at or past the
//     committed offset of its generation, or whose generation is newer
//     than the committed one. Outputs and offsets commit in one
//     transaction and are read read_committed, so this means the offsets
//     moved back without a new generation, or were never committed.
//   - no lineage: a record without the headers, written by something
//     other than a flecht stage; malformed lineage likewise.
//   - unknown source: a source record on a topic the stage does not read.
//   - gaps are not decided from the outputs alone: an input whose outputs
//     are missing cannot be told from one the logic filtered. The content
//     rerun decides them; without it the report says so.
//
// Order of reads: the outputs' ends (last stable offsets) are taken
// before the committed offsets, which are fetched stable (KIP-447), so
// every output read belongs to a transaction whose offsets had committed:
// a running stage yields no false "past the committed offset".
package verify

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"strconv"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/lineage"
	"github.com/flecht-dev/flecht/internal/textfmt"
)

// Output roles, as a stage writes them.
const (
	RoleOutput     = "output"
	RoleDeadLetter = "dead_letter"
)

// Finding kinds, stable for scripts.
const (
	KindDuplicate     = "duplicate"
	KindPastCommitted = "past_committed"
	KindNoLineage     = "no_lineage"
	KindBadLineage    = "bad_lineage"
	KindUnknownSource = "unknown_source"
)

// OutputTopic is a topic the stage writes.
type OutputTopic struct {
	Topic string `json:"topic"`
	Role  string `json:"role"`
}

// Request says what to audit.
type Request struct {
	ApplicationID string
	// Inputs are the topics whose offsets the stage commits (its input
	// and intermediate topics).
	Inputs  []string
	Outputs []OutputTopic
	// ModuleSHA256 is the full hex digest of the module file to rerun
	// (empty: none given). Run refuses it when the lineage of the current
	// generation names another logic.
	ModuleSHA256 string
	ModuleFile   string
	// Content reruns the logic (ForStage builds it on the offline
	// engine); required.
	Content Content
	// MaxFindings is how many findings of each kind the report lists
	// (all are counted); 0 lists all.
	MaxFindings int
	// Planned and Read report progress in records (either may be nil).
	Planned func(offsets int64)
	Read    func(n int64)
}

// Report is the audit's result.
type Report struct {
	ApplicationID string `json:"application_id"`
	// Generation is the newest generation among the committed offsets.
	Generation  int64            `json:"generation"`
	Inputs      []InputPartition `json:"inputs"`
	Outputs     []OutputRead     `json:"outputs"`
	Generations []Generation     `json:"generations"`
	Records     int64            `json:"records"`
	// Findings lists up to MaxFindings per kind, in topic, partition,
	// offset order within a kind; Counts counts them all.
	Findings       []Finding      `json:"findings"`
	Counts         map[string]int `json:"finding_counts"`
	Total          int            `json:"findings_total"`
	ContentChecked bool           `json:"content_checked"`
	// ContentNotChecked says why the content was not checked.
	ContentNotChecked string `json:"content_not_checked,omitempty"`
	// Notes are what the reader should know to trust the answer, such as
	// a builtin rerun at another version than the one that wrote.
	Notes []string `json:"notes,omitempty"`
}

// InputPartition is one input partition: what the stage committed and
// what its current generation's outputs cover.
type InputPartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	LogStart  int64  `json:"log_start"`
	// Committed is the committed offset, -1 when none.
	Committed  int64  `json:"committed"`
	Generation int64  `json:"generation"`
	Metadata   string `json:"metadata,omitempty"`
	// Sources is how many of its records below Committed have outputs in
	// Generation, from FirstSource to LastSource; Outputs how many
	// records those are.
	Sources     int64  `json:"sources"`
	Outputs     int64  `json:"outputs"`
	FirstSource *int64 `json:"first_source,omitempty"`
	LastSource  *int64 `json:"last_source,omitempty"`
}

// OutputRead is one output topic as read.
type OutputRead struct {
	OutputTopic
	Partitions int   `json:"partitions"`
	Records    int64 `json:"records"`
}

// Generation sums one generation's records.
type Generation struct {
	Generation int64 `json:"generation"`
	Records    int64 `json:"records"`
	Sources    int64 `json:"sources"`
	// Logic counts its records per logic value.
	Logic map[string]int64 `json:"logic"`
}

// Finding is one problem, naming the record.
type Finding struct {
	Kind string `json:"kind"`
	// Record is "topic/partition@offset".
	Record     string `json:"record"`
	Source     string `json:"source,omitempty"`
	Generation int64  `json:"generation,omitempty"`
	// Duplicates is the record this one repeats (the first seen).
	Duplicates    string `json:"duplicates,omitempty"`
	ProducerID    int64  `json:"producer_id"`
	ProducerEpoch int16  `json:"producer_epoch"`
	Message       string `json:"message"`

	place lineage.Source
}

// ModuleMismatchError: the module file given is not the one the lineage
// names, so a rerun would compare against other logic.
type ModuleMismatchError struct {
	File, SHA256 string
	Logic        []string
	Generation   int64
}

func (e *ModuleMismatchError) Error() string {
	return fmt.Sprintf("%s (sha256 %s) is not the logic that wrote generation %d: its records name %s; give that module's file with --module",
		e.File, e.SHA256, e.Generation, quoteAll(e.Logic))
}

func quoteAll(ss []string) string {
	out := ""
	for i, s := range ss {
		if i > 0 {
			out += ", "
		}
		out += strconv.Quote(s)
	}
	return out
}

type tp = kafkax.TopicPartition

type auditor struct {
	req    Request
	inputs map[string]bool
	parts  map[tp]*InputPartition
	gens   map[int64]*Generation
	// sources and seen are what an audit holds per record read: kept
	// small (a topic as an index, a digest cut to 128 bits, where a
	// collision among 10^12 records has a chance of 10^-15).
	sources  map[genSource]struct{}
	seen     map[[16]byte]recordRef
	topics   []string
	topicID  map[string]uint32
	findings []Finding
	counts   map[string]int
	records  int64
	// content holds what the content check compares; nil without one.
	content *contentCheck
}

type genSource struct {
	gen int64
	ref recordRef
}

// recordRef is a record's place with its topic as an index in topics.
type recordRef struct {
	topic     uint32
	partition int32
	offset    int64
}

func (a *auditor) ref(s lineage.Source) recordRef {
	id, ok := a.topicID[s.Topic]
	if !ok {
		id = uint32(len(a.topics))
		a.topics = append(a.topics, s.Topic)
		a.topicID[s.Topic] = id
	}
	return recordRef{topic: id, partition: s.Partition, offset: s.Offset}
}

func (a *auditor) name(r recordRef) string {
	return lineage.Source{Topic: a.topics[r.topic], Partition: r.partition, Offset: r.offset}.String()
}

// Run audits the stage. It returns an error only when it cannot read
// (or the module file is the wrong one); findings are in the report.
func Run(ctx context.Context, cl *kgo.Client, req Request) (*Report, error) {
	adm := kadm.NewClient(cl)
	outNames := make([]string, len(req.Outputs))
	for i, o := range req.Outputs {
		outNames[i] = o.Topic
	}
	// The outputs' ends first: see the package doc.
	outDetails, err := kafkax.DescribeTopics(ctx, adm, outNames...)
	if err != nil {
		return nil, err
	}
	outStarts, outEnds, err := bounds(ctx, adm, outNames)
	if err != nil {
		return nil, err
	}
	inDetails, err := kafkax.DescribeTopics(ctx, adm, req.Inputs...)
	if err != nil {
		return nil, err
	}
	partitions := map[string][]int32{}
	for _, t := range req.Inputs {
		for _, pd := range inDetails[t].Partitions.Sorted() {
			partitions[t] = append(partitions[t], pd.Partition)
		}
	}
	committed, err := Committed(ctx, cl, req.ApplicationID, partitions)
	if err != nil {
		return nil, err
	}
	inStarts, _, err := bounds(ctx, adm, req.Inputs)
	if err != nil {
		return nil, err
	}

	a := &auditor{req: req, inputs: map[string]bool{}, parts: map[tp]*InputPartition{}, gens: map[int64]*Generation{},
		sources: map[genSource]struct{}{}, seen: map[[16]byte]recordRef{}, topicID: map[string]uint32{}, counts: map[string]int{}}
	rep := &Report{ApplicationID: req.ApplicationID, Generation: lineage.FirstGeneration}
	for _, t := range req.Inputs {
		a.inputs[t] = true
		for _, p := range partitions[t] {
			ip := &InputPartition{Topic: t, Partition: p, Committed: -1, Generation: lineage.FirstGeneration}
			if s, ok := inStarts.Lookup(t, p); ok {
				ip.LogStart = s.Offset
			}
			if c, ok := committed[tp{Topic: t, Partition: p}]; ok {
				ip.Committed, ip.Generation, ip.Metadata = c.Offset, c.Generation, c.Metadata
				rep.Generation = max(rep.Generation, c.Generation)
			}
			a.parts[tp{Topic: t, Partition: p}] = ip
		}
	}

	// The content check, when it can run: decided before reading, as
	// it keeps the current generation's records while they are read.
	if req.Content == nil {
		return nil, errors.New("verify: the request has no content check")
	}
	rep.ContentNotChecked = req.Content.Unavailable()
	if rep.ContentNotChecked == "" {
		var inputs []InputPartition
		for _, ip := range a.parts {
			inputs = append(inputs, *ip)
		}
		sort.Slice(inputs, func(i, j int) bool {
			return lessSource(lineage.Source{Topic: inputs[i].Topic, Partition: inputs[i].Partition}, lineage.Source{Topic: inputs[j].Topic, Partition: inputs[j].Partition})
		})
		rep.ContentNotChecked = historyGone(inputs)
	}
	if rep.ContentNotChecked == "" {
		a.content = &contentCheck{engine: req.Content, actual: map[lineage.Source][]made{}}
	}

	var ranges []kafkax.Range
	var total int64
	perTopic := map[string]int{} // index in rep.Outputs
	for _, o := range req.Outputs {
		if _, twice := perTopic[o.Topic]; twice {
			continue // read once: a second read would make every record a duplicate
		}
		d := outDetails[o.Topic]
		perTopic[o.Topic] = len(rep.Outputs)
		rep.Outputs = append(rep.Outputs, OutputRead{OutputTopic: o, Partitions: len(d.Partitions)})
		for _, pd := range d.Partitions.Sorted() {
			s, _ := outStarts.Lookup(o.Topic, pd.Partition)
			e, _ := outEnds.Lookup(o.Topic, pd.Partition)
			ranges = append(ranges, kafkax.Range{TP: tp{Topic: o.Topic, Partition: pd.Partition}, TopicID: d.ID, From: s.Offset, End: e.Offset})
			total += max(e.Offset-s.Offset, 0)
		}
	}
	if req.Planned != nil {
		req.Planned(total)
	}
	var sinceReport int64
	if _, err := kafkax.ReadRanges(ctx, cl, ranges, func(r *kgo.Record) error {
		a.record(r)
		rep.Outputs[perTopic[r.Topic]].Records++
		if sinceReport++; req.Read != nil && sinceReport >= 1000 {
			req.Read(sinceReport)
			sinceReport = 0
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("reading the outputs: %w", err)
	}
	if req.Read != nil && sinceReport > 0 {
		req.Read(sinceReport)
	}
	if err := a.checkModule(rep.Generation); err != nil {
		return nil, err
	}
	if a.content != nil {
		rep.Notes = a.otherLogic(rep.Generation)
		if err := a.content.compare(ctx, a); err != nil {
			return nil, err
		}
		rep.ContentChecked = true
	}
	a.finish(rep)
	return rep, nil
}

// bounds lists the log start and last stable offsets of the topics.
func bounds(ctx context.Context, adm *kadm.Client, topics []string) (kadm.ListedOffsets, kadm.ListedOffsets, error) {
	if len(topics) == 0 {
		return kadm.ListedOffsets{}, kadm.ListedOffsets{}, nil
	}
	starts, err := adm.ListStartOffsets(ctx, topics...)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return nil, nil, fmt.Errorf("listing start offsets: %w", err)
	}
	ends, err := adm.ListCommittedOffsets(ctx, topics...)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, nil, fmt.Errorf("listing last stable offsets: %w", err)
	}
	return starts, ends, nil
}

func place(r *kgo.Record) lineage.Source {
	return lineage.Source{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}
}

// record checks one output record.
func (a *auditor) record(r *kgo.Record) {
	a.records++
	at := place(r)
	st, found, err := lineage.Read(r.Headers)
	switch {
	case !found:
		a.find(r, Finding{Kind: KindNoLineage, Message: "no lineage headers: written by something other than a flecht stage (a producer outside the stage, or the Python library)"})
		return
	case err != nil:
		a.find(r, Finding{Kind: KindBadLineage, Message: "lineage headers that do not read: " + err.Error()})
		return
	}
	src := st.Source.String()
	g := a.gens[st.Generation]
	if g == nil {
		g = &Generation{Generation: st.Generation, Logic: map[string]int64{}}
		a.gens[st.Generation] = g
	}
	g.Records++
	g.Logic[st.Logic]++
	// A duplicate is named as one; the content check does not name it
	// again (see compareSource).
	sum := dupKey(st.Generation, src, r)
	firstRef, dup := a.seen[sum]
	if !dup {
		a.seen[sum] = a.ref(at)
	}
	gs := genSource{st.Generation, a.ref(st.Source)}
	_, seenSource := a.sources[gs]
	if !seenSource {
		a.sources[gs] = struct{}{}
		g.Sources++
	}

	if !a.inputs[st.Source.Topic] {
		a.find(r, Finding{Kind: KindUnknownSource, Source: src, Generation: st.Generation,
			Message: fmt.Sprintf("its source %s is not on an input topic of %s", src, a.req.ApplicationID)})
	} else if ip := a.parts[tp{Topic: st.Source.Topic, Partition: st.Source.Partition}]; ip == nil {
		a.find(r, Finding{Kind: KindUnknownSource, Source: src, Generation: st.Generation,
			Message: fmt.Sprintf("its source %s names a partition %s does not have", src, st.Source.Topic)})
	} else {
		switch {
		case ip.Committed < 0:
			a.find(r, Finding{Kind: KindPastCommitted, Source: src, Generation: st.Generation,
				Message: fmt.Sprintf("%s has committed no offset on %s/%d, yet this output of %s is committed", a.req.ApplicationID, ip.Topic, ip.Partition, src)})
		case st.Generation > ip.Generation:
			a.find(r, Finding{Kind: KindPastCommitted, Source: src, Generation: st.Generation,
				Message: fmt.Sprintf("generation %d, newer than generation %d of the offsets committed on %s/%d: its offsets were never committed", st.Generation, ip.Generation, ip.Topic, ip.Partition)})
		case st.Generation == ip.Generation && st.Source.Offset >= ip.Committed:
			a.find(r, Finding{Kind: KindPastCommitted, Source: src, Generation: st.Generation,
				Message: fmt.Sprintf("its source offset %d is at or past the committed offset %d of generation %d: the offsets moved back without a new generation", st.Source.Offset, ip.Committed, ip.Generation)})
		case st.Generation == ip.Generation:
			if a.content != nil {
				m := newMade(r)
				m.place, m.dup = at.String(), dup
				a.content.actual[st.Source] = append(a.content.actual[st.Source], m)
			}
			ip.Outputs++
			if !seenSource {
				ip.Sources++
				o := st.Source.Offset
				if ip.FirstSource == nil || o < *ip.FirstSource {
					ip.FirstSource = &o
				}
				if ip.LastSource == nil || o > *ip.LastSource {
					v := o
					ip.LastSource = &v
				}
			}
		}
	}

	if dup {
		first := a.name(firstRef)
		a.find(r, Finding{Kind: KindDuplicate, Source: src, Generation: st.Generation, Duplicates: first,
			Message: fmt.Sprintf("repeats %s: the same source, generation, topic, key and value: %s was processed twice in generation %d", first, src, st.Generation)})
	}
}

// dupKey digests what makes two records the same output of one source.
func dupKey(gen int64, src string, r *kgo.Record) [16]byte {
	h := sha256.New()
	var n [8]byte
	field := func(b []byte, null bool) {
		l := uint64(len(b))
		if null {
			l = 1 << 63 // a null key or value differs from an empty one
		}
		binary.BigEndian.PutUint64(n[:], l)
		h.Write(n[:])
		h.Write(b)
	}
	binary.BigEndian.PutUint64(n[:], uint64(gen))
	h.Write(n[:])
	field([]byte(src), false)
	field([]byte(r.Topic), false)
	field(r.Key, r.Key == nil)
	field(r.Value, r.Value == nil)
	var sum [32]byte
	h.Sum(sum[:0])
	return [16]byte(sum[:16])
}

func (a *auditor) find(r *kgo.Record, f Finding) {
	f.place = place(r)
	f.Record = f.place.String()
	f.ProducerID, f.ProducerEpoch = r.ProducerID, r.ProducerEpoch
	a.add(f)
}

func (a *auditor) add(f Finding) {
	a.counts[f.Kind]++
	a.findings = append(a.findings, f)
}

// checkModule refuses a module file that is not the logic the current
// generation's records name.
func (a *auditor) checkModule(current int64) error {
	if a.req.ModuleSHA256 == "" {
		return nil
	}
	g := a.gens[current]
	if g == nil {
		return nil
	}
	var logics []string
	match := true
	for l := range g.Logic {
		logics = append(logics, l)
		if !lineage.MatchesModule(l, a.req.ModuleSHA256) {
			match = false
		}
	}
	if match {
		return nil
	}
	sort.Strings(logics)
	// The file named is the wrong one: a usage error (exit 2).
	return exitcode.UsageError(&ModuleMismatchError{File: a.req.ModuleFile, SHA256: a.req.ModuleSHA256, Logic: logics, Generation: current})
}

// otherLogic notes the logics of the current generation's records that
// are not the one rerun: a builtin of another flecht version (a module
// of another digest was refused before). Their records are compared all
// the same, so a change between versions shows as changed values.
func (a *auditor) otherLogic(current int64) []string {
	g := a.gens[current]
	if g == nil {
		return nil
	}
	var notes []string
	rerun := a.req.Content.Logic()
	for l, n := range g.Logic {
		if l != rerun {
			notes = append(notes, fmt.Sprintf("%s of generation %d's records name %s; this flecht reruns %s: where the two differ, the records show as changed", textfmt.GroupDigits(n), current, l, rerun))
		}
	}
	sort.Strings(notes)
	return notes
}

// finish fills the report: inputs, generations and findings in order.
func (a *auditor) finish(rep *Report) {
	rep.Records = a.records
	for _, ip := range a.parts {
		rep.Inputs = append(rep.Inputs, *ip)
	}
	sort.Slice(rep.Inputs, func(i, j int) bool {
		x, y := rep.Inputs[i], rep.Inputs[j]
		if x.Topic != y.Topic {
			return x.Topic < y.Topic
		}
		return x.Partition < y.Partition
	})
	for _, g := range a.gens {
		rep.Generations = append(rep.Generations, *g)
	}
	sort.Slice(rep.Generations, func(i, j int) bool { return rep.Generations[i].Generation < rep.Generations[j].Generation })

	sort.SliceStable(a.findings, func(i, j int) bool {
		x, y := a.findings[i], a.findings[j]
		if x.Kind != y.Kind {
			return x.Kind < y.Kind
		}
		if x.place.Topic != y.place.Topic {
			return x.place.Topic < y.place.Topic
		}
		if x.place.Partition != y.place.Partition {
			return x.place.Partition < y.place.Partition
		}
		return x.place.Offset < y.place.Offset
	})
	listed := map[string]int{}
	rep.Findings = []Finding{}
	for _, f := range a.findings {
		if a.req.MaxFindings > 0 && listed[f.Kind] >= a.req.MaxFindings {
			continue
		}
		listed[f.Kind]++
		rep.Findings = append(rep.Findings, f)
	}
	rep.Counts, rep.Total = a.counts, len(a.findings)
}
