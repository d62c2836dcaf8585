//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/kafkax"
)

// An extractor replica SIGKILLed and started again with its --client-id
// takes its own tokens back at once: its group member is static
// (group.instance.id = --client-id), so Kafka hands the restarted process
// the killed one's assignment without waiting for that member's session
// to expire and without a rebalance of the other replica, which keeps
// polling its tokens throughout. (A dynamic member's restart waits for the
// killed member's session timeout, 6 s here, and then rebalances both.)
func TestHTTPPollRestartTakesItsOwnPlaceAtOnce(t *testing.T) {
	const tokens = 4
	keyring, token := secretKeyring(t, "s3cret-api-key")
	api := &feedAPI{key: "s3cret-api-key", start: time.Now(), perSec: 50, max: 100_000, delay: 2 * time.Millisecond}
	srv := startFeedAPI(t, api)
	app := topicName(t, "app")
	cfg, raw := topicName(t, "config"), topicName(t, "raw")
	createTopic(t, cfg, tokens, map[string]string{"cleanup.policy": "compact"})
	createTopic(t, raw, 3, nil)
	for i := range 8 {
		f := fmt.Sprintf("feed%d", i)
		putConfig(t, cfg, f, feedConfig(srv.URL+"/feeds/"+f, raw, token))
	}
	stage := pollStage(t, app, cfg)
	a := startSource(t, stage, "replica-a", "--keyring", keyring, "--state-dir", t.TempDir())
	b := startSource(t, stage, "replica-b", "--keyring", keyring, "--state-dir", t.TempDir())
	waitUntil(t, 2*time.Minute, "the tokens split over both replicas", func() bool {
		a.alive()
		b.alive()
		ta, tb := a.metric("flechtwerk_tokens_assigned"), b.metric("flechtwerk_tokens_assigned")
		return ta+tb == tokens && ta > 0 && tb > 0
	})
	g, err := kafkax.DescribeGroup(testCtx(t, 30*time.Second), admin(t), app)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range g.Members {
		if m.InstanceID != m.ClientID {
			t.Errorf("member %s: instance id %q, want its client id", m.MemberID, m.InstanceID)
		}
	}
	held := b.metric("flechtwerk_tokens_assigned")
	startsA := strings.Count(a.logs(), `msg="token started"`)

	b.kill()
	restarted := time.Now()
	b = startSource(t, stage, "replica-b", "--keyring", keyring, "--state-dir", t.TempDir())
	waitUntil(t, time.Minute, "the restarted replica holding its tokens", func() bool {
		b.alive()
		v, err := b.tryMetric("flechtwerk_tokens_assigned")
		return err == nil && v == held
	})
	back := time.Since(restarted)
	outB := b.metric("flechtwerk_messages_out_total")
	waitUntil(t, time.Minute, "the restarted replica polling", func() bool {
		return b.metric("flechtwerk_messages_out_total") > outB
	})
	t.Logf("replica-b SIGKILLed and restarted: its %.0f tokens back %s after the restart began (process start included); replica-a started %d tokens before, %d after",
		held, back.Round(10*time.Millisecond), startsA, strings.Count(a.logs(), `msg="token started"`))
	if back >= 6*time.Second {
		t.Errorf("the restarted replica got its tokens back after %s, not before the killed member's session (6s) could expire", back)
	}
	if got := strings.Count(a.logs(), `msg="token started"`); got != startsA || a.metric("flechtwerk_tokens_assigned") != tokens-held {
		t.Errorf("replica-a was rebalanced: %d token starts (were %d), %.0f tokens", got, startsA, a.metric("flechtwerk_tokens_assigned"))
	}
	a.stop()
	b.stop()
}

// A mixed group: a static flecht replica beside a dynamic member (a plain
// franz-go group member with the extractor's protocol and balancer, as the
// Python library's replicas are dynamic). The static replica's restart
// takes its own tokens back at once and leaves the dynamic member's alone;
// when the dynamic member leaves, the static replica takes every token.
func TestHTTPPollStaticReplicaInAMixedGroup(t *testing.T) {
	const tokens = 4
	keyring, token := secretKeyring(t, "s3cret-api-key")
	api := &feedAPI{key: "s3cret-api-key", start: time.Now(), perSec: 50, max: 100_000, delay: 2 * time.Millisecond}
	srv := startFeedAPI(t, api)
	app := topicName(t, "app")
	cfg, raw := topicName(t, "config"), topicName(t, "raw")
	createTopic(t, cfg, tokens, map[string]string{"cleanup.policy": "compact"})
	createTopic(t, raw, 3, nil)
	for i := range 8 {
		f := fmt.Sprintf("feed%d", i)
		putConfig(t, cfg, f, feedConfig(srv.URL+"/feeds/"+f, raw, token))
	}
	stage := pollStage(t, app, cfg)
	a := startSource(t, stage, "replica-a", "--keyring", keyring, "--state-dir", t.TempDir())

	var mu sync.Mutex
	dynHeld, dynMoves := map[int32]bool{}, 0
	dyn, err := cluster().Client(
		kgo.ClientID("dynamic-member"),
		kgo.ConsumerGroup(app),
		kgo.ConsumeTopics(cfg),
		kgo.Balancers(kgo.RangeBalancer()),
		kgo.SessionTimeout(6*time.Second),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			mu.Lock()
			defer mu.Unlock()
			for _, p := range m[cfg] {
				dynHeld[p] = true
			}
			dynMoves++
		}),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			mu.Lock()
			defer mu.Unlock()
			for _, p := range m[cfg] {
				delete(dynHeld, p)
			}
			dynMoves++
		}),
	)
	if err != nil {
		t.Fatal(err)
	}
	polling := make(chan struct{})
	go func() {
		defer close(polling)
		for !dyn.PollFetches(context.Background()).IsClientClosed() {
		}
	}()
	held := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(dynHeld)
	}
	waitUntil(t, 2*time.Minute, "the tokens split between the static replica and the dynamic member", func() bool {
		a.alive()
		v, err := a.tryMetric("flechtwerk_tokens_assigned")
		return err == nil && v > 0 && int(v)+held() == tokens
	})
	mine := a.metric("flechtwerk_tokens_assigned")
	mu.Lock()
	movesBefore := dynMoves
	mu.Unlock()

	a.kill()
	restarted := time.Now()
	a = startSource(t, stage, "replica-a", "--keyring", keyring, "--state-dir", t.TempDir())
	waitUntil(t, time.Minute, "the restarted static replica holding its tokens", func() bool {
		a.alive()
		v, err := a.tryMetric("flechtwerk_tokens_assigned")
		return err == nil && v == mine
	})
	back := time.Since(restarted)
	mu.Lock()
	moves := dynMoves - movesBefore
	mu.Unlock()
	t.Logf("mixed group: the static replica SIGKILLed and restarted held its %.0f tokens %s after the restart began; the dynamic member's assignment changed %d times",
		mine, back.Round(10*time.Millisecond), moves)
	if back >= 6*time.Second || moves != 0 {
		t.Errorf("the static replica's restart took %s and moved the dynamic member's tokens %d times", back, moves)
	}

	left := time.Now()
	dyn.Close() // a dynamic member leaves the group as it closes
	<-polling
	waitUntil(t, time.Minute, "the static replica holding every token", func() bool {
		a.alive()
		return a.metric("flechtwerk_tokens_assigned") == tokens
	})
	t.Logf("mixed group: the dynamic member left; the static replica held all %d tokens %s later", tokens, time.Since(left).Round(10*time.Millisecond))
	a.stop()
}
