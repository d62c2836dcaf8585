package mqtt

import (
	"crypto/sha256"
	"sync"

	"github.com/eclipse/paho.golang/paho"
)

// unacked remembers, by packet ID, each QoS 1 message whose Kafka
// transaction committed while its PUBACK is not yet written, so that its
// redelivery after a reconnect is ACKed without a second write.
//
// Why trusting an entry is safe: a broker frees a packet ID only when the
// PUBACK for it arrives, and on a resumed session it must resend every
// message it has no PUBACK for, with DUP set and the same packet ID (MQTT 5
// §4.4; verified on Mosquitto 2.0.11 and mochi). An entry lives only while
// paho has not written its PUBACK, so the broker cannot have had that
// PUBACK, and the ID still names the committed message: a DUP arrival
// with that ID on a later connection can only be that message. Once the
// PUBACK is written the entry goes, because from then on the broker may
// have it, free the ID and give it to a later message with the same topic
// and payload — whose first delivery may be lost with the connection, so
// that it too arrives with DUP set. Trusting the entry then would ACK that
// message unwritten: a loss. Dropping it costs at most a duplicate (a
// PUBACK written but lost with the connection), never a message.
type unacked struct {
	mu      sync.Mutex
	entries map[uint16]unackedEntry
}

type unackedEntry struct {
	hash [32]byte // topic and payload, a check on top of the packet ID
	gen  uint64   // the connection whose PUBACK for it is pending
}

func newUnacked() *unacked { return &unacked{entries: map[uint16]unackedEntry{}} }

// add records a committed message before its ACK is handed to paho on
// connection gen (paho may write the PUBACK at once).
func (u *unacked) add(p *paho.Publish, gen uint64) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.entries[p.PacketID] = unackedEntry{hash: contentHash(p), gen: gen}
}

// written is paho having written the PUBACK for pid on connection gen.
func (u *unacked) written(pid uint16, gen uint64) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if e, ok := u.entries[pid]; ok && e.gen == gen {
		delete(u.entries, pid)
	}
}

// redelivery reports whether p, arriving on connection gen, is a message
// already committed: DUP set, a later connection than the one its PUBACK
// was pending on, and the same content. A first delivery (DUP clear)
// shows the broker had the PUBACK for its ID's earlier holder.
func (u *unacked) redelivery(p *paho.Publish, gen uint64) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	e, ok := u.entries[p.PacketID]
	if !ok {
		return false
	}
	if !p.Duplicate() {
		delete(u.entries, p.PacketID)
		return false
	}
	return e.gen < gen && e.hash == contentHash(p)
}

// reset forgets everything: a new session at the broker resends nothing.
func (u *unacked) reset() {
	u.mu.Lock()
	defer u.mu.Unlock()
	clear(u.entries)
}

func contentHash(p *paho.Publish) [32]byte {
	h := sha256.New()
	h.Write([]byte(p.Topic))
	h.Write([]byte{0})
	h.Write(p.Payload)
	var out [32]byte
	copy(out[:], h.Sum(nil))
	return out
}
