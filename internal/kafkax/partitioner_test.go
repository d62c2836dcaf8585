package kafkax

import (
	"encoding/json"
	"math"
	"os"
	"testing"
)

// Vectors from Kafka's own UtilsTest.testMurmur2.
func TestMurmur2KafkaUtilsVectors(t *testing.T) {
	cases := map[string]int32{
		"21":                         -973932308,
		"foobar":                     -790332482,
		"a-little-bit-long-string":   -985981536,
		"a-little-bit-longer-string": -1486304829,
		"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
		"abc": 479470107,
	}
	for in, want := range cases {
		if got := Murmur2([]byte(in)); got != want {
			t.Errorf("Murmur2(%q) = %d, want %d", in, got, want)
		}
	}
}

// realClientVectors are keys produced through a real Kafka broker by real
// clients (Kafka's Java console producer, and kcat with
// partitioner=murmur2_random) and the partition each landed on; see
// testdata/gen-partition-vectors.sh, which the e2e tier reruns live.
type realClientVectors struct {
	Client  string `json:"client"`
	Vectors []struct {
		Key        string `json:"key"`
		Partitions int    `json:"partitions"`
		Partition  int32  `json:"partition"`
	} `json:"vectors"`
}

func TestPartitionMatchesRealClients(t *testing.T) {
	for _, file := range []string{"testdata/partitions-java-console-producer.json", "testdata/partitions-kcat-murmur2.json"} {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var v realClientVectors
		if err := json.Unmarshal(data, &v); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if len(v.Vectors) < 50 {
			t.Fatalf("%s: only %d vectors", file, len(v.Vectors))
		}
		var sawEmpty, sawNonASCII bool
		for _, c := range v.Vectors {
			sawEmpty = sawEmpty || c.Key == ""
			for _, r := range c.Key {
				sawNonASCII = sawNonASCII || r > 127
			}
			if got := Partition([]byte(c.Key), c.Partitions); got != c.Partition {
				t.Errorf("%s: key %q over %d partitions: flecht says %d, %s put it on %d", file, c.Key, c.Partitions, got, v.Client, c.Partition)
			}
		}
		if !sawEmpty || !sawNonASCII {
			t.Errorf("%s must pin the empty key and non-ASCII keys (empty %v, non-ASCII %v)", file, sawEmpty, sawNonASCII)
		}
	}
}

func TestPartitionRange(t *testing.T) {
	for n := 1; n <= 64; n++ {
		for _, k := range []string{"", "a", "tenant:device", "ümlaut", "🦄"} {
			if p := Partition([]byte(k), n); p < 0 || int(p) >= n {
				t.Fatalf("Partition(%q, %d) = %d out of range", k, n, p)
			}
		}
	}
}

// The largest count Kafka allows still gives an in-range partition, and a
// count beyond it is refused rather than truncated to 32 bits (1<<32 would
// divide by zero, 1<<32+1 would answer 0 for every key).
func TestPartitionCountBounds(t *testing.T) {
	for _, k := range []string{"", "a", "tenant:device"} {
		want := int32((uint32(Murmur2([]byte(k))) & 0x7fffffff) % math.MaxInt32)
		if got := Partition([]byte(k), MaxPartitions); got != want {
			t.Errorf("Partition(%q, MaxPartitions) = %d, want %d", k, got, want)
		}
	}
	if math.MaxInt == math.MaxInt32 {
		t.Skip("int is 32 bits: no count beyond MaxPartitions to pass")
	}
	for _, n := range []int64{0, -1, math.MaxInt32 + 1, 1 << 32, 1<<32 + 1} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Partition(k, %d) did not refuse the count", n)
				}
			}()
			Partition([]byte("k"), int(n))
		}()
	}
}

func FuzzMurmur2Partition(f *testing.F) {
	f.Add([]byte("abc"), 6)
	f.Add([]byte{}, 1)
	f.Fuzz(func(t *testing.T, key []byte, n int) {
		if n <= 0 || n > MaxPartitions {
			return
		}
		if p := Partition(key, n); p < 0 || int(p) >= n {
			t.Fatalf("out of range: %d of %d", p, n)
		}
	})
}
