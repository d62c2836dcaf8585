package reencrypt

import (
	"cmp"
	"context"
	"encoding/base64"
	"slices"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/secret"
)

// ScanEntry is one secret value in the compacted view. It never holds a
// plaintext: a plaintext value is described by a length range and a keyed
// fingerprint.
type ScanEntry struct {
	Topic      string        `json:"topic"`
	Partition  int32         `json:"partition"`
	Offset     int64         `json:"offset"`
	Key        string        `json:"key"`
	KeyBase64  string        `json:"key_base64,omitempty"` // the key's bytes, when they are not UTF-8
	Field      string        `json:"field"`
	FieldScope string        `json:"field_scope,omitempty"`
	FieldMode  Mode          `json:"field_mode"`
	Status     secret.Status `json:"status"`            // encrypted, signed, plaintext, corrupt
	Kid        string        `json:"kid,omitempty"`     // the header's kid: sealing kid of a token, signer of a signed value
	Scope      string        `json:"scope,omitempty"`   // the stamped flenc_scope
	Alg        string        `json:"alg,omitempty"`     // dir, ECDH-ES+A256KW or Ed25519
	Decrypt    secret.Kind   `json:"decrypt,omitempty"` // with a keyring: ok, unknown_kid, seal_only, tag_mismatch, scope_violation, key_binding, …; without: scope_violation by the header
	Verify     secret.Kind   `json:"verify,omitempty"`  // a signature's verdict through the field's scope: verified, bad_signature, unknown_signer, scope_violation, key_binding, unsigned
	Signer     string        `json:"signer,omitempty"`  // the signature's kid (inside the token for an encrypted or encrypted-signed field)
	// With a keyring, where the value belongs now: its scope's sealing
	// kid (a token) and signing kid (a signature).
	TargetKid    string            `json:"target_kid,omitempty"`
	TargetSigner string            `json:"target_signer,omitempty"`
	Problem      secret.Kind       `json:"problem,omitempty"` // what is wrong with the value for its field ("" nothing)
	Error        *secret.ErrorInfo `json:"error,omitempty"`
	Plaintext    *PlainInfo        `json:"plaintext,omitempty"`
}

// Finding reports whether the entry is one a scan gates on.
func (e ScanEntry) Finding() bool { return e.Problem != "" }

// Stale reports whether the entry is a token of an encrypted field that is
// not under its scope's sealing kid (judged with a keyring; a scope no key
// can seal has no target, and every token in it is stale).
func (e ScanEntry) Stale(withKeyring bool) bool {
	return withKeyring && e.Status == secret.StatusEncrypted && e.FieldMode != ModeSigned && (e.TargetKid == "" || e.Kid != e.TargetKid)
}

// OldSigner reports whether the entry's signature verified under a signer
// that is not its scope's signing kid (judged with a keyring that names one).
func (e ScanEntry) OldSigner() bool {
	return e.Verify == VerifyOK && e.TargetSigner != "" && e.Signer != e.TargetSigner
}

// KidCount counts values of one kid and status ("" kid for plaintext and
// unreadable values).
type KidCount struct {
	Kid    string        `json:"kid"`
	Status secret.Status `json:"status"`
	Count  int           `json:"count"`
}

// SignerCount counts signatures of one signer kid by verdict.
type SignerCount struct {
	Kid    string      `json:"kid"`
	Verify secret.Kind `json:"verify"` // "" when judged without a keyring
	Count  int         `json:"count"`
}

// ScanSummary counts what a scan found. Each finding is counted once, in
// the first of corrupt, plaintext, unsigned, undecryptable, unverified
// that applies.
type ScanSummary struct {
	Records       int                   `json:"records"` // live records in the compacted view
	Values        int                   `json:"values"`  // secret values (absent and null ones skipped)
	ByStatus      map[secret.Status]int `json:"by_status"`
	ByKid         []KidCount            `json:"by_kid"`
	BySigner      []SignerCount         `json:"by_signer"` // every signature: signed values and those inside tokens
	ByDecrypt     map[secret.Kind]int   `json:"by_decrypt,omitempty"`
	ByVerify      map[secret.Kind]int   `json:"by_verify,omitempty"`
	ByProblem     map[secret.Kind]int   `json:"by_problem"`
	Plaintext     int                   `json:"plaintext"`     // values in the clear where the field encrypts
	Unsigned      int                   `json:"unsigned"`      // values not signed where the field signs
	Corrupt       int                   `json:"corrupt"`       // values that do not parse
	Undecryptable int                   `json:"undecryptable"` // well-formed tokens the field cannot open: by the keyring, or without one by the scope ratchet
	Unverified    int                   `json:"unverified"`    // signatures that do not verify: by the keyring, or without one by their scope
	Stale         int                   `json:"stale"`         // with a keyring: tokens not under their scope's sealing kid (not a finding: the sweep moves them)
	OldSigner     int                   `json:"old_signer"`    // with a keyring: signatures by a signer that is not their scope's signing kid
	Findings      int                   `json:"findings"`      // corrupt + plaintext + unsigned + undecryptable + unverified
}

// ScanPartition is what the scan read of one partition.
type ScanPartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	EndOffset int64  `json:"end_offset"` // read to here (read_committed), captured at the start
	Records   int    `json:"records"`    // live records in the compacted view
}

// ScanReport is the result of a scan.
type ScanReport struct {
	Topics []string `json:"topics"`
	Fields []string `json:"fields"`
	// Fingerprints says what keys the plaintext fingerprints: "keyring"
	// (comparable across runs with the same primary key) or "run".
	Fingerprints string          `json:"fingerprints"`
	Primary      string          `json:"primary,omitempty"` // with a keyring
	Kids         []string        `json:"kids,omitempty"`    // with a keyring: the kids it holds
	Targets      []ScopeTarget   `json:"targets,omitempty"` // with a keyring: the sealing and signing kid of each field scope
	Partitions   []ScanPartition `json:"partitions"`
	Summary      ScanSummary     `json:"summary"`
	Clean        bool            `json:"clean"`
	Entries      []ScanEntry     `json:"entries"`
}

// TokensUnder counts the values that depend on kid: tokens whose header
// names it (of either generation, corrupt ones included) and signatures
// it made (signed values, and with a keyring those inside tokens). A
// value both sealed and signed by kid counts once. The guard of `keys
// remove` refuses while this is not 0.
func (r *ScanReport) TokensUnder(kid string) int {
	n := 0
	for _, e := range r.Entries {
		if (e.Kid == kid && e.Status != secret.StatusPlaintext) || e.Signer == kid {
			n++
		}
	}
	return n
}

// TokensNotUnder counts the tokens whose header names another kid than kid
// (corrupt values whose kid could be read included).
func (r *ScanReport) TokensNotUnder(kid string) int {
	n := 0
	for _, e := range r.Entries {
		if e.Kid != "" && e.Kid != kid {
			n++
		}
	}
	return n
}

// KidUse is how many values depend on a kid in one way with one outcome.
type KidUse struct {
	// As is "sealing" (a token's kid) or "signer" (a signature's kid).
	As string `json:"as"`
	// Outcome is "ok" (a token that opens), "verified" (a signature that
	// verifies), "corrupt", the failing kind, or "" (judged without a
	// keyring).
	Outcome string `json:"outcome"`
	Count   int    `json:"count"`
}

// Uses of a kid, as KidUse.As names them.
const (
	UseSealing = "sealing"
	UseSigner  = "signer"
)

// Use says how the entry depends on kid, as KidUse counts it: As and
// Outcome, ok false when it does not. A value sealed and signed by the
// same kid is one use, its sealing.
func (e ScanEntry) Use(kid string) (use KidUse, ok bool) {
	switch {
	case e.Status == secret.StatusPlaintext:
	case e.Status == secret.StatusCorrupt && e.Kid == kid:
		// What a corrupt value was meant to be is its field's word.
		as := UseSealing
		if e.FieldMode == ModeSigned {
			as = UseSigner
		}
		return KidUse{As: as, Outcome: "corrupt", Count: 1}, true
	case e.Status == secret.StatusEncrypted && e.Kid == kid:
		return KidUse{As: UseSealing, Outcome: string(e.Decrypt), Count: 1}, true
	case e.Signer == kid:
		return KidUse{As: UseSigner, Outcome: string(e.Verify), Count: 1}, true
	}
	return KidUse{}, false
}

// UsesOf groups the values that depend on kid (TokensUnder) by how and
// with what outcome, sealing before signer, then by outcome: what the
// guard of `keys remove` explains a refusal with.
func (r *ScanReport) UsesOf(kid string) []KidUse {
	counts := map[[2]string]int{}
	for _, e := range r.Entries {
		if u, ok := e.Use(kid); ok {
			counts[[2]string{u.As, u.Outcome}]++
		}
	}
	out := make([]KidUse, 0, len(counts))
	for k, n := range counts {
		out = append(out, KidUse{As: k[0], Outcome: k[1], Count: n})
	}
	slices.SortFunc(out, func(a, b KidUse) int {
		if c := cmp.Compare(a.As, b.As); c != 0 {
			return c
		}
		return cmp.Compare(a.Outcome, b.Outcome)
	})
	return out
}

// ScanOptions say what to scan.
type ScanOptions struct {
	Topics  []string
	Fields  []Field
	Keyring *secret.Keyring // optional: also open every token
	// Planned, when set, is told how many offsets the read covers; Read
	// is told of every record read (a progress bar).
	Planned func(offsets int64)
	Read    func(n int64)
	// summaryOnly leaves Entries empty: a sweep's verification reads
	// only the summary, and keeping an entry per value of a large topic
	// cost memory and time.
	summaryOnly bool
}

// ReadView reads the topics read_committed to the end offsets captured at
// the start and returns their compacted view and what was read per
// partition. A missing topic is an error, never an empty view.
func ReadView(ctx context.Context, cl *kgo.Client, topics []string, planned func(int64), read func(int64)) (*View, *kafkax.ReadResult, error) {
	v := NewView()
	res, err := kafkax.ReadFrom(ctx, cl, topics, kafkax.FromLogStart, planned, func(r *kgo.Record) error {
		v.Apply(FromKgo(r))
		if read != nil {
			read(1)
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return v, res, nil
}

// Scan reads the topics and reports every secret value of their compacted
// view.
func Scan(ctx context.Context, cl *kgo.Client, o ScanOptions) (*ScanReport, error) {
	v, res, err := ReadView(ctx, cl, o.Topics, o.Planned, o.Read)
	if err != nil {
		return nil, err
	}
	return ScanView(v, res.Bounds, o), nil
}

// ScanView reports every secret value of a view: the pure half of Scan.
func ScanView(v *View, bounds map[TP]kafkax.Bounds, o ScanOptions) *ScanReport {
	rep := &ScanReport{
		Topics:  o.Topics,
		Fields:  FieldSpecs(o.Fields),
		Entries: []ScanEntry{},
		Summary: ScanSummary{ByStatus: map[secret.Status]int{}, ByKid: []KidCount{}, BySigner: []SignerCount{},
			ByDecrypt: map[secret.Kind]int{}, ByVerify: map[secret.Kind]int{}, ByProblem: map[secret.Kind]int{}},
	}
	tg := targetsFor(o.Keyring, o.Fields)
	if o.Keyring != nil {
		rep.Primary, rep.Kids, rep.Targets = o.Keyring.Primary(), o.Keyring.Kids(), tg.list()
	}
	fp := NewFingerprinter(o.Keyring)
	rep.Fingerprints = fp.Source
	tps := make([]TP, 0, len(bounds))
	for tp := range bounds {
		tps = append(tps, tp)
	}
	sortTPs(tps)
	t := newTally(&rep.Summary, o.Keyring != nil)
	for _, tp := range tps {
		recs := v.Partition(tp)
		rep.Partitions = append(rep.Partitions, ScanPartition{Topic: tp.Topic, Partition: tp.Partition, EndOffset: bounds[tp].End, Records: len(recs)})
		rep.Summary.Records += len(recs)
		per := make([][]ScanEntry, len(recs))
		parallel(len(recs), func(i int) { per[i] = scanRecord(recs[i], o, tg, fp) })
		for _, es := range per {
			t.add(es)
		}
		if o.summaryOnly {
			continue
		}
		n := len(rep.Entries)
		for _, es := range per {
			n += len(es)
		}
		rep.Entries = slices.Grow(rep.Entries, n-len(rep.Entries))
		for _, es := range per {
			rep.Entries = append(rep.Entries, es...)
		}
	}
	t.finish()
	rep.Clean = rep.Summary.Findings == 0
	return rep
}

// tally fills a summary from entries, a batch at a time.
type tally struct {
	s           *ScanSummary
	withKeyring bool
	byKid       map[[2]string]int
	bySigner    map[[2]string]int
}

func newTally(s *ScanSummary, withKeyring bool) *tally {
	return &tally{s: s, withKeyring: withKeyring, byKid: map[[2]string]int{}, bySigner: map[[2]string]int{}}
}

// add counts entries.
func (t *tally) add(entries []ScanEntry) {
	s, withKeyring, byKid, bySigner := t.s, t.withKeyring, t.byKid, t.bySigner
	for _, e := range entries {
		s.Values++
		s.ByStatus[e.Status]++
		byKid[[2]string{e.Kid, string(e.Status)}]++
		if e.Signer != "" {
			bySigner[[2]string{e.Signer, string(e.Verify)}]++
		}
		if e.Decrypt != "" {
			s.ByDecrypt[e.Decrypt]++
		}
		if e.Verify != "" {
			s.ByVerify[e.Verify]++
		}
		if e.Problem != "" {
			s.ByProblem[e.Problem]++
			s.Findings++
		}
		if e.Stale(withKeyring) {
			s.Stale++
		}
		if e.OldSigner() {
			s.OldSigner++
		}
		switch {
		case e.Problem == "":
		case e.Status == secret.StatusCorrupt:
			s.Corrupt++
		case e.Problem == secret.KindPlaintext:
			s.Plaintext++
		case e.Problem == secret.KindUnsigned:
			s.Unsigned++
		case e.Decrypt != "" && e.Decrypt != DecryptOK:
			s.Undecryptable++
		default:
			s.Unverified++
		}
	}
}

// finish lists the kids and signers counted, in order.
func (t *tally) finish() {
	s, byKid, bySigner := t.s, t.byKid, t.bySigner
	for k, n := range byKid {
		s.ByKid = append(s.ByKid, KidCount{Kid: k[0], Status: secret.Status(k[1]), Count: n})
	}
	slices.SortFunc(s.ByKid, func(a, b KidCount) int {
		if c := cmp.Compare(a.Kid, b.Kid); c != 0 {
			return c
		}
		return cmp.Compare(a.Status, b.Status)
	})
	for k, n := range bySigner {
		s.BySigner = append(s.BySigner, SignerCount{Kid: k[0], Verify: secret.Kind(k[1]), Count: n})
	}
	slices.SortFunc(s.BySigner, func(a, b SignerCount) int {
		if c := cmp.Compare(a.Kid, b.Kid); c != 0 {
			return c
		}
		return cmp.Compare(a.Verify, b.Verify)
	})
}

func scanRecord(r *Rec, o ScanOptions, tg targets, fp *Fingerprinter) []ScanEntry {
	// A summary counts verdicts: where the value is, and what it looks
	// like, are left out (they were a fifth of a sweep's verification).
	var base ScanEntry
	if !o.summaryOnly {
		base = ScanEntry{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Key: string(r.Key)}
		if !utf8.Valid(r.Key) {
			base.KeyBase64 = base64.StdEncoding.EncodeToString(r.Key)
		}
	}
	slots, err := Slots(r.Value, o.Fields)
	if err != nil {
		// An invalid message: no field can be read, so none can be
		// vouched for. One corrupt entry per declared field.
		out := make([]ScanEntry, len(o.Fields))
		for i, f := range o.Fields {
			e := base
			e.Field, e.FieldScope, e.FieldMode, e.Status = f.Name(), f.Scope, f.mode(), secret.StatusCorrupt
			e.Problem = secret.KindMalformed
			e.Error = &secret.ErrorInfo{Kind: secret.KindMalformed, Message: "malformed: " + err.Error()}
			out[i] = e
		}
		return out
	}
	out := make([]ScanEntry, 0, len(slots))
	for _, s := range slots {
		v := Judge(s, o.Keyring)
		e := base
		e.FieldScope, e.FieldMode = s.Field.Scope, s.Field.mode()
		e.Status, e.Kid, e.Scope, e.Alg = v.Status, v.Kid, v.TokenScope, v.Alg
		e.Decrypt, e.Verify, e.Signer, e.Problem = v.Decrypt, v.Verify, v.Signer, v.Problem
		if !o.summaryOnly {
			e.Field = s.Label()
			if v.Problem != "" {
				e.Error = SafeError(v.Err)
			}
		}
		if tg != nil {
			t := tg.of(s.Field.Scope)
			if e.Status == secret.StatusEncrypted && s.Field.Encrypted() {
				e.TargetKid = t.Sealing
			}
			if e.Signer != "" {
				e.TargetSigner = t.Signing
			}
		}
		if v.Status == secret.StatusPlaintext && !o.summaryOnly {
			e.Plaintext = fp.Plain(s.Raw)
		}
		out = append(out, e)
	}
	return out
}
