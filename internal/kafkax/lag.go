package kafkax

// ReadPosition is where a group reads a partition from next: its committed
// offset, or the log start without a commit or when retention passed the
// commit.
func ReadPosition(start, committed int64, hasCommit bool) int64 {
	if hasCommit {
		return max(committed, start)
	}
	return start
}

// OffsetLag is the offsets a group has left to read of a partition: its
// end (the last stable offset) minus the read position, never below 0.
// Transaction markers take offsets too, so a caught-up transactional
// partition may show 1; status counts records where it can.
func OffsetLag(end, position int64) int64 { return max(end-position, 0) }
