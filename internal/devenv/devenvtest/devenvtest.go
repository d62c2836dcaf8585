// Package devenvtest starts the embedded Kafka and MQTT brokers for
// in-process tests of other packages. It lives apart from devenv so the
// flecht binary does not link the testing package.
package devenvtest

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/flecht-dev/flecht/internal/devenv"
)

// Start starts both brokers on free ports for an in-process test and
// closes them in t.Cleanup. Use devenv.Start directly for other Options.
func Start(t testing.TB) *devenv.Env {
	t.Helper()
	env, err := devenv.Start(t.Context(), devenv.Options{})
	if err != nil {
		t.Fatalf("devenv: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Close(); err != nil {
			t.Errorf("devenv: close: %v", err)
		}
	})
	return env
}

// KafkaClient returns a kgo client seeded with the env's broker and closed
// in t.Cleanup; opts are appended after the seed. Cleanups run last in,
// first out, so the client closes before a Start-ed Env does; a kgo client
// closed after its broker is gone spends about a second in retry backoff.
func KafkaClient(t testing.TB, env *devenv.Env, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(env.KafkaAddr())}, opts...)...)
	if err != nil {
		t.Fatalf("devenv: kafka client: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// Joined polls the group member cl until the group has given it a
// generation (it has joined and synced), failing t after 30 s.
func Joined(t testing.TB, cl *kgo.Client) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, gen := cl.GroupMetadata(); gen > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("devenv: the group member never joined")
		}
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		cl.PollRecords(ctx, 1)
		cancel()
	}
}

// Outage makes the embedded Kafka refuse every request from now on, as a
// broker that is gone does: each connection is closed instead of
// answered (a new one is accepted, and closed at its first request). The
// returned end lets it answer again; t.Cleanup ends it too.
func Outage(t testing.TB, env *devenv.Env) (end func()) {
	t.Helper()
	var down atomic.Bool
	down.Store(true)
	c := env.KafkaCluster()
	c.Control(func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if !down.Load() {
			return nil, nil, false
		}
		return nil, errOutage, true
	})
	end = func() { down.Store(false) }
	t.Cleanup(end)
	return end
}

var errOutage = errors.New("devenvtest: Kafka is down (Outage)")
