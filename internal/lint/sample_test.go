package lint

import (
	"encoding/json"
	"fmt"
	"hash/crc32"
	"strings"
	"testing"

	"github.com/flecht-dev/flecht/internal/kafkax"
)

type topicWriter struct {
	topic   string
	n       int
	offsets map[int32]int64
	place   func(key []byte, n int) int32
}

func murmur(key []byte, n int) int32 { return kafkax.Partition(key, n) }
func crc(key []byte, n int) int32    { return int32(crc32.ChecksumIEEE(key) % uint32(n)) }

func (w *topicWriter) rec(key string, value string) Record {
	if w.offsets == nil {
		w.offsets = map[int32]int64{}
	}
	p := w.place([]byte(key), w.n)
	off := w.offsets[p]
	w.offsets[p]++
	return Record{Topic: w.topic, Partition: p, Offset: off, Key: []byte(key), Value: []byte(value)}
}

func devices(tenants, perTenant int) [][2]string {
	var out [][2]string
	for t := range tenants {
		for d := range perTenant {
			out = append(out, [2]string{fmt.Sprintf("tenant-%d", t), fmt.Sprintf("dev-%d", d)})
		}
	}
	return out
}

func TestCheckerCatchesCoarsening(t *testing.T) {
	// Keys tenant:device, state key {value.tenant}: one tenant's devices
	// hash across partitions.
	w := &topicWriter{topic: "raw", n: 6, place: murmur}
	c := NewChecker(Options{Template: mustParse(t, "{value.tenant}"), Topics: []string{"raw"}, Partitions: map[string]int{"raw": 6}, MaxExamples: 5})
	for _, td := range devices(10, 8) {
		c.Add(w.rec(td[0]+":"+td[1], fmt.Sprintf(`{"tenant":%q,"device":%q}`, td[0], td[1])))
	}
	r := c.Report()
	if r.StaticVerdict != Coarsens || r.ExampleCollision == nil {
		t.Errorf("static: %s %+v", r.StaticVerdict, r.ExampleCollision)
	}
	if r.ViolationCount != 10 || len(r.Violations) != 5 {
		t.Fatalf("violations: %d (%d listed)", r.ViolationCount, len(r.Violations))
	}
	v := r.Violations[0]
	if len(v.Partitions) < 2 || len(v.Records) != min(len(v.Partitions), 4) {
		t.Fatalf("violation %+v", v)
	}
	// 8 devices of one tenant over 6 partitions: most partitions, capped
	// records, partitions sorted.
	for i := 1; i < len(v.Partitions); i++ {
		if v.Partitions[i-1] >= v.Partitions[i] {
			t.Errorf("partitions %v", v.Partitions)
		}
	}
	// Each listed record is concrete and really is where it says.
	seen := map[int32]bool{}
	for _, rec := range v.Records {
		if rec.StateKey != v.StateKey || !strings.HasPrefix(rec.Key, v.StateKey+":") || murmur([]byte(rec.Key), 6) != rec.Partition || seen[rec.Partition] {
			t.Errorf("record %+v in violation %q", rec, v.StateKey)
		}
		seen[rec.Partition] = true
	}
	if r.PartitionerMismatchCount != 0 || r.Findings != 1+10 {
		t.Errorf("findings %d, mismatches %d", r.Findings, r.PartitionerMismatchCount)
	}
}

func TestCheckerPassesARefinement(t *testing.T) {
	w := &topicWriter{topic: "raw", n: 6, place: murmur}
	c := NewChecker(Options{Template: mustParse(t, "{key}/{value.device}"), Topics: []string{"raw"}, Partitions: map[string]int{"raw": 6}})
	for _, td := range devices(10, 8) {
		c.Add(w.rec(td[0], fmt.Sprintf(`{"device":%q}`, td[1])))
	}
	r := c.Report()
	if r.Findings != 0 || r.ViolationCount != 0 || r.StaticVerdict != Unknown {
		t.Fatalf("%+v", r)
	}
	if len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], `no sampled key contains "/"`) {
		t.Errorf("warnings %q", r.Warnings)
	}
	if r.Topics[0].Sampled != 80 || r.Topics[0].KeysWithSeparator != 0 {
		t.Errorf("%+v", r.Topics[0])
	}
	// With a key pattern the verdict is a proof; a key outside it is a finding.
	a := mustAlpha(t, "[a-z0-9-]+")
	c = NewChecker(Options{Template: mustParse(t, "{key}/{value.device}"), Alphabet: a, Topics: []string{"raw"}, Partitions: map[string]int{"raw": 6}})
	c.Add(w.rec("tenant-1", `{"device":"d"}`))
	c.Add(w.rec("Tenant/2", `{"device":"d"}`))
	r = c.Report()
	if r.StaticVerdict != Refines || r.Findings != 1 || len(r.KeyPatternMismatches) != 1 || r.KeyPatternMismatches[0].Key != "Tenant/2" || r.Topics[0].KeyPatternMismatches != 1 {
		t.Errorf("%+v", r)
	}
}

func TestCheckerFlagsTheCRC32Partitioner(t *testing.T) {
	w := &topicWriter{topic: "kcat", n: 6, place: crc}
	c := NewChecker(Options{Template: mustParse(t, "{key}"), Topics: []string{"kcat"}, Partitions: map[string]int{"kcat": 6}})
	mism := 0
	for i := range 60 {
		k := fmt.Sprintf("device-%d", i)
		if crc([]byte(k), 6) != murmur([]byte(k), 6) {
			mism++
		}
		c.Add(w.rec(k, "{}"))
	}
	r := c.Report()
	if mism == 0 || r.PartitionerMismatchCount != int64(mism) || r.Findings != mism {
		t.Fatalf("want %d mismatches: %+v", mism, r)
	}
	m := r.PartitionerMismatches[0]
	if m.Murmur2Partition != murmur([]byte(m.Key), 6) || m.Partition != crc([]byte(m.Key), 6) {
		t.Errorf("mismatch %+v", m)
	}
	if !strings.HasPrefix(r.Topics[0].LikelyPartitioner, "crc32") {
		t.Errorf("likely partitioner %q", r.Topics[0].LikelyPartitioner)
	}
	// Random placement is flagged too, but not attributed to CRC32.
	c = NewChecker(Options{Template: mustParse(t, "{key}"), Topics: []string{"x"}, Partitions: map[string]int{"x": 6}})
	for i := range 60 {
		k := fmt.Sprintf("device-%d", i)
		p := (murmur([]byte(k), 6) + 1) % 6
		if p == crc([]byte(k), 6) {
			p = (p + 1) % 6
		}
		c.Add(Record{Topic: "x", Partition: p, Offset: int64(i), Key: []byte(k)})
	}
	if r := c.Report(); r.PartitionerMismatchCount != 60 || r.Topics[0].LikelyPartitioner != "" {
		t.Errorf("%+v", r.Topics[0])
	}
}

func TestCheckerCopartitioning(t *testing.T) {
	a := &topicWriter{topic: "a", n: 6, place: murmur}
	b := &topicWriter{topic: "b", n: 8, place: murmur}
	c := NewChecker(Options{Template: mustParse(t, "{key}"), Topics: []string{"a", "b"}, Partitions: map[string]int{"a": 6, "b": 8}, MaxExamples: 3})
	moved := 0
	for i := range 40 {
		k := fmt.Sprintf("k%d", i)
		if murmur([]byte(k), 6) != murmur([]byte(k), 8) {
			moved++
		}
		c.Add(a.rec(k, "{}"))
		c.Add(b.rec(k, "{}"))
	}
	r := c.Report()
	if len(r.Copartitioning) == 0 || r.Copartitioning[0].Kind != "partition_count" ||
		r.Copartitioning[0].PartitionCounts["a"] != 6 || r.Copartitioning[0].PartitionCounts["b"] != 8 ||
		!strings.Contains(r.Copartitioning[0].Message, "a has 6, b has 8") {
		t.Fatalf("%+v", r.Copartitioning)
	}
	if r.KeyPlacementCount != moved || len(r.Copartitioning) != 1+3 {
		t.Errorf("key placements %d (want %d), listed %d", r.KeyPlacementCount, moved, len(r.Copartitioning)-1)
	}
	kp := r.Copartitioning[1]
	if kp.Kind != "key_placement" || len(kp.Records) != 2 || kp.Records[0].Partition == kp.Records[1].Partition {
		t.Errorf("%+v", kp)
	}
	// The state-key rule sees the same split across the two topics.
	if r.ViolationCount != moved || r.Findings != 1+moved+moved {
		t.Errorf("violations %d, findings %d", r.ViolationCount, r.Findings)
	}

	// Equal counts, same keys, same partitioner: clean.
	a = &topicWriter{topic: "a", n: 6, place: murmur}
	b = &topicWriter{topic: "b", n: 6, place: murmur}
	c = NewChecker(Options{Template: mustParse(t, "{key}"), Topics: []string{"a", "b"}, Partitions: map[string]int{"a": 6, "b": 6}})
	for i := range 40 {
		c.Add(a.rec(fmt.Sprintf("k%d", i), "{}"))
		c.Add(b.rec(fmt.Sprintf("k%d", i), "{}"))
	}
	if r := c.Report(); r.Findings != 0 || len(r.Copartitioning) != 0 {
		t.Errorf("%+v", r)
	}
}

func TestCheckerOddRecords(t *testing.T) {
	c := NewChecker(Options{Template: mustParse(t, "{key}:{value.d}"), Topics: []string{"t"}, Partitions: map[string]int{"t": 1}})
	c.Add(Record{Topic: "t", Key: nil, Value: []byte(`{"d":"x"}`)})   // keyless
	c.Add(Record{Topic: "t", Key: []byte{0xff}, Value: []byte(`{}`)}) // not UTF-8
	c.Add(Record{Topic: "t", Key: []byte("k"), Value: nil})           // tombstone
	c.Add(Record{Topic: "t", Key: []byte("k"), Value: []byte(`{}`)})  // no value.d
	c.Add(Record{Topic: "t", Key: []byte("k"), Value: []byte(`[1]`)}) // not an object
	c.Add(Record{Topic: "t", Key: []byte("k:x"), Value: []byte(`{"d":"y"}`)})
	c.Add(Record{Topic: "t", Key: []byte("k"), Value: []byte(`{"d":"x:y"}`)})
	r := c.Report()
	ts := r.Topics[0]
	if ts.Sampled != 7 || ts.Keyless != 1 || ts.InvalidKeys != 1 || ts.Tombstones != 1 || ts.RenderErrors != 2 || ts.KeysWithSeparator != 1 {
		t.Errorf("%+v", ts)
	}
	// "k:x"+"y" and "k"+"x:y" collide, but on one partition: a warning,
	// not a violation.
	if r.ViolationCount != 0 || r.Findings != 0 {
		t.Errorf("%+v", r)
	}
	joined := strings.Join(r.Warnings, "\n")
	for _, want := range []string{"2 records have no state key", `1 sampled keys contain ":"`, "not UTF-8", "value.d is missing"} {
		if !strings.Contains(joined, want) {
			t.Errorf("warnings lack %q:\n%s", want, joined)
		}
	}
	b, _ := json.Marshal(r)
	for _, field := range []string{`"static_verdict":"unknown"`, `"violations":[]`, `"copartitioning":[]`, `"partitioner_mismatches":[]`} {
		if !strings.Contains(string(b), field) {
			t.Errorf("JSON lacks %s: %s", field, b)
		}
	}
}

// A key that is not UTF-8 has no state key, but Kafka hashes its bytes
// like any other: its placement is checked all the same, and the report
// carries the exact bytes.
func TestCheckerPlacesNonUTF8Keys(t *testing.T) {
	a := &topicWriter{topic: "a", n: 6, place: crc}
	b := &topicWriter{topic: "b", n: 6, place: murmur}
	c := NewChecker(Options{Template: mustParse(t, "{key}"), Topics: []string{"a", "b"}, Partitions: map[string]int{"a": 6, "b": 6}})
	var bad string
	for i := range 64 {
		key := string([]byte{0xff, byte(i)})
		if crc([]byte(key), 6) != murmur([]byte(key), 6) {
			bad = key
			break
		}
	}
	c.Add(a.rec(bad, "{}"))
	c.Add(b.rec(bad, "{}"))
	r := c.Report()
	if ts := r.Topics[0]; ts.InvalidKeys != 1 || ts.Murmur2Mismatches != 1 || r.Topics[1].Murmur2Mismatches != 0 {
		t.Errorf("topics %+v", r.Topics)
	}
	if len(r.PartitionerMismatches) != 1 || r.PartitionerMismatches[0].KeyHex != fmt.Sprintf("%x", bad) || r.PartitionerMismatches[0].Key != bad {
		t.Errorf("mismatches %+v", r.PartitionerMismatches)
	}
	if r.KeyPlacementCount != 1 || r.Findings != 2 {
		t.Errorf("key placement %d, findings %d; want the key on two partition numbers found", r.KeyPlacementCount, r.Findings)
	}
	b2, _ := json.Marshal(r.PartitionerMismatches[0])
	if !strings.Contains(string(b2), `"key_hex":"ff`) {
		t.Errorf("JSON %s", b2)
	}
}
