package doctor

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/flecht-dev/flecht/internal/stagefile"
	"github.com/flecht-dev/flecht/internal/textfmt"
)

const mStandbyLag = "flechtwerk_standby_lag_records"

// CaughtUpStandby is how far behind (changelog offsets, at its latest
// poll) a standby may be and still count as caught up: Kafka Streams'
// acceptable.recovery.lag default.
const CaughtUpStandby = 10_000

// standbys checks that every task of a transformer asking for standby
// replicas has that many caught-up standbys among the instances scraped:
// a task without one restores from its changelog when its instance dies.
// It needs every instance: one not scraped may keep the missing standby.
func (d *diagnosis) standbys(live []Scrape) {
	want := d.st.StandbyReplicas
	switch {
	case d.st.Kind != stagefile.KindTransformer:
		d.skipped(CheckStandbys, kindName(d.st.Kind)+" keeps no standbys: standby_replicas belongs to a transformer")
		return
	case want == 0 || d.in.Stateless:
		d.skipped(CheckStandbys, "the stage asks for no standby replicas (standby_replicas: 0, or it keeps no state)")
		return
	case len(live) < len(d.obs.Scrapes):
		d.skipped(CheckStandbys, fmt.Sprintf("%d of %d instance(s) could not be scraped: the standbys they keep are unknown", len(d.obs.Scrapes)-len(live), len(d.obs.Scrapes)))
		return
	}
	tasks := 0
	if s := d.obs.Second; s != nil {
		for _, t := range s.Inputs {
			tasks = max(tasks, len(s.Partitions[t]))
		}
	}
	if tasks == 0 {
		d.skipped(CheckStandbys, "the input's partitions are unknown")
		return
	}
	// An instance never keeps the standby of a task it runs.
	possible := min(want, len(live)-1)
	caughtUp := make([]int, tasks)
	for _, s := range live {
		for _, se := range s.Second.Series(mStandbyLag, nil) {
			p, err := strconv.Atoi(se.Labels["partition"])
			if err == nil && p >= 0 && p < tasks && se.Value <= CaughtUpStandby {
				caughtUp[p]++
			}
		}
	}
	before := d.found
	var short []string
	for p, n := range caughtUp {
		if n < possible {
			short = append(short, fmt.Sprintf("task %d has %d", p, n))
		}
	}
	if len(short) > 0 {
		d.finding(CheckStandbys, "", "flecht status "+d.st.ApplicationID+" "+d.stageFlags()+" --metrics-url "+d.metricsURLs()+" (each instance's standbys and how far behind)",
			"%s of %d lack caught-up standbys (at most %s changelog offsets behind at their latest poll; standby_replicas: %d%s): %s. When their instance dies they restore from the changelog. A standby restoring from scratch catches up by itself; one that stays behind reads slower than the task writes",
			textfmt.Plural(int64(len(short)), "task"), tasks, textfmt.GroupDigits(CaughtUpStandby), want, limitedBy(want, possible, len(live)), strings.Join(short, ", "))
	}
	d.done(CheckStandbys, before, fmt.Sprintf("%d task(s), %d caught-up standby replica(s) each asked for, over %d instance(s)", tasks, possible, len(live)))
}

// limitedBy says why fewer standbys than asked are expected.
func limitedBy(want, possible, instances int) string {
	if possible < want {
		return fmt.Sprintf(", of which %d instance(s) can keep %d per task", instances, possible)
	}
	return ""
}

// metricsURLs are the scraped endpoints, for a suggested command.
func (d *diagnosis) metricsURLs() string {
	urls := make([]string, len(d.obs.Scrapes))
	for i, s := range d.obs.Scrapes {
		urls[i] = s.URL
	}
	return strings.Join(urls, ",")
}
