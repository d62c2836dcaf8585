package mqtt

// Test hooks for the in-process tests in package mqtt_test.

// OnCommit makes f run on the bridge loop after each Kafka commit and
// before the batch's ACKs are handed to paho. Set it before Run.
func OnCommit(b *Bridge, f func()) { b.afterCommit = f }

// OnAcked makes f run on the bridge loop right after a batch's ACKs were
// handed to paho (which writes them on its next SendAcksInterval tick).
func OnAcked(b *Bridge, f func()) { b.afterAck = f }

// DropConnection closes the network connection of the session the bridge
// loop works with and waits until paho has noticed. Call it from OnCommit.
// It reports false when that connection was already gone.
func DropConnection(b *Bridge) bool {
	s := b.lastSess
	if s == nil {
		return false
	}
	select {
	case <-s.client.Done():
		return false
	default:
	}
	_ = s.conn.Close()
	<-s.client.Done()
	return true
}

// Redelivered is how many DUP arrivals were recognised as committed before
// a reconnect and ACKed without a second write.
func Redelivered(b *Bridge) int64 { return b.redelivered.Load() }

// SetMaxBatch sets how many messages one transaction carries. Call it
// before Run.
func SetMaxBatch(b *Bridge, n int) { b.maxBatch = n }

// OnConnected makes f run on the connection goroutine after each
// successful CONNECT, before the bridge loop may use that connection.
func OnConnected(b *Bridge, f func()) { b.beforeCurrent = f }

// InboxLen is how many received messages wait in the bridge.
func InboxLen(b *Bridge) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.inbox)
}

// DropCurrent closes the network connection of the current session, as a
// broker restart would, and waits until paho has noticed.
func DropCurrent(b *Bridge) {
	b.mu.Lock()
	s := b.sess
	b.mu.Unlock()
	if s == nil {
		return
	}
	_ = s.conn.Close()
	<-s.client.Done()
}
