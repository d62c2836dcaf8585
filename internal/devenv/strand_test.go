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
	// lost counts revocations and losses.
	lost int
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
		// Idle connections (the join&sync one between rebalances) close
		// after 2 s: a live member whose join connection closed must
		// never be taken for a dead one.
		kgo.ConnIdleTimeout(2*time.Second),
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
			k.lost++
			k.mu.Unlock()
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			k.mu.Lock()
			for _, p := range m[topic] {
				delete(k.assigned, p)
			}
			k.lost++
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

// The pattern that stranded partitions on `flecht dev`: a group member
// killed three times within a second of starting — while its JoinGroup
// waits, between join and sync, or just after — then started a fourth
// time. kfake alone kept a member killed in its join until the rebalance
// timeout or for good, so the fourth got 3 of 6 partitions or none; with
// the reaper (reaper.go) the dead are expired after their session timeout,
// as Kafka does, and the fourth holds all 6 within it. A live member is
// never expired, though its idle join connection closes.
func TestKilledMembersNeverStrandPartitions(t *testing.T) {
	const bound = 6*time.Second + 6*time.Second // the session timeout, and slack for a loaded machine
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
			t.Parallel()
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
				if time.Since(start) > bound {
					g, _ := adm.DescribeGroups(context.Background(), "g")
					t.Fatalf("the fourth member holds %d of 6 partitions after %s; group %+v", last.held(), bound, g["g"])
				}
				time.Sleep(100 * time.Millisecond)
			}
			t.Logf("the fourth member holds all 6 after %s", time.Since(start).Round(100*time.Millisecond))

			// Three session timeouts later it still holds them, never
			// revoked: the reaper took no live member for a dead one.
			last.mu.Lock()
			lostBefore := last.lost
			last.mu.Unlock()
			time.Sleep(18 * time.Second)
			last.mu.Lock()
			defer last.mu.Unlock()
			if len(last.assigned) != 6 || last.lost != lostBefore {
				t.Errorf("the live member holds %d partitions and lost some %d times since", len(last.assigned), last.lost-lostBefore)
			}
		})
	}
}
