package state

import (
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// BenchmarkDurability weighs the ways of making a kept store survive a
// crash, per committed transaction of 100 state changes (a count stage's
// commit): the write-ahead log without a sync (what Apply does: a kill
// loses at most the log writer's unwritten block), the log synced on
// every commit, and no log but a memtable flush on every commit.
//
//	go test -run '^$' -bench Durability ./internal/state/
func BenchmarkDurability(b *testing.B) {
	for _, c := range []struct {
		name  string
		wal   bool
		sync  bool
		flush bool
	}{
		{"wal", true, false, false},
		{"wal-sync", true, true, false},
		{"flush", false, false, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			cache := pebble.NewCache(16 << 20)
			defer cache.Unref()
			db, err := pebble.Open(b.TempDir(), &pebble.Options{DisableWAL: !c.wal, Cache: cache, MemTableSize: 8 << 20, Logger: pebbleLogger{}})
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			value := []byte(`{"seq":12345,"sensor":"s-0042","at":"2026-12-02T07:00:00Z"}`)
			opts := pebble.NoSync
			if c.sync {
				opts = pebble.Sync
			}
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				batch := db.NewBatch()
				for k := range 100 {
					_ = batch.Set(fmt.Appendf(nil, "k%07d", (i*100+k)%1_000_000), value, nil)
				}
				_ = batch.Set(checkpointKey, encodePosition(Position{Offset: int64(i), Since: time.Now()}), nil)
				if err := batch.Commit(opts); err != nil {
					b.Fatal(err)
				}
				_ = batch.Close()
				if c.flush {
					if err := db.Flush(); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
