package lint

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/statekey"
	"github.com/flecht-dev/flecht/internal/textfmt"
)

// Record is one sampled Kafka record. A nil Key is a record without a key;
// a nil Value is a tombstone.
type Record struct {
	Topic     string
	Partition int32
	Offset    int64
	Key       []byte
	Value     []byte
}

// RecordRef names a concrete record in a finding.
type RecordRef struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	Key       string `json:"key"`
	// KeyHex is the key's bytes in hex when they are not UTF-8 (Key then
	// holds them too, but JSON cannot carry them exactly).
	KeyHex   string `json:"key_hex,omitempty"`
	StateKey string `json:"state_key,omitempty"`
}

// Violation is one state key seen on more than one partition number: the
// silent split, proven on data.
type Violation struct {
	StateKey   string  `json:"state_key"`
	Partitions []int32 `json:"partitions"`
	// Records holds one record from each of up to four of the partitions.
	Records []RecordRef `json:"records"`
}

// Copartitioning is one co-partitioning problem across input topics.
type Copartitioning struct {
	// Kind is partition_count (the topics' partition counts differ) or
	// key_placement (one key sits on different partition numbers).
	Kind            string         `json:"kind"`
	Message         string         `json:"message"`
	PartitionCounts map[string]int `json:"partition_counts,omitempty"`
	Key             string         `json:"key,omitempty"`
	Records         []RecordRef    `json:"records,omitempty"`
}

// Mismatch is a record whose key is not on the partition Kafka's default
// murmur2 partitioner gives it.
type Mismatch struct {
	RecordRef
	Murmur2Partition int32 `json:"murmur2_partition"`
}

// TopicSummary is what sampling one topic saw.
type TopicSummary struct {
	Topic      string `json:"topic"`
	Partitions int    `json:"partitions"`
	Sampled    int64  `json:"sampled"`
	// Keyless records carry no key (not placed by key); InvalidKeys are
	// not UTF-8 (their placement is checked, they have no state key);
	// Tombstones have no value to render from; RenderErrors lack a field
	// the template reads.
	Keyless           int64 `json:"keyless"`
	InvalidKeys       int64 `json:"invalid_keys"`
	Tombstones        int64 `json:"tombstones"`
	RenderErrors      int64 `json:"render_errors"`
	Murmur2Mismatches int64 `json:"murmur2_mismatches"`
	// LikelyPartitioner names what placed the keys when every mismatch
	// fits it.
	LikelyPartitioner    string `json:"likely_partitioner,omitempty"`
	KeysWithSeparator    int64  `json:"keys_with_separator"`
	KeyPatternMismatches int64  `json:"key_pattern_mismatches"`
}

// Report is the result of `flecht lint state-key`; its JSON is stable.
type Report struct {
	StateKey string `json:"state_key"`
	// Exempt is set for extractor stages, which the rule does not bind.
	Exempt           bool       `json:"exempt,omitempty"`
	KeyPattern       string     `json:"key_pattern,omitempty"`
	StaticVerdict    Verdict    `json:"static_verdict"`
	StaticReason     string     `json:"static_reason"`
	ExampleCollision *Collision `json:"example_collision,omitempty"`
	KeySeparators    []string   `json:"key_separators,omitempty"`
	// Sample is "last N per partition" or "all".
	Sample                   string           `json:"sample,omitempty"`
	Topics                   []TopicSummary   `json:"topics"`
	Violations               []Violation      `json:"violations"`
	ViolationCount           int              `json:"violation_count"`
	Copartitioning           []Copartitioning `json:"copartitioning"`
	KeyPlacementCount        int              `json:"key_placement_count"`
	PartitionerMismatches    []Mismatch       `json:"partitioner_mismatches"`
	PartitionerMismatchCount int64            `json:"partitioner_mismatch_count"`
	KeyPatternMismatches     []RecordRef      `json:"key_pattern_mismatches"`
	Warnings                 []string         `json:"warnings"`
	// Findings counts the problems that make the command exit 4.
	Findings int `json:"findings"`
}

// Options configure a Checker.
type Options struct {
	Template *statekey.Template
	Alphabet *KeyAlphabet
	// Partitions is each sampled topic's partition count, in the order
	// the topics were given.
	Topics     []string
	Partitions map[string]int
	// MaxExamples caps the records listed per kind of finding (default 20).
	MaxExamples int
}

type placement struct {
	partition int32
	ref       RecordRef
}

type stateKeyInfo struct {
	first      placement
	partitions []int32     // other partition numbers it was seen on
	others     []placement // a record from some of them
	reported   bool
}

// maxRecordsPerViolation caps the records listed for one split state key
// (its partitions are all listed).
const maxRecordsPerViolation = 4

// Checker runs the empirical checks over sampled records. It is not safe
// for concurrent use.
type Checker struct {
	o        Options
	static   Static
	topics   map[string]*TopicSummary
	states   map[string]*stateKeyInfo
	split    []string // state keys seen on several partitions, in order found
	keys     map[string]map[string]placement
	placeKey []string
	mism     []Mismatch
	crcFit   map[string]int64
	pattern  []RecordRef
	renderEx string
}

// NewChecker starts a check.
func NewChecker(o Options) *Checker {
	if o.MaxExamples <= 0 {
		o.MaxExamples = 20
	}
	c := &Checker{
		o:      o,
		static: StaticCheck(o.Template, o.Alphabet),
		topics: map[string]*TopicSummary{},
		states: map[string]*stateKeyInfo{},
		keys:   map[string]map[string]placement{},
		crcFit: map[string]int64{},
	}
	for _, t := range o.Topics {
		c.topics[t] = &TopicSummary{Topic: t, Partitions: o.Partitions[t]}
	}
	return c
}

// Add checks one record.
func (c *Checker) Add(r Record) {
	ts := c.topic(r.Topic)
	ts.Sampled++
	if r.Key == nil {
		ts.Keyless++
		return
	}
	key := string(r.Key)
	ref := RecordRef{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Key: key}
	valid := utf8.Valid(r.Key)
	if !valid {
		ts.InvalidKeys++
		ref.KeyHex = hex.EncodeToString(r.Key)
	}
	// Placement is about the key's bytes, which is what Kafka hashes:
	// every key is checked, whether or not a stage could read it.
	c.checkPartitioner(ts, r, ref)
	c.checkCopartitioning(r, key, ref)
	if !valid {
		return // no state key: a stage treats the record as invalid
	}

	if c.o.Alphabet != nil && !c.o.Alphabet.Match(key) {
		ts.KeyPatternMismatches++
		if len(c.pattern) < c.o.MaxExamples {
			c.pattern = append(c.pattern, ref)
		}
	}
	for _, sep := range c.static.Separators {
		if strings.Contains(key, sep) {
			ts.KeysWithSeparator++
			break
		}
	}
	c.checkStateKey(ts, r, key, ref)
}

// topic returns the summary of a topic, adding one not named up front.
func (c *Checker) topic(name string) *TopicSummary {
	ts := c.topics[name]
	if ts == nil {
		ts = &TopicSummary{Topic: name, Partitions: c.o.Partitions[name]}
		c.topics[name] = ts
		c.o.Topics = append(c.o.Topics, name)
	}
	return ts
}

// checkPartitioner: is the key where murmur2 puts it?
func (c *Checker) checkPartitioner(ts *TopicSummary, r Record, ref RecordRef) {
	n := ts.Partitions
	if n <= 0 {
		return
	}
	want := kafkax.Partition(r.Key, n)
	if want == r.Partition {
		return
	}
	ts.Murmur2Mismatches++
	if len(c.mism) < c.o.MaxExamples {
		c.mism = append(c.mism, Mismatch{RecordRef: ref, Murmur2Partition: want})
	}
	if len(r.Key) > 0 && int32(crc32.ChecksumIEEE(r.Key)%uint32(n)) == r.Partition {
		c.crcFit[r.Topic]++
	}
}

// checkCopartitioning: one key, one partition number, in every topic.
func (c *Checker) checkCopartitioning(r Record, key string, ref RecordRef) {
	if len(c.o.Topics) < 2 {
		return
	}
	byTopic := c.keys[key]
	if byTopic == nil {
		byTopic = map[string]placement{}
		c.keys[key] = byTopic
	}
	if _, ok := byTopic[r.Topic]; ok {
		return
	}
	byTopic[r.Topic] = placement{r.Partition, ref}
	for t, p := range byTopic {
		if t != r.Topic && p.partition != r.Partition {
			c.placeKey = append(c.placeKey, key)
			return
		}
	}
}

// checkStateKey: the rule itself, one state key, one partition number.
func (c *Checker) checkStateKey(ts *TopicSummary, r Record, key string, ref RecordRef) {
	sk, ok := c.stateKey(ts, key, r.Value)
	if !ok {
		return
	}
	ref.StateKey = sk
	info := c.states[sk]
	if info == nil {
		c.states[sk] = &stateKeyInfo{first: placement{r.Partition, ref}}
		return
	}
	if info.first.partition == r.Partition {
		return
	}
	for _, p := range info.partitions {
		if p == r.Partition {
			return
		}
	}
	info.partitions = append(info.partitions, r.Partition)
	if len(info.others) < maxRecordsPerViolation-1 {
		info.others = append(info.others, placement{r.Partition, ref})
	}
	if !info.reported {
		info.reported = true
		c.split = append(c.split, sk)
	}
}

func (c *Checker) stateKey(ts *TopicSummary, key string, value []byte) (string, bool) {
	t := c.o.Template
	if !t.UsesValue() {
		sk, err := t.Render(key, nil)
		return sk, err == nil
	}
	if value == nil {
		ts.Tombstones++
		return "", false
	}
	obj := map[string]any{}
	if len(bytes.TrimSpace(value)) > 0 {
		dec := json.NewDecoder(bytes.NewReader(value))
		dec.UseNumber()
		if err := dec.Decode(&obj); err != nil {
			ts.RenderErrors++
			if c.renderEx == "" {
				c.renderEx = fmt.Sprintf("%s: value is not a JSON object (%v)", ts.Topic, err)
			}
			return "", false
		}
	}
	sk, err := t.Render(key, obj)
	if err != nil {
		ts.RenderErrors++
		if c.renderEx == "" {
			c.renderEx = fmt.Sprintf("%s: %v", ts.Topic, err)
		}
		return "", false
	}
	return sk, true
}

// Report returns the findings so far.
func (c *Checker) Report() *Report {
	r := &Report{
		StateKey:              c.o.Template.String(),
		StaticVerdict:         c.static.Verdict,
		StaticReason:          c.static.Reason,
		ExampleCollision:      c.static.Collision,
		KeySeparators:         c.static.Separators,
		Topics:                []TopicSummary{},
		Violations:            []Violation{},
		Copartitioning:        []Copartitioning{},
		PartitionerMismatches: c.mism,
		KeyPatternMismatches:  c.pattern,
		Warnings:              []string{},
	}
	if c.o.Alphabet != nil {
		r.KeyPattern = c.o.Alphabet.Pattern
	}
	if r.PartitionerMismatches == nil {
		r.PartitionerMismatches = []Mismatch{}
	}
	if r.KeyPatternMismatches == nil {
		r.KeyPatternMismatches = []RecordRef{}
	}
	if c.static.Verdict == Coarsens {
		r.Findings++
	}

	for _, t := range c.o.Topics {
		ts := *c.topics[t]
		if ts.Murmur2Mismatches > 0 && c.crcFit[t] == ts.Murmur2Mismatches {
			ts.LikelyPartitioner = "crc32 (librdkafka's default consistent_random, as kcat and confluent-kafka use unless partitioner=murmur2_random)"
		}
		r.PartitionerMismatchCount += ts.Murmur2Mismatches
		r.Findings += int(ts.Murmur2Mismatches + ts.KeyPatternMismatches)
		r.Topics = append(r.Topics, ts)
		if ts.RenderErrors > 0 {
			r.Warnings = append(r.Warnings, fmt.Sprintf("%s: %d records have no state key (the stage treats them as invalid messages)", t, ts.RenderErrors))
		}
		if ts.KeysWithSeparator > 0 && c.static.Verdict == Unknown {
			r.Warnings = append(r.Warnings, fmt.Sprintf("%s: %d sampled keys contain %s, so different keys can render one state key", t, ts.KeysWithSeparator, textfmt.QuoteChoices(c.static.Separators)))
		}
		if ts.InvalidKeys > 0 {
			r.Warnings = append(r.Warnings, fmt.Sprintf("%s: %d keys are not UTF-8 (invalid messages to a stage)", t, ts.InvalidKeys))
		}
	}
	if c.renderEx != "" {
		r.Warnings = append(r.Warnings, "first state key that failed: "+c.renderEx)
	}
	if c.static.Verdict == Unknown && len(c.static.Separators) > 0 {
		with := int64(0)
		sampled := int64(0)
		for _, ts := range r.Topics {
			with += ts.KeysWithSeparator
			sampled += ts.Sampled - ts.Keyless - ts.InvalidKeys
		}
		if with == 0 && sampled > 0 && c.o.Alphabet == nil {
			r.Warnings = append(r.Warnings, fmt.Sprintf("no sampled key contains %s; if no key ever will, say so with --key-pattern and the verdict becomes a proof", textfmt.QuoteChoices(c.static.Separators)))
		}
	}

	// Violations, each with one record per partition it was seen on.
	r.ViolationCount = len(c.split)
	for _, sk := range c.split {
		if len(r.Violations) >= c.o.MaxExamples {
			break
		}
		info := c.states[sk]
		v := Violation{StateKey: sk, Records: []RecordRef{info.first.ref}, Partitions: append([]int32{info.first.partition}, info.partitions...)}
		for _, o := range info.others {
			v.Records = append(v.Records, o.ref)
		}
		sort.Slice(v.Partitions, func(i, j int) bool { return v.Partitions[i] < v.Partitions[j] })
		r.Violations = append(r.Violations, v)
	}
	r.Findings += r.ViolationCount

	// Co-partitioning.
	if len(c.o.Topics) > 1 {
		counts := map[string]int{}
		equal := true
		for _, t := range c.o.Topics {
			counts[t] = c.o.Partitions[t]
			if counts[t] != counts[c.o.Topics[0]] {
				equal = false
			}
		}
		if !equal {
			parts := make([]string, len(c.o.Topics))
			for i, t := range c.o.Topics {
				parts[i] = fmt.Sprintf("%s has %d", t, counts[t])
			}
			r.Copartitioning = append(r.Copartitioning, Copartitioning{
				Kind:            "partition_count",
				Message:         "input topics must have equal partition counts: " + strings.Join(parts, ", "),
				PartitionCounts: counts,
			})
			r.Findings++
		}
		r.KeyPlacementCount = len(c.placeKey)
		for i, key := range c.placeKey {
			if i >= c.o.MaxExamples {
				break
			}
			f := Copartitioning{Kind: "key_placement", Key: key}
			var where []string
			for _, t := range c.o.Topics {
				if p, ok := c.keys[key][t]; ok {
					f.Records = append(f.Records, p.ref)
					where = append(where, fmt.Sprintf("%s/%d", t, p.partition))
				}
			}
			f.Message = fmt.Sprintf("key %q is on different partition numbers: %s", key, strings.Join(where, ", "))
			r.Copartitioning = append(r.Copartitioning, f)
		}
		r.Findings += r.KeyPlacementCount
	}
	return r
}
