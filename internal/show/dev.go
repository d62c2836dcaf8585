package show

import (
	"fmt"
	"strings"

	"github.com/flecht-dev/flecht/internal/buildinfo"
	"github.com/flecht-dev/flecht/internal/devenv"
	"github.com/flecht-dev/flecht/internal/textfmt"
	"github.com/flecht-dev/flecht/internal/ui"
)

// DevRunning shows where the dev brokers listen, and their topics.
func DevRunning(h *ui.Human, info devenv.Info, topics []devenv.Topic) error {
	where := " (embedded, in memory, 127.0.0.1 only)"
	if info.DataDir != "" {
		where = " (embedded, 127.0.0.1 only; Kafka's data kept in " + textfmt.Printable(info.DataDir) + " across restarts, MQTT sessions in memory)"
	}
	h.Printf("%s\n\n", h.Good("flecht dev is running")+h.Faint(where))
	pairs := [][2]string{{"kafka", info.Kafka}, {"mqtt", info.MQTTURL}}
	if len(topics) > 0 {
		names := make([]string, len(topics))
		for i, t := range topics {
			names[i] = fmt.Sprintf("%s (%d)", t.Name, t.Partitions)
		}
		pairs = append(pairs, [2]string{"topics", strings.Join(names, ", ")})
	}
	h.KV(pairs...)
	h.Printf("\nIn another terminal:\n\n  %s\n  flecht cluster\n\n%s\n", info.Export, h.Faint("Ctrl-C stops it."))
	return nil
}

// Version shows the version line.
func Version(h *ui.Human, v buildinfo.Info) error {
	line := "flecht " + v.Version
	if v.Revision != "" {
		rev := v.Revision
		if len(rev) > 12 {
			rev = rev[:12]
		}
		line += " (" + rev
		if v.Modified {
			line += ", modified"
		}
		if v.Time != "" {
			line += ", " + v.Time
		}
		line += ")"
	}
	h.Printf("%s\n%s %s\n", line, v.GoVersion, v.Platform)
	return nil
}
