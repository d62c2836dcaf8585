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
	Status     secret.Status `json:"status"`
	Kid        string        `json:"kid,omitempty"`
	Scope      string        `json:"scope,omitempty"`   // the token's flenc_scope
	Decrypt    secret.Kind   `json:"decrypt,omitempty"` // with a keyring: ok, unknown_kid, tag_mismatch, scope_violation, …; without: scope_violation by the header
	Error      *ErrorInfo    `json:"error,omitempty"`
	Plaintext  *PlainInfo    `json:"plaintext,omitempty"`
}

// Finding reports whether the entry is one a scan gates on.
func (e ScanEntry) Finding() bool {
	return e.Status == secret.StatusPlaintext || e.Status == secret.StatusCorrupt ||
		(e.Decrypt != "" && e.Decrypt != DecryptOK)
}

// KidCount counts values of one kid and status ("" kid for plaintext and
// unreadable values).
type KidCount struct {
	Kid    string        `json:"kid"`
	Status secret.Status `json:"status"`
	Count  int           `json:"count"`
}

// ScanSummary counts what a scan found.
type ScanSummary struct {
	Records       int                   `json:"records"` // live records in the compacted view
	Values        int                   `json:"values"`  // secret values (absent and null ones skipped)
	ByStatus      map[secret.Status]int `json:"by_status"`
	ByKid         []KidCount            `json:"by_kid"`
	ByDecrypt     map[secret.Kind]int   `json:"by_decrypt,omitempty"`
	Plaintext     int                   `json:"plaintext"`
	Corrupt       int                   `json:"corrupt"`
	Undecryptable int                   `json:"undecryptable"` // well-formed tokens the field cannot open: by the keyring, or without one by the scope ratchet
	Findings      int                   `json:"findings"`      // plaintext + corrupt + undecryptable
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
	Partitions   []ScanPartition `json:"partitions"`
	Summary      ScanSummary     `json:"summary"`
	Clean        bool            `json:"clean"`
	Entries      []ScanEntry     `json:"entries"`
}

// TokensUnder counts the tokens whose header names kid.
func (r *ScanReport) TokensUnder(kid string) int {
	n := 0
	for _, e := range r.Entries {
		if e.Kid == kid && e.Status != secret.StatusPlaintext {
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

// ScanOptions say what to scan.
type ScanOptions struct {
	Topics  []string
	Fields  []Field
	Keyring *secret.Keyring // optional: also open every token
	// Planned, when set, is told how many offsets the read covers; Read
	// is told of every record read (a progress bar).
	Planned func(offsets int64)
	Read    func(n int64)
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
		Summary: ScanSummary{ByStatus: map[secret.Status]int{}, ByKid: []KidCount{}, ByDecrypt: map[secret.Kind]int{}},
	}
	if o.Keyring != nil {
		rep.Primary, rep.Kids = o.Keyring.Primary(), o.Keyring.Kids()
	}
	fp := NewFingerprinter(o.Keyring)
	rep.Fingerprints = fp.Source
	tps := make([]TP, 0, len(bounds))
	for tp := range bounds {
		tps = append(tps, tp)
	}
	sortTPs(tps)
	for _, tp := range tps {
		recs := v.Partition(tp)
		rep.Partitions = append(rep.Partitions, ScanPartition{Topic: tp.Topic, Partition: tp.Partition, EndOffset: bounds[tp].End, Records: len(recs)})
		rep.Summary.Records += len(recs)
		per := make([][]ScanEntry, len(recs))
		parallel(len(recs), func(i int) { per[i] = scanRecord(recs[i], o, fp) })
		for _, es := range per {
			rep.Entries = append(rep.Entries, es...)
		}
	}
	byKid := map[[2]string]int{}
	for _, e := range rep.Entries {
		s := &rep.Summary
		s.Values++
		s.ByStatus[e.Status]++
		byKid[[2]string{e.Kid, string(e.Status)}]++
		if e.Decrypt != "" {
			s.ByDecrypt[e.Decrypt]++
		}
		switch {
		case e.Status == secret.StatusPlaintext:
			s.Plaintext++
		case e.Status == secret.StatusCorrupt:
			s.Corrupt++
		case e.Decrypt != "" && e.Decrypt != DecryptOK:
			s.Undecryptable++
		}
	}
	for k, n := range byKid {
		rep.Summary.ByKid = append(rep.Summary.ByKid, KidCount{Kid: k[0], Status: secret.Status(k[1]), Count: n})
	}
	slices.SortFunc(rep.Summary.ByKid, func(a, b KidCount) int {
		if c := cmp.Compare(a.Kid, b.Kid); c != 0 {
			return c
		}
		return cmp.Compare(a.Status, b.Status)
	})
	s := &rep.Summary
	s.Findings = s.Plaintext + s.Corrupt + s.Undecryptable
	rep.Clean = s.Findings == 0
	return rep
}

func scanRecord(r *Rec, o ScanOptions, fp *Fingerprinter) []ScanEntry {
	base := ScanEntry{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Key: string(r.Key)}
	if !utf8.Valid(r.Key) {
		base.KeyBase64 = base64.StdEncoding.EncodeToString(r.Key)
	}
	slots, err := Slots(r.Value, o.Fields)
	if err != nil {
		// An invalid message: no field can be read, so none can be
		// vouched for. One corrupt entry per declared field.
		out := make([]ScanEntry, len(o.Fields))
		for i, f := range o.Fields {
			e := base
			e.Field, e.FieldScope, e.Status = f.Name(), f.Scope, secret.StatusCorrupt
			e.Error = &ErrorInfo{Kind: secret.KindMalformed, Message: "malformed: " + err.Error()}
			out[i] = e
		}
		return out
	}
	out := make([]ScanEntry, 0, len(slots))
	for _, s := range slots {
		v := Judge(s, o.Keyring)
		e := base
		e.Field, e.FieldScope = s.Label(), s.Field.Scope
		e.Status, e.Kid, e.Scope, e.Decrypt = v.Status, v.Kid, v.TokenScope, v.Decrypt
		if v.Err != nil && (v.Status == secret.StatusCorrupt || v.Decrypt != DecryptOK) {
			e.Error = SafeError(v.Err)
			if e.Kid == "" {
				e.Kid = v.Err.Kid
			}
		}
		if v.Status == secret.StatusPlaintext {
			e.Plaintext = fp.Plain(s.Raw)
		}
		out = append(out, e)
	}
	return out
}
