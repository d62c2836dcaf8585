package mqtt

import (
	"testing"

	"github.com/eclipse/paho.golang/packets"
	"github.com/eclipse/paho.golang/paho"
)

func pub(pid uint16, dup bool, payload string) *paho.Publish {
	return paho.PublishFromPacketPublish(&packets.Publish{PacketID: pid, QoS: 1, Duplicate: dup, Topic: "sensors/a/events", Payload: []byte(payload), Properties: &packets.Properties{}})
}

// A message whose PUBACK was written may have reached the broker, which
// may then give its packet ID to a later message with the same topic and
// payload; if that one's first delivery is lost with the connection, it
// comes again with DUP set on the next. It must be written, not taken for
// the first one.
func TestUnackedForgetsAMessageOnceItsPubackIsWritten(t *testing.T) {
	u := newUnacked()
	first := pub(5, false, `{"n":1}`)
	if u.redelivery(first, 1) {
		t.Fatal("a first delivery taken for a redelivery")
	}
	u.add(first, 1)
	u.written(5, 1) // paho wrote the PUBACK on connection 1
	later := pub(5, true, `{"n":1}`)
	if u.redelivery(later, 2) {
		t.Fatal("a later message with a reused packet ID and the same content was ACKed without a write: lost")
	}
}

// A message committed whose PUBACK was never written is still the broker's
// under its packet ID: on a later connection it comes with DUP set and is
// ACKed without a second write — once.
func TestUnackedRecognisesACommittedButUnackedRedelivery(t *testing.T) {
	u := newUnacked()
	m := pub(7, false, `{"n":2}`)
	u.add(m, 1) // committed; connection 1 dropped before the PUBACK
	if u.redelivery(pub(7, true, `{"n":2}`), 1) {
		t.Error("a DUP on the same connection was trusted")
	}
	if !u.redelivery(pub(7, true, `{"n":2}`), 2) {
		t.Fatal("the committed message was not recognised on the next connection")
	}
	u.add(m, 2)
	if !u.redelivery(pub(7, true, `{"n":2}`), 3) {
		t.Fatal("connection 2 dropped before its PUBACK too: still the same message on connection 3")
	}
	u.add(m, 3)
	u.written(7, 3)
	if u.redelivery(pub(7, true, `{"n":2}`), 4) {
		t.Error("an entry outlived its written PUBACK")
	}
}

func TestUnackedTrustsOnlyDupArrivalsWithTheSameContent(t *testing.T) {
	u := newUnacked()
	u.add(pub(9, false, `{"n":3}`), 1)
	if u.redelivery(pub(9, true, `{"n":4}`), 2) {
		t.Error("a DUP with other content was trusted")
	}
	if u.redelivery(pub(9, false, `{"n":3}`), 2) {
		t.Error("a first delivery (DUP clear) was trusted")
	}
	// That first delivery shows the broker had the PUBACK: the entry is gone.
	if u.redelivery(pub(9, true, `{"n":3}`), 3) {
		t.Error("the entry outlived a first delivery of its packet ID")
	}
	u.add(pub(9, false, `{"n":3}`), 3)
	u.written(9, 2) // a PUBACK of another connection does not count
	u.reset()       // a new session at the broker: nothing comes again
	if u.redelivery(pub(9, true, `{"n":3}`), 4) {
		t.Error("an entry outlived a new session")
	}
}
