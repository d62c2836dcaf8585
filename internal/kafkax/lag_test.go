package kafkax

import "testing"

func TestReadPositionAndOffsetLag(t *testing.T) {
	for _, c := range []struct {
		start, committed int64
		hasCommit        bool
		end, want        int64
	}{
		{start: 0, end: 10, want: 10},                                // no commit: from the log start
		{start: 4, committed: 7, hasCommit: true, end: 10, want: 3},  // from the commit
		{start: 8, committed: 5, hasCommit: true, end: 10, want: 2},  // retention passed the commit
		{start: 0, committed: 12, hasCommit: true, end: 10, want: 0}, // never below 0
		{start: 3, committed: 0, hasCommit: false, end: 3, want: 0},  // an empty log
	} {
		if got := OffsetLag(c.end, ReadPosition(c.start, c.committed, c.hasCommit)); got != c.want {
			t.Errorf("%+v: lag %d", c, got)
		}
	}
}
