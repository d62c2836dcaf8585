package kafkax

// TransactionPending reports whether a transaction state, as
// ListTransactions and DescribeTransactions name it, lies between the
// transaction's begin and its markers: it is open.
func TransactionPending(state string) bool {
	switch state {
	case "Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence":
		return true
	}
	return false
}
