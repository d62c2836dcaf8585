package mqtt_test

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/eclipse/paho.golang/paho"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/flecht-dev/flecht/internal/metrics"
)

// What a node's failure in a replicated cluster does to a commit, injected
// at the broker: a commit whose outcome the client cannot know (the
// coordinator died answering it), and a PRODUCER_FENCED that no other
// bridge caused (a coordinator that moved mid-commit). The bridge rides
// both out: it aborts, re-initialises its producer where a fence says so,
// writes the batch again, and never stops; every message arrives once
// (kfake never committed the failed attempts).
func TestBridgeRetriesWhatTheClusterFails(t *testing.T) {
	for _, tc := range []struct {
		name string
		code int16
		log  string
	}{
		{"unconfirmed commit", kerr.UnknownServerError.Code, "the cluster is unavailable or changing, retrying"},
		{"fence without a twin", kerr.ProducerFenced.Code, "initialising the producer again"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newBridgeFixture(t)
			f.config("sensors", map[string]any{"topic": "sensors/+/events", "output_topic": "sensors.raw", "key": "{topic.1}"})
			rb := f.startBridgeWith("bridge-0", f.env.MQTTURL(), "", nil)
			pub := publisher(t, f.env.MQTTAddr())
			f.waitSubscribed(pub, "sensors/probe/events", "sensors.raw")

			// Fail the next two commits (EndTxn with commit set).
			var failed atomic.Int32
			kf := f.env.KafkaCluster()
			kf.ControlKey(int16(kmsg.EndTxn), func(req kmsg.Request) (kmsg.Response, error, bool) {
				kf.KeepControl()
				end := req.(*kmsg.EndTxnRequest)
				if !end.Commit || failed.Load() >= 2 {
					return nil, nil, false
				}
				failed.Add(1)
				resp := end.ResponseKind().(*kmsg.EndTxnResponse)
				resp.ErrorCode = tc.code
				return resp, nil, true
			})
			for i := range 200 {
				publish(t, pub, fmt.Sprintf("sensors/dev-%d/events", i%5), fmt.Sprintf(`{"n":%d}`, i))
			}
			eventually(t, "every message relayed", func() bool {
				seen, _ := f.relayedNumbers("sensors.raw")
				delete(seen, -1) // the probes
				return len(seen) == 200
			}, func() string { return rb.logs.String() })
			seen, records := f.relayedNumbers("sensors.raw")
			delete(seen, -1)
			select {
			case <-rb.done:
				t.Fatalf("the bridge stopped: %v", rb.err)
			default:
			}
			if failed.Load() != 2 {
				t.Fatalf("%d commits failed, want 2", failed.Load())
			}
			for n, c := range seen {
				if c != 1 {
					t.Errorf("message %d written %d times", n, c)
				}
			}
			if len(rb.logs.lines(tc.log)) == 0 {
				t.Errorf("nothing logged %q:\n%s", tc.log, rb.logs.String())
			}
			t.Logf("%s: %d records for %d messages, %v transactions committed", tc.name, records, len(seen), metrics.Value(rb.obs.TxnCommitted))
		})
	}
}

// A fence right after another client took this client id's MQTT session
// over is what it says: a twin bridge. The bridge does not fight it for
// the transactional ID; it ends with the fence.
func TestBridgeEndsOnAFenceByATwin(t *testing.T) {
	f := newBridgeFixture(t)
	f.config("sensors", map[string]any{"topic": "sensors/+/events", "output_topic": "sensors.raw", "key": "{topic.1}"})
	rb := f.startBridgeWith("bridge-0", f.env.MQTTURL(), "", nil)
	pub := publisher(t, f.env.MQTTAddr())
	f.waitSubscribed(pub, "sensors/probe/events", "sensors.raw")

	// The twin connects with the bridge's client id (the broker tells
	// the bridge its session was taken over), then leaves.
	twin := namedPublisher(t, f.env.MQTTAddr(), "bridge-0")
	eventually(t, "the takeover reported", func() bool {
		return len(rb.logs.lines("another client connected with this client id")) > 0
	}, func() string { return rb.logs.String() })
	_ = twin.Disconnect(&paho.Disconnect{})

	kf := f.env.KafkaCluster()
	kf.ControlKey(int16(kmsg.EndTxn), func(req kmsg.Request) (kmsg.Response, error, bool) {
		end := req.(*kmsg.EndTxnRequest)
		if !end.Commit {
			kf.KeepControl()
			return nil, nil, false
		}
		resp := end.ResponseKind().(*kmsg.EndTxnResponse)
		resp.ErrorCode = kerr.ProducerFenced.Code
		return resp, nil, true
	})
	eventually(t, "the bridge to end", func() bool {
		publish(t, pub, "sensors/dev-1/events", `{"n":1}`)
		select {
		case <-rb.done:
			return true
		default:
			return false
		}
	}, func() string { return rb.logs.String() })
	if !errors.Is(rb.err, kerr.ProducerFenced) {
		t.Fatalf("the bridge ended with %v, want the fence", rb.err)
	}
	if len(rb.logs.lines("initialising the producer again")) != 0 {
		t.Error("the bridge re-initialised its producer against a twin")
	}
	rb.err = nil // the fence is this test's expected end, not a failure of the fixture's stop
}
