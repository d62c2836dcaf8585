package reencrypt

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/secret"
)

// Defaults of Options.
const (
	DefaultBatchSize     = 500
	DefaultMaxRounds     = 5
	DefaultSettleTimeout = 2 * time.Minute
	// DefaultRetryFor bounds how long a sweep keeps retrying while the
	// cluster fails its requests (a rolling restart, all nodes down).
	DefaultRetryFor = 5 * time.Minute
	// TransactionTimeout bounds how long a killed sweep's open transaction
	// holds back read_committed readers of the topics, when no rerun
	// fences it sooner.
	TransactionTimeout = time.Minute
	// maxBlockedListed caps the blocked values listed by name in a result.
	maxBlockedListed = 100
)

// Options say what to sweep and how.
type Options struct {
	Topics           []string
	Fields           []Field
	Keyring          *secret.Keyring
	EncryptPlaintext bool // also seal values in the clear that their field encrypts (the migration step)
	// Resign also signs again, with its scope's signing kid, every
	// signature that verifies under another signer (rotating an Ed25519
	// key). Unsigned values are never signed.
	Resign bool

	BatchSize     int           // records per transaction (DefaultBatchSize)
	MaxRounds     int           // re-reads of a partition in a row, and final passes, before giving up (DefaultMaxRounds)
	SettleTimeout time.Duration // wait for open transactions to end (DefaultSettleTimeout)
	RetryFor      time.Duration // keep retrying retriable cluster failures this long in a row (DefaultRetryFor)
	// NewProducer, when set, makes a producer like the one Execute was
	// given (ProducerOpts(txnID)), to take the transactional ID back after
	// a fence the cluster caused; without it a fence ends the sweep.
	NewProducer     func(txnID string) (*kgo.Client, error)
	TransactionalID string // default TransactionalID(Topics)

	// Progress: ReadPlanned/Read for the reads, Planned (total records to
	// write, which grows when a re-sweep finds more) and Written.
	ReadPlanned func(offsets int64)
	Read        func(n int64)
	Planned     func(total int64)
	Written     func(n int64)
	Log         *slog.Logger

	hooks hooks // tests only
}

// hooks let in-package tests act at the exact points where other writers
// matter.
type hooks struct {
	beforeCheck func() // a transaction's records are appended, not yet checked
	afterCheck  func() // the check passed, the commit is next
	// fail, when it returns an error, fails the transaction at point:
	// "produced" (its records appended, the transaction open) or "ended"
	// (it committed or aborted, and the engine has not noted it yet: an
	// outcome the sweep never learnt).
	fail func(point string) error
}

func (o *Options) defaults() {
	if o.BatchSize <= 0 {
		o.BatchSize = DefaultBatchSize
	}
	if o.MaxRounds <= 0 {
		o.MaxRounds = DefaultMaxRounds
	}
	if o.SettleTimeout <= 0 {
		o.SettleTimeout = DefaultSettleTimeout
	}
	if o.RetryFor <= 0 {
		o.RetryFor = DefaultRetryFor
	}
	if o.TransactionalID == "" {
		o.TransactionalID = TransactionalID(o.Topics)
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
}

// rule is what the options allow the sweep to do.
func (o *Options) rule() rule {
	return rule{kr: o.Keyring, targets: targetsFor(o.Keyring, o.Fields), encryptPlaintext: o.EncryptPlaintext, resign: o.Resign}
}

// TransactionalID is the sweep producer's transactional ID for a set of
// topics: stable across runs, so a rerun fences (and so aborts) the open
// transaction of a sweep that was killed, and two sweeps of the same topics
// cannot run at once.
func TransactionalID(topics []string) string {
	t := slices.Clone(topics)
	slices.Sort(t)
	t = slices.Compact(t)
	sum := sha256.Sum256([]byte(strings.Join(t, "\x00")))
	return "flecht-reencrypt-" + hex.EncodeToString(sum[:8])
}

// ProducerOpts are the options of the sweep's producer: transactional, and
// writing each record to the partition it names (never by key hash).
func ProducerOpts(txnID string) []kgo.Opt {
	return []kgo.Opt{
		kgo.TransactionalID(txnID),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.TransactionTimeout(TransactionTimeout),
	}
}

// Counts are a partition's (or all partitions') numbers in a result.
type Counts struct {
	Records      int         `json:"records"`       // live records in the compacted view
	Rewrite      int         `json:"rewrite"`       // records the sweep re-produces
	NonPrimary   int         `json:"non_primary"`   // records holding a token not under its scope's sealing kid
	ScopeUpgrade int         `json:"scope_upgrade"` // records holding an unscoped token of a scoped field
	Plaintext    int         `json:"plaintext"`     // records holding a value in the clear where its field encrypts
	Unsigned     int         `json:"unsigned"`      // records holding a value that is not signed where its field signs
	OldSigner    int         `json:"old_signer"`    // records holding a signature by a signer that is not its scope's signing kid
	Blocked      int         `json:"blocked"`       // records holding a value the sweep cannot rewrite
	Values       ValueCounts `json:"values"`

	// Execution only.
	Written        int `json:"written"`         // records re-produced in committed transactions
	Rereads        int `json:"rereads"`         // re-reads after other writers appended to the partition
	ForeignRecords int `json:"foreign_records"` // records of other writers those re-reads found
	Resweep        int `json:"resweep"`         // of those, latest versions that still needed the sweep (an old token written back)
	Restored       int `json:"restored"`        // foreign records re-produced because a sweep record had shadowed them
}

func (c *Counts) add(o Counts) {
	c.Records += o.Records
	c.Rewrite += o.Rewrite
	c.NonPrimary += o.NonPrimary
	c.ScopeUpgrade += o.ScopeUpgrade
	c.Plaintext += o.Plaintext
	c.Unsigned += o.Unsigned
	c.OldSigner += o.OldSigner
	c.Blocked += o.Blocked
	c.Values.add(o.Values)
	c.Written += o.Written
	c.Rereads += o.Rereads
	c.ForeignRecords += o.ForeignRecords
	c.Resweep += o.Resweep
	c.Restored += o.Restored
}

// PartitionReport is one partition's plan and, when executed, what happened.
type PartitionReport struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	EndOffset int64  `json:"end_offset"` // the plan's read stopped here
	Counts
}

// BlockedValue is a value the sweep cannot rewrite, and why.
type BlockedValue struct {
	Topic     string            `json:"topic"`
	Partition int32             `json:"partition"`
	Offset    int64             `json:"offset"`
	Key       string            `json:"key"`
	Field     string            `json:"field,omitempty"`
	Error     *secret.ErrorInfo `json:"error"`
}

// Verification is the scan that follows an executed sweep, judged per
// scope.
type Verification struct {
	// Clean: every token is under its scope's sealing kid and opens, every
	// signature verifies, nothing is corrupt, and (with --resign) every
	// signature is by its scope's signing kid. Values left in the clear or
	// unsigned are reported, not judged: the sweep leaves them by rule.
	Clean         bool          `json:"clean"`
	Primary       string        `json:"primary"`            // the global primary
	Targets       []ScopeTarget `json:"targets"`            // the kid each scope's tokens should name (and signatures)
	Records       int           `json:"records"`            // live records scanned
	Values        int           `json:"values"`             // secret values scanned
	NonPrimary    int           `json:"non_primary_tokens"` // tokens not under their scope's sealing kid
	Plaintext     int           `json:"plaintext"`
	Unsigned      int           `json:"unsigned"`
	Corrupt       int           `json:"corrupt"`
	Undecryptable int           `json:"undecryptable"` // tokens that do not open: unknown kid, seal-only, tag mismatch, …
	Unverified    int           `json:"unverified"`    // signatures that do not verify
	OldSigner     int           `json:"old_signer"`    // signatures by a signer that is not their scope's signing kid
	ByKid         []KidCount    `json:"by_kid"`
	BySigner      []SignerCount `json:"by_signer"`
}

// Result is a sweep's plan and, with --execute, its outcome.
type Result struct {
	Mode             string             `json:"mode"` // "plan" (dry run) or "execute"
	Topics           []string           `json:"topics"`
	Fields           []string           `json:"fields"`
	Primary          string             `json:"primary"`
	Targets          []ScopeTarget      `json:"targets"` // per field scope, the kid its tokens go to (and its signing kid)
	EncryptPlaintext bool               `json:"encrypt_plaintext"`
	Resign           bool               `json:"resign"`
	TransactionalID  string             `json:"transactional_id"`
	Partitions       []*PartitionReport `json:"partitions"`
	Totals           Counts             `json:"totals"`
	Blocked          []BlockedValue     `json:"blocked"`
	BlockedMore      int                `json:"blocked_more,omitempty"` // blocked values not listed
	Transactions     int                `json:"transactions"`           // committed
	Aborted          int                `json:"aborted_transactions"`   // aborted because another writer appended meanwhile
	Retries          int                `json:"retries,omitempty"`      // steps retried after the cluster failed them (a node down, a leader moving)
	Verification     *Verification      `json:"verification,omitempty"`
	// Reminder is set when plaintext values are (or would be) encrypted:
	// they were disclosed while they rested in plaintext.
	Reminder string `json:"reminder,omitempty"`
}

// PlaintextReminder is the migration's last step, printed whenever a sweep
// encrypts plaintext values.
const PlaintextReminder = "every value that rested in plaintext must be treated as disclosed " +
	"(old log segments and backups keep it): rotate those credentials at their source"

// job is one record to re-produce: the version it derives from with a new
// value. Key, headers and timestamp are that version's, so a reader sees
// only the secret change (and retention and compaction lag see the record's
// own age).
type job struct {
	tp      TP
	key     []byte
	headers []kgo.RecordHeader
	ts      time.Time
	value   []byte // nil: a tombstone (restoring another writer's delete)
	base    int64  // offset of the version it derives from
}

// newJob rewrites r with value.
func newJob(r *Rec, value []byte) *job {
	return &job{tp: r.TP(), key: r.Key, headers: r.Headers, ts: r.Timestamp, value: value, base: r.Offset}
}

// record is the job as the producer takes it.
func (j *job) record() *kgo.Record {
	return &kgo.Record{Topic: j.tp.Topic, Partition: j.tp.Partition, Key: j.key, Value: j.value, Headers: j.headers, Timestamp: j.ts}
}

// planRecord applies the sweep's rule to one live record, adds it to the
// counts and returns its job (nil when nothing is to be written).
func planRecord(r *Rec, ru rule, fields []Field, c *Counts, res *Result) (*job, error) {
	t, err := transform(r.Value, fields, ru)
	return planTransformed(r, t, err, c, res)
}

// planTransformed is planRecord after the transform, which buildPlan runs
// for many records in parallel.
func planTransformed(r *Rec, t transformed, err error, c *Counts, res *Result) (*job, error) {
	c.Records++
	if errors.Is(err, errNotObject) {
		c.Blocked++
		c.Values.Blocked++
		res.block(r, "", &secret.ErrorInfo{Kind: secret.KindMalformed, Message: "malformed: " + err.Error()})
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s/%d offset %d: %w", r.Topic, r.Partition, r.Offset, err)
	}
	if t.Changed && r.Key == nil {
		// A keyless record cannot be replaced: a new one would stand
		// beside it. What it would have changed is blocked instead.
		n := t.Counts.Rotate + t.Counts.ScopeUpgrade + t.Counts.Encrypt + t.Counts.Resign
		t.Counts.Blocked += n
		t.Counts.Rotate, t.Counts.ScopeUpgrade, t.Counts.Encrypt, t.Counts.Resign = 0, 0, 0, 0
		t.Changed = false
		t.Blocked = append(t.Blocked, blockedSlot{Err: &secret.Error{Kind: secret.KindMalformed,
			Detail: "the record has no key, so it cannot be replaced in place"}})
	}
	c.Values.add(t.Counts)
	if t.NonPrimary {
		c.NonPrimary++
	}
	if t.ScopeUpgrade {
		c.ScopeUpgrade++
	}
	if t.Plaintext {
		c.Plaintext++
	}
	if t.Unsigned {
		c.Unsigned++
	}
	if t.OldSigner {
		c.OldSigner++
	}
	if len(t.Blocked) > 0 {
		c.Blocked++
		for _, b := range t.Blocked {
			res.block(r, b.Label, SafeError(b.Err))
		}
	}
	if !t.Changed {
		return nil, nil
	}
	c.Rewrite++
	return newJob(r, t.Value), nil
}

func (res *Result) block(r *Rec, field string, e *secret.ErrorInfo) {
	if len(res.Blocked) >= maxBlockedListed {
		res.BlockedMore++
		return
	}
	key := string(r.Key)
	if !utf8.Valid(r.Key) {
		key = "base64:" + base64.StdEncoding.EncodeToString(r.Key)
	}
	res.Blocked = append(res.Blocked, BlockedValue{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Key: key, Field: field, Error: e})
}

// BuildPlan is the pure half of a sweep: from a compacted view and the
// offsets it was read to, what would be re-produced where.
func BuildPlan(v *View, bounds map[TP]kafkax.Bounds, o Options) (*Result, error) {
	o.defaults()
	res, _, err := buildPlan(v, bounds, &o)
	return res, err
}

func buildPlan(v *View, bounds map[TP]kafkax.Bounds, o *Options) (*Result, map[TP][]*job, error) {
	if o.Keyring == nil {
		return nil, nil, &secret.Error{Kind: secret.KindNoKeyring, Detail: "a sweep needs the keyring"}
	}
	ru := o.rule()
	res, tps := newResult(bounds, o)
	jobs := map[TP][]*job{}
	for i, tp := range tps {
		pr := res.Partitions[i]
		recs := v.Partition(tp)
		ts, errs := transformAll(recs, o.Fields, ru)
		for i, r := range recs {
			j, err := planTransformed(r, ts[i], errs[i], &pr.Counts, res)
			if err != nil {
				return nil, nil, err
			}
			if j != nil {
				jobs[tp] = append(jobs[tp], j)
			}
		}
		res.Totals.add(pr.Counts)
	}
	res.remind()
	return res, jobs, nil
}

// newResult is a plan's result before any record is planned: one report
// per partition, in topic and partition order, as are the partitions
// returned.
func newResult(bounds map[TP]kafkax.Bounds, o *Options) (*Result, []TP) {
	res := &Result{
		Mode: "plan", Topics: o.Topics, Fields: FieldSpecs(o.Fields), Primary: o.Keyring.Primary(), Targets: o.rule().targets.list(),
		EncryptPlaintext: o.EncryptPlaintext, Resign: o.Resign, TransactionalID: o.TransactionalID,
		Partitions: []*PartitionReport{}, Blocked: []BlockedValue{},
	}
	tps := make([]TP, 0, len(bounds))
	for tp := range bounds {
		tps = append(tps, tp)
	}
	sortTPs(tps)
	for _, tp := range tps {
		res.Partitions = append(res.Partitions, &PartitionReport{Topic: tp.Topic, Partition: tp.Partition, EndOffset: bounds[tp].End})
	}
	return res, tps
}

// remind sets the reminder once the totals say plaintext is encrypted.
func (res *Result) remind() {
	if res.EncryptPlaintext && res.Totals.Values.Encrypt > 0 {
		res.Reminder = PlaintextReminder
	}
}

// transformAll transforms records in parallel: the crypto and JSON work
// per record is independent (a Keyring is safe for concurrent use); the
// counting after it is not.
func transformAll(recs []*Rec, fields []Field, ru rule) ([]transformed, []error) {
	ts := make([]transformed, len(recs))
	errs := make([]error, len(recs))
	parallel(len(recs), func(i int) {
		ts[i], errs[i] = transform(recs[i].Value, fields, ru)
	})
	return ts, errs
}

// planned is one chunk of an executing sweep's plan: records of one
// partition, in offset order, with their transforms.
type planned struct {
	tp   TP
	recs []*Rec
	ts   []transformed
	errs []error
}

// planChunk is how many records a chunk of planAhead holds: two of the
// default transactions, so the first is written while the rest is planned.
const planChunk = 2 * DefaultBatchSize

// planAhead transforms the records of parts (the compacted view as read,
// partition by partition, in the order given) on a goroutine of its own,
// a chunk at a time, so that an executing sweep writes what is planned
// while the rest is transformed: the transforms (a decrypt and an encrypt
// per token) were a third of a sweep's time, spent before its first
// write. Every partition sends at least one chunk, an empty one when it
// holds no record. The channel closes when all are sent, or when ctx ends.
func planAhead(ctx context.Context, tps []TP, parts map[TP][]*Rec, fields []Field, ru rule) <-chan planned {
	out := make(chan planned, 4)
	go func() {
		defer close(out)
		for _, tp := range tps {
			recs := parts[tp]
			for at := 0; at == 0 || at < len(recs); at += planChunk {
				chunk := recs[at:min(at+planChunk, len(recs))]
				ts, errs := transformAll(chunk, fields, ru)
				select {
				case out <- planned{tp: tp, recs: chunk, ts: ts, errs: errs}:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out
}

// parallel runs fn(0) … fn(n-1) on up to GOMAXPROCS goroutines.
func parallel(n int, fn func(i int)) {
	workers := min(runtime.GOMAXPROCS(0), (n+255)/256)
	if workers <= 1 {
		for i := range n {
			fn(i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				fn(i)
			}
		})
	}
	wg.Wait()
}
