package show

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/textfmt"
	"github.com/flecht-dev/flecht/internal/topicio"
	"github.com/flecht-dev/flecht/internal/ui"
)

// Cluster shows the cluster's brokers.
func Cluster(h *ui.Human, info *kafkax.ClusterInfo) error {
	h.KV([2]string{"cluster id", info.ClusterID}, [2]string{"controller", strconv.Itoa(int(info.Controller))}, [2]string{"topics", strconv.Itoa(info.Topics)})
	h.Printf("\n")
	rows := make([][]string, len(info.Brokers))
	for i, b := range info.Brokers {
		rows[i] = []string{strconv.Itoa(int(b.NodeID)), fmt.Sprintf("%s:%d", b.Host, b.Port), Dash(b.Rack)}
	}
	h.Table([]string{"node", "address", "rack"}, rows)
	return nil
}

// GroupLeave shows the members a leave removed, or would remove.
func GroupLeave(h *ui.Human, rep *kafkax.LeaveReport, forced bool) error {
	for _, m := range rep.Members {
		held := "no partitions"
		if len(m.Assigned) > 0 {
			var parts []string
			for _, a := range m.Assigned {
				parts = append(parts, a.Topic+" "+Partitions(a.Partitions))
			}
			held = strings.Join(parts, "; ")
		}
		verb := h.Warn("would remove")
		if rep.Executed {
			verb = h.Good("removed")
		}
		h.Printf("%s %s (client id %s, host %s), holding %s\n", verb, textfmt.Escape(m.InstanceID), textfmt.Escape(m.ClientID), textfmt.Escape(m.Host), held)
	}
	for _, id := range slices.Sorted(maps.Keys(rep.Rejoined)) {
		m := rep.Rejoined[id]
		line := fmt.Sprintf("%s is running: it rejoined the group as member %s (host %s) after its removal; a running member rejoins at its next heartbeat and takes its partitions back, so the removal changed nothing",
			textfmt.Escape(id), textfmt.Escape(m.MemberID), textfmt.Escape(m.Host))
		if forced {
			h.Printf("%s\n", h.Warn(line+" (--force)"))
		} else {
			h.Printf("%s\n", h.Bad(line+": stop the instance first (for a scale-down: with --leave-group), or give --force"))
		}
	}
	switch {
	case rep.Executed && len(rep.Rejoined) < len(rep.Removed) && rep.WatchedS > 0:
		who := "no removed member"
		if len(rep.Rejoined) > 0 {
			who = "no other removed member"
		}
		h.Printf("group %s rebalances now (state %s; %s rejoined within %s: stopped); 'flecht status %s' shows who holds what\n",
			rep.ApplicationID, rep.GroupAfter, who, textfmt.FormatDuration(time.Duration(rep.WatchedS*float64(time.Second))), rep.ApplicationID)
	case rep.Executed && len(rep.Rejoined) < len(rep.Removed):
		h.Printf("group %s rebalances now (state %s); 'flecht status %s' shows who holds what\n", rep.ApplicationID, rep.GroupAfter, rep.ApplicationID)
	case rep.Executed:
	default:
		h.Printf("dry run: nothing changed; run again with --execute to do it\n")
	}
	return nil
}

// TopicsCreated shows the topics created, and those already there.
func TopicsCreated(h *ui.Human, res *topicio.CreateResult) error {
	rows := make([][]string, len(res.Topics))
	for i, t := range res.Topics {
		state := "exists"
		if t.Created {
			state = h.Good("created")
		}
		rows[i] = []string{t.Topic, t.Role, fmt.Sprint(t.Partitions), state}
	}
	h.Table([]string{"topic", "role", "partitions", ""}, rows)
	return nil
}

// KeyPartitions shows the partition of each key.
func KeyPartitions(h *ui.Human, rows []kafkax.PartitionRow, n int) error {
	table := make([][]string, len(rows))
	for i, r := range rows {
		table[i] = []string{strconv.Quote(r.Key), strconv.Itoa(int(r.Partition))}
	}
	h.Table([]string{"key", fmt.Sprintf("partition (of %d)", n)}, table)
	return nil
}
