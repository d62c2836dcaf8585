//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"
)

// mqttConnect opens an MQTT 5 connection with paho.golang.
func mqttConnect(t *testing.T, ctx context.Context, addr, clientID string, cleanStart bool, onMsg func(*paho.Publish)) *paho.Client {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	cfg := paho.ClientConfig{ClientID: clientID, Conn: conn}
	if onMsg != nil {
		cfg.OnPublishReceived = []func(paho.PublishReceived) (bool, error){
			func(pr paho.PublishReceived) (bool, error) { onMsg(pr.Packet); return true, nil },
		}
	}
	c := paho.NewClient(cfg)
	expiry := uint32(300)
	ca, err := c.Connect(ctx, &paho.Connect{
		ClientID: clientID, KeepAlive: 30, CleanStart: cleanStart,
		Properties: &paho.ConnectProperties{SessionExpiryInterval: &expiry},
	})
	if err != nil {
		t.Fatalf("connect %s: %v", clientID, err)
	}
	if ca.ReasonCode != 0 {
		t.Fatalf("connect %s: reason %d", clientID, ca.ReasonCode)
	}
	t.Cleanup(func() { _ = c.Disconnect(&paho.Disconnect{}) })
	return c
}

// QoS 1 publish/subscribe through a real Mosquitto, plain and shared
// subscriptions, and a persistent session that queues while offline.
func TestMosquittoPubSub(t *testing.T) {
	ctx := testCtx(t, time.Minute)
	m := startMosquitto(t)

	var mu sync.Mutex
	got := map[string]int{}
	done := make(chan struct{})
	var closeDone sync.Once // QoS 1 may deliver a message twice after the n-th
	const n = 500
	sub := mqttConnect(t, ctx, m.Addr, "e2e-sub", true, func(p *paho.Publish) {
		mu.Lock()
		defer mu.Unlock()
		got[string(p.Payload)]++
		if len(got) == n {
			closeDone.Do(func() { close(done) })
		}
	})
	if _, err := sub.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: "$share/g/e2e/+/events", QoS: 1}}}); err != nil {
		t.Fatal(err)
	}
	pub := mqttConnect(t, ctx, m.Addr, "e2e-pub", true, nil)
	for i := range n {
		if _, err := pub.Publish(ctx, &paho.Publish{Topic: fmt.Sprintf("e2e/%d/events", i%5), QoS: 1, Payload: fmt.Appendf(nil, "m%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-done:
	case <-ctx.Done():
		mu.Lock()
		t.Fatalf("received %d of %d distinct messages", len(got), n)
	}

	// Persistent session: subscribe, go offline, publish, come back.
	s1 := mqttConnect(t, ctx, m.Addr, "e2e-persistent", true, nil)
	if _, err := s1.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: "e2e/offline", QoS: 1}}}); err != nil {
		t.Fatal(err)
	}
	_ = s1.Disconnect(&paho.Disconnect{})
	for i := range 20 {
		if _, err := pub.Publish(ctx, &paho.Publish{Topic: "e2e/offline", QoS: 1, Payload: fmt.Appendf(nil, "q%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	queued := make(chan string, 100)
	mqttConnect(t, ctx, m.Addr, "e2e-persistent", false, func(p *paho.Publish) { queued <- string(p.Payload) })
	seen := map[string]bool{}
	for len(seen) < 20 {
		select {
		case p := <-queued:
			seen[p] = true
		case <-ctx.Done():
			t.Fatalf("persistent session delivered %d of 20 queued messages", len(seen))
		}
	}
}
