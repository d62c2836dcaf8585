package devenv_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/flecht-dev/flecht/internal/devenv/devenvtest"
)

// killable is a group member whose process can be SIGKILLed in-process:
// kill closes every connection at once and refuses new ones, so the
// broker sees what a killed process leaves (no LeaveGroup, sockets reset).
type killable struct {
	mu    sync.Mutex
	dead  bool
	conns []net.Conn
	cl    *kgo.Client
	// assigned is the partitions the member holds now.
	assigned map[int32]bool
}

func (k *killable) dial(ctx context.Context, network, host string) (net.Conn, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.dead {
		return nil, errors.New("killed")
	}
	c, err := (&net.Dialer{}).DialContext(ctx, network, host)
	if err == nil {
		k.conns = append(k.conns, c)
	}
	return c, err
}

func (k *killable) kill() {
	k.mu.Lock()
	k.dead = true
	for _, c := range k.conns {
		_ = c.(*net.TCPConn).SetLinger(0)
		_ = c.Close()
	}
	k.mu.Unlock()
	go k.cl.Close() // its goroutines end; nothing reaches the broker
}

func (k *killable) held() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.assigned)
}

func startMember(t *testing.T, addr, group, topic string) *killable {
	t.Helper()
	k := &killable{assigned: map[int32]bool{}}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(addr),
		kgo.Dialer(k.dial),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.SessionTimeout(6*time.Second),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			k.mu.Lock()
			for _, p := range m[topic] {
				k.assigned[p] = true
			}
			k.mu.Unlock()
		}),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			k.mu.Lock()
			for _, p := range m[topic] {
				delete(k.assigned, p)
			}
			k.mu.Unlock()
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			k.mu.Lock()
			for _, p := range m[topic] {
				delete(k.assigned, p)
			}
			k.mu.Unlock()
		}),
	)
	if err != nil {
		t.Fatal(err)
	}
	k.cl = cl
	go func() {
		for {
			fs := cl.PollFetches(context.Background())
			if fs.IsClientClosed() {
				return
			}
		}
	}()
	return k
}

func TestKillDuringJoinStrandsPartitions(t *testing.T) {
	for _, point := range []struct {
		name string
		key  kmsg.Key
		nth  int
	}{
		{"in join", kmsg.JoinGroup, 2},
		{"after join, before sync", kmsg.SyncGroup, 1},
		{"after sync", kmsg.Heartbeat, 1},
	} {
		t.Run(point.name, func(t *testing.T) {
			env := devenvtest.Start(t)
			adm := kadm.NewClient(devenvtest.KafkaClient(t, env))
			createTopic(t, adm, "in", 6, nil)
			kf := env.KafkaCluster()
			for range 3 {
				seen := make(chan struct{})
				var once sync.Once
				n := 0
				kf.ControlKey(int16(point.key), func(kmsg.Request) (kmsg.Response, error, bool) {
					kf.KeepControl()
					if n++; n == point.nth {
						once.Do(func() { close(seen) })
					}
					return nil, nil, false
				})
				m := startMember(t, env.KafkaAddr(), "g", "in")
				select {
				case <-seen:
				case <-time.After(10 * time.Second):
					t.Fatalf("the member never sent %s #%d", point.key.Name(), point.nth)
				}
				m.kill()
			}
			last := startMember(t, env.KafkaAddr(), "g", "in")
			defer last.cl.Close()
			start := time.Now()
			for last.held() < 6 {
				if time.Since(start) > 30*time.Second {
					g, _ := adm.DescribeGroups(context.Background(), "g")
					t.Fatalf("the fourth member holds %d of 6 partitions after 30s; group %+v", last.held(), g["g"])
				}
				time.Sleep(100 * time.Millisecond)
			}
			t.Logf("the fourth member holds all 6 after %s", time.Since(start).Round(100*time.Millisecond))
		})
	}
}
