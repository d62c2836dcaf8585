//go:build e2e && e2ecluster

package e2e

import (
	"fmt"
	"testing"
	"time"
)

// The http-poll extractor (two tokens, three growing feeds behind an
// encrypted API key) while the cluster loses the leader of its raw
// partition, of its changelog partition and of a token's transaction
// coordinator, a paused node, a rolling restart and all three nodes: the
// one extractor process never exits, every item is in the raw topic
// exactly once (read_committed), every config's committed cursor only
// rises, and after each fault it commits pages again within progressBound
// of the cluster being whole.
func TestClusterHTTPPollFaults(t *testing.T) {
	const items = 2400 // per feed, growing for about four minutes
	k := clusterNodes(t)
	keyring, token := secretKeyring(t, "s3cret-api-key")
	api := &feedAPI{key: "s3cret-api-key", start: time.Now(), perSec: 10, max: items, delay: 2 * time.Millisecond}
	srv := startFeedAPI(t, api)

	app := topicName(t, "app")
	cfg, raw := topicName(t, "config"), topicName(t, "raw")
	createTopic(t, cfg, 2, map[string]string{"cleanup.policy": "compact"})
	createTopic(t, raw, 3, nil)
	feeds := []string{"alpha", "beta", "gamma"}
	for _, f := range feeds {
		putConfig(t, cfg, f, feedConfig(srv.URL+"/feeds/"+f, raw, token))
	}
	stage := pollStage(t, app, cfg)
	p := startSource(t, stage, "poller-0", "--keyring", keyring, "--state-dir", t.TempDir())
	waitUntil(t, 2*time.Minute, "pages committed", func() bool {
		p.alive()
		v, _ := p.tryMetric("flechtwerk_messages_out_total")
		return v >= 30
	})

	changelog := app + "-changelog"
	topics := []string{cfg, raw, changelog}
	rawPart, logPart, tok := int32(k.intn(0, 2)), int32(k.intn(0, 1)), int32(k.intn(0, 1))
	faults := []fault{
		killLeader(fmt.Sprintf("raw partition %d", rawPart), partitionLeader(raw, rawPart)),
		killLeader(fmt.Sprintf("changelog partition %d", logPart), partitionLeader(changelog, logPart)),
		killLeader(fmt.Sprintf("token %d's __transaction_state partition", tok), coordinatorOf(fmt.Sprintf("%s-%d", app, tok))),
		pauseNode(fmt.Sprintf("token %d's transaction coordinator", tok), coordinatorOf(fmt.Sprintf("%s-%d", app, tok))),
		rollingRestart(topics),
		allDown(),
	}
	out := func() float64 {
		v, err := p.tryMetric("flechtwerk_messages_out_total")
		if err != nil {
			return -1
		}
		if api.size() == items && v >= float64(len(feeds)*items) {
			return v + float64(time.Now().UnixNano()) // nothing left to poll: progress is moot
		}
		return v
	}
	run := k.injectAll(faults, topics, progressBound, p.alive, out)

	waitUntil(t, 5*time.Minute, "the feeds to finish growing", func() bool { p.alive(); return api.size() == items })
	api.grown()
	var rep itemsReport
	waitUntil(t, 3*time.Minute, "every item", func() bool {
		p.alive()
		_, last := checkCursors(t, app)
		for _, f := range feeds {
			if last[f] != items {
				return false
			}
		}
		rep = checkItems(t, raw, feeds, items)
		return rep.Missing == 0
	})
	p.alive()
	retries := fmt.Sprintf("%s, %d token restarts", retryLogs(p), p.logCount("the token restarts"))
	p.stop()
	n, _ := checkCursors(t, app)
	rep = checkItems(t, raw, feeds, items)
	t.Logf("http-poll under %d faults: %d items in %d records, missing %d, duplicates %d; %d committed cursors, none went back; %d records of aborted pages; the process never exited; %s%s",
		len(run.Faults), len(feeds)*items, rep.Records, rep.Missing, rep.Duplicates, n, abortedRecords(t, raw), retries, run)
	logFigures(t, "http-poll extractor", len(run.Faults), len(feeds)*items, rep.Records, rep.Duplicates, rep.Missing)
	if rep.Missing+rep.Duplicates > 0 || rep.Records != len(feeds)*items {
		t.Errorf("exactly once broken: %+v", rep)
	}
}
