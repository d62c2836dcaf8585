package kafkax

import "math"

// MaxPartitions is the most partitions a Kafka topic can have: the
// protocol counts them in an int32.
const MaxPartitions = math.MaxInt32

// Murmur2 is Kafka's murmur2 hash (org.apache.kafka.common.utils.Utils.murmur2),
// the hash behind the Java client's default partitioner for keyed records.
func Murmur2(data []byte) int32 {
	const (
		seed uint32 = 0x9747b28c
		m    uint32 = 0x5bd1e995
		r           = 24
	)
	length := len(data)
	h := seed ^ uint32(length)
	for i := 0; i+4 <= length; i += 4 {
		k := uint32(data[i]) | uint32(data[i+1])<<8 | uint32(data[i+2])<<16 | uint32(data[i+3])<<24
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
	}
	tail := data[length&^3:]
	switch len(tail) {
	case 3:
		h ^= uint32(tail[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(tail[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(tail[0])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return int32(h)
}

// Partition is the partition Kafka's default partitioner gives a non-null
// key among n partitions: (murmur2(key) & 0x7fffffff) % n. An empty key is
// still a key (Java hashes the empty array); only a null key is spread.
//
// n must be in [1, MaxPartitions]; callers validate outside input first.
// Outside that range it panics: a count no topic can have is a bug, and
// reducing it to 32 bits would divide by zero or answer wrongly.
func Partition(key []byte, n int) int32 {
	if n <= 0 || int64(n) > MaxPartitions {
		panic("kafkax.Partition: partition count must be in [1, MaxPartitions]")
	}
	return int32((uint32(Murmur2(key)) & 0x7fffffff) % uint32(n))
}
