package kafkax

import "testing"

func TestTransactionPending(t *testing.T) {
	for state, want := range map[string]bool{
		"Ongoing": true, "PrepareCommit": true, "PrepareAbort": true, "PrepareEpochFence": true,
		"Empty": false, "CompleteCommit": false, "CompleteAbort": false, "Dead": false, "": false,
	} {
		if got := TransactionPending(state); got != want {
			t.Errorf("%q: %v, want %v", state, got, want)
		}
	}
}
