package extract_test

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Commits that fail the way a node's death fails them, injected at the
// broker: one applied and then answered REQUEST_TIMED_OUT (the page is
// committed, the runner cannot know), one refused UNKNOWN_SERVER_ERROR,
// one answered PRODUCER_FENCED with no other owner about. The runner
// never stops: the token restarts (fenced anew, restored from the
// changelog, where the applied page shows) and every item is written
// exactly once, every cursor only rising.
func TestRunnerRidesOutFailedCommits(t *testing.T) {
	configs := map[string]int{"a": 600, "b": 500}
	f := newEngineFixture(t, 2, configs)
	kf := f.env.KafkaCluster()
	r := f.start("x-0")
	commits := func() func(kmsg.Request) bool {
		return func(req kmsg.Request) bool { return req.(*kmsg.EndTxnRequest).Commit }
	}
	f.wait("some pages", func() bool { n, _ := f.items(); return len(n) >= 100 })
	for _, e := range []*kerr.Error{kerr.RequestTimedOut, kerr.UnknownServerError, kerr.ProducerFenced} {
		h := kf.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.EndTxn}, Err: e, TopLevel: true, Count: 1, When: commits()})
		before, _ := f.items()
		f.wait("the fault to hit a commit", func() bool { return h.Hits() > 0 })
		f.wait("pages after the fault", func() bool { n, _ := f.items(); return len(n) > len(before)+20 || f.finished(configs) })
		select {
		case err := <-r.done:
			t.Fatalf("the runner stopped after %s: %v", e.Message, err)
		default:
		}
	}
	f.wait("every item", func() bool { return f.finished(configs) })
	r.stop(t)
	f.exactlyOnce(configs)
	n := strings.Count(f.logs.String(), "the token restarts")
	t.Logf("%d token restarts, %d fenced waits", n, strings.Count(f.logs.String(), "producer was fenced"))
	if n == 0 {
		t.Errorf("no token restart logged:\n%s", f.logs.String())
	}
}
