package testrun

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/module"
)

// MaxDeterminismRecords bounds the records a determinism check runs. It
// instantiates the module twice per record: for the count example (Go),
// 3.3 ms of CPU each (wazero copying the data segments, most of it), 6 ms
// with the host's garbage collection and memory mappings, measured over
// 1,000 records. A test file of a few thousand records takes seconds, and
// this many about a minute on two cores.
const MaxDeterminismRecords = 10_000

// The checks of a record's result, each comparing two runs of it.
const (
	// CheckFreshInstance compares the test's run, on its partition's
	// instance after the partition's records before it, with a fresh
	// instance of its partition: what the module carries from record to
	// record.
	CheckFreshInstance = "fresh_instance"
	// CheckOtherPartition compares fresh instances of its partition and
	// of another: what the module takes from the partition it was set up
	// with.
	CheckOtherPartition = "other_partition"
)

// Report is the determinism check of an input.
type Report struct {
	// Records is how many records were checked: those that reached the
	// module (an invalid record never does).
	Records int `json:"records"`
	// Partitions is the partition count the input was placed over.
	Partitions int `json:"partitions"`
	// Isolation is the module's (transform.isolation): record or task.
	Isolation   string       `json:"isolation"`
	Differences []Difference `json:"differences"`
}

// Difference is one field of a record's result that two runs of it
// disagree on. Of TestRun, FreshInstance and OtherPartition, the two that
// Check compares are given; one that is absent had no such field (an
// output the other run did not send), or failed (Failure).
type Difference struct {
	Line      int    `json:"line"`
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	Check     string `json:"check"`
	// Path is the field, a JSON path into the result's line (what -o
	// json prints): outputs[0].value.seq. Empty with Failure.
	Path          string          `json:"path,omitempty"`
	TestRun       json.RawMessage `json:"test_run,omitempty"`
	FreshInstance json.RawMessage `json:"fresh_instance,omitempty"`
	// OtherPartition is the field on the instance set up as partition
	// InstancePartition.
	OtherPartition    json.RawMessage `json:"other_partition,omitempty"`
	InstancePartition *int32          `json:"instance_partition,omitempty"`
	// Failure: the compared run failed where the other did not.
	Failure string `json:"failure,omitempty"`
}

// CheckDeterminism runs each record of in that reached the module in res
// (Run's result, which must have no Err) twice more, each from the state
// it had in res: on a fresh instance of its partition, and on a fresh
// instance set up as the next partition (its partition + 1 modulo the
// partition count; partition 1 when there is one). It reports every field
// of the results that differs between the test's run and the fresh one,
// and between the two fresh ones, in input order. Records are checked on
// as many goroutines as GOMAXPROCS: instantiating is most of the cost.
func (t *Tester) CheckDeterminism(ctx context.Context, in Input, res Result) (Report, error) {
	if res.Err != nil || len(res.results) != len(in.Records) {
		return Report{}, fmt.Errorf("the test's run did not get through the input: %v", res.Err)
	}
	rep := Report{Partitions: in.Partitions, Isolation: t.spec.IsolationName(), Differences: []Difference{}}
	var todo []int
	for i, r := range res.results {
		if r.Invalid == "" {
			todo = append(todo, i)
		}
	}
	if rep.Records = len(todo); rep.Records > MaxDeterminismRecords {
		return Report{}, fmt.Errorf("%d records reach the module, and the determinism check takes up to %d (each costs two instances of the module): check a sample", rep.Records, MaxDeterminismRecords)
	}
	// The module again, its logs discarded: each record's runs here log
	// what the test's run logged already, and each instance's setup too.
	quiet, err := module.Load(ctx, t.spec, module.Options{CacheDir: t.opts.CacheDir, OnStuck: t.opts.OnStuck, Configs: t.opts.Configs})
	if err != nil {
		return Report{}, err
	}
	defer quiet.Close(ctx)
	found := make([][]Difference, len(in.Records))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(todo)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				found[i] = t.checkRecord(ctx, quiet, in, res, i)
			}
		}()
	}
	for _, i := range todo {
		if ctx.Err() != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return Report{}, err
	}
	for _, d := range found {
		rep.Differences = append(rep.Differences, d...)
	}
	return rep, nil
}

// checkRecord runs record i alone on a fresh instance of its partition
// and of the next, and compares.
func (t *Tester) checkRecord(ctx context.Context, m *module.Module, in Input, res Result, i int) []Difference {
	rec, r := in.Records[i], res.results[i]
	other := (rec.Partition + 1) % int32(max(in.Partitions, 2))
	where := Difference{Line: in.Lines[i], Topic: rec.Topic, Partition: rec.Partition, Offset: rec.Offset}

	fresh, err := t.runAlone(ctx, m, rec, rec.Partition, r)
	d := where
	d.Check = CheckFreshInstance
	out := compareRuns(d, res.Cases[i], fresh, err, func(d *Difference, a, b json.RawMessage) {
		d.TestRun, d.FreshInstance = a, b
	})
	if err != nil {
		return out // nothing to compare the other partition's run with
	}
	moved, err := t.runAlone(ctx, m, rec, other, r)
	d = where
	d.Check, d.InstancePartition = CheckOtherPartition, &other
	return append(out, compareRuns(d, fresh, moved, err, func(d *Difference, a, b json.RawMessage) {
		d.FreshInstance, d.OtherPartition = a, b
	})...)
}

// runAlone runs rec alone on a fresh instance of m set up as partition,
// from the state it had in the test's run (r).
func (t *Tester) runAlone(ctx context.Context, m *module.Module, rec *kgo.Record, partition int32, r module.OfflineResult) (Case, error) {
	start := map[string][]byte{}
	if !r.NoStateKey && r.StateBefore != nil {
		start[r.StateKey] = r.StateBefore
	}
	got, err := runPartition(ctx, m, t.template, partition, []*kgo.Record{rec}, start)
	if err != nil {
		return Case{}, err
	}
	return NewCase(rec, got[0]), nil
}

// compareRuns is a difference per field where a and b disagree, or one
// for b's failure; set puts the two values in a difference.
func compareRuns(d Difference, a, b Case, bErr error, set func(d *Difference, a, b json.RawMessage)) []Difference {
	if bErr != nil {
		d.Failure = bErr.Error()
		return []Difference{d}
	}
	var out []Difference
	for _, f := range diffCases(a, b) {
		d := d
		d.Path = f.path
		set(&d, f.a, f.b)
		out = append(out, d)
	}
	return out
}

// fieldDiff is a field two results disagree on; a nil value is absent.
type fieldDiff struct {
	path string
	a, b json.RawMessage
}

// diffCases compares two results of one record field by field, as the
// bytes a replay must reproduce: JSON that differs only in member order,
// number spelling or spacing differs.
func diffCases(a, b Case) []fieldDiff {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	out := diffJSON("", ja, jb)
	// json.Marshal compacts the values, which hides a difference in
	// spacing alone: compared here.
	for i := range min(len(a.Outputs), len(b.Outputs)) {
		va, vb := a.Outputs[i].Value, b.Outputs[i].Value
		if !bytes.Equal(va, vb) && bytes.Equal(compact(va), compact(vb)) {
			out = append(out, fieldDiff{path: fmt.Sprintf("outputs[%d].value", i), a: quoteRaw(va), b: quoteRaw(vb)})
		}
	}
	return out
}

func compact(b []byte) []byte {
	var buf bytes.Buffer
	if json.Compact(&buf, b) != nil {
		return b
	}
	return buf.Bytes()
}

// quoteRaw is raw bytes as a JSON string, for a value that differs only
// in its spacing, which JSON would not show.
func quoteRaw(b []byte) json.RawMessage {
	q, _ := json.Marshal(string(b))
	return q
}

// diffJSON lists the leaves where a and b differ below path. Objects and
// arrays are compared member by member; one that differs only in its
// members' order is a difference at its own path.
func diffJSON(path string, a, b json.RawMessage) []fieldDiff {
	if bytes.Equal(a, b) {
		return nil
	}
	var out []fieldDiff
	var oa, ob map[string]json.RawMessage
	var aa, ab []json.RawMessage
	switch {
	case a == nil || b == nil:
		return []fieldDiff{{path, a, b}}
	case json.Unmarshal(a, &oa) == nil && json.Unmarshal(b, &ob) == nil && oa != nil && ob != nil:
		keys := make([]string, 0, len(oa)+len(ob))
		for k := range oa {
			keys = append(keys, k)
		}
		for k := range ob {
			if _, ok := oa[k]; !ok {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			out = append(out, diffJSON(member(path, k), oa[k], ob[k])...)
		}
	case json.Unmarshal(a, &aa) == nil && json.Unmarshal(b, &ab) == nil && aa != nil && ab != nil:
		for i := range max(len(aa), len(ab)) {
			var x, y json.RawMessage
			if i < len(aa) {
				x = aa[i]
			}
			if i < len(ab) {
				y = ab[i]
			}
			out = append(out, diffJSON(fmt.Sprintf("%s[%d]", path, i), x, y)...)
		}
	}
	if len(out) == 0 {
		// Leaves that differ, or containers whose members agree but not
		// their order or spelling.
		out = []fieldDiff{{path, a, b}}
	}
	return out
}

var plainName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// member is the path of an object's member: .name, or ["name"] for a
// name that is not a plain identifier.
func member(path, name string) string {
	if plainName.MatchString(name) {
		if path == "" {
			return name
		}
		return path + "." + name
	}
	return path + "[" + strconv.Quote(name) + "]"
}
