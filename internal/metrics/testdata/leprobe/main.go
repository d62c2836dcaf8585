// Command leprobe serves one flecht observer twice for measure_le.sh: on
// the first address as the classic text format only (what flecht served
// before), on the second through Observer.Handler (OpenMetrics when asked).
// It records one state record of 600000 bytes, as gen_scrape.py does.
package main

import (
	"log"
	"net/http"
	"os"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/flecht-dev/flecht/internal/metrics"
)

func main() {
	if len(os.Args) != 3 {
		log.Fatal("usage: leprobe TEXT_ADDR OPENMETRICS_ADDR")
	}
	o := metrics.New(map[string]string{"stage": "s"})
	o.StateWritten(600000)
	o.MessageIn("in", 600000)
	text := http.NewServeMux()
	text.Handle("/metrics", promhttp.HandlerFor(o.Registry(), promhttp.HandlerOpts{}))
	go func() { log.Fatal(http.ListenAndServe(os.Args[1], text)) }()
	om := http.NewServeMux()
	om.Handle("/metrics", o.Handler())
	log.Fatal(http.ListenAndServe(os.Args[2], om))
}
