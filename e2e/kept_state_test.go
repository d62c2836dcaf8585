//go:build e2e

package e2e

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/state"
)

// checkKeptStores proves, for each task n of app, that the store flecht
// kept in stateDir/n, tailed as the next start would tail it, holds every
// key exactly as a restore of changelog partition n from scratch does. It
// works on a copy, so the next start finds the store as flecht left it,
// and fences app-n first, as a start does, so that a transaction the
// stop left open is settled before anything is read. It returns the
// changelog records the tails read in all.
func checkKeptStores(t *testing.T, app, stateDir string, partitions int32) int {
	t.Helper()
	ctx := testCtx(t, 2*time.Minute)
	reader := client(t, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	adm := kadm.NewClient(reader)
	changelog := app + "-changelog"
	tailed := 0
	for n := range partitions {
		fence := client(t, kgo.TransactionalID(fmt.Sprintf("%s-%d", app, n)))
		if _, _, err := fence.ProducerID(ctx); err != nil {
			t.Fatalf("fencing %s-%d: %v", app, n, err)
		}
		fence.Close()
		kept := filepath.Join(t.TempDir(), "kept")
		if err := os.CopyFS(kept, os.DirFS(filepath.Join(stateDir, strconv.Itoa(int(n))))); err != nil {
			t.Fatalf("copying the kept store of task %d: %v", n, err)
		}
		cl, err := state.DescribeChangelog(ctx, adm, changelog, n)
		if err != nil {
			t.Fatal(err)
		}
		restore := func(dir string) (map[string]string, state.Plan, int) {
			s, plan, err := state.Prepare(dir, app, cl, time.Now(), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			res, err := state.Restore(ctx, reader, cl, s, plan, nil)
			if err != nil {
				t.Fatal(err)
			}
			return storeDump(t, s), plan, res.Records
		}
		got, plan, read := restore(kept)
		if !plan.Tail {
			t.Errorf("task %d: the kept store was not trusted: %s", n, plan.Why)
		}
		want, _, _ := restore(filepath.Join(t.TempDir(), "scratch"))
		if !maps.Equal(got, want) {
			diff := 0
			for k, v := range want {
				if got[k] != v {
					diff++
				}
			}
			t.Errorf("task %d: the kept store tailed holds %d keys, a restore from scratch %d; %d differ", n, len(got), len(want), diff+max(0, len(got)-len(want)))
		}
		tailed += read
	}
	return tailed
}

// storeDump is every key and value a store holds.
func storeDump(t *testing.T, s *state.Store) map[string]string {
	t.Helper()
	out := map[string]string{}
	if err := s.Each(func(k string, v []byte) error { out[k] = string(v); return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}
