package kafkax

import (
	"encoding/base64"
	"unicode/utf8"
)

// PartitionRow is one key's placement. JSON cannot carry bytes that are not
// UTF-8 (they would turn into U+FFFD, while the partition was computed on
// the raw bytes), so such a key also comes as KeyBase64.
type PartitionRow struct {
	Key        string `json:"key"`
	KeyBase64  string `json:"key_base64,omitempty"`
	Partitions int    `json:"partitions"`
	Partition  int32  `json:"partition"`
}

// KeyPartition is the row of one key among n partitions.
func KeyPartition(key string, n int) PartitionRow {
	r := PartitionRow{Key: key, Partitions: n, Partition: Partition([]byte(key), n)}
	if !utf8.ValidString(key) {
		r.KeyBase64 = base64.StdEncoding.EncodeToString([]byte(key))
	}
	return r
}
