package metrics

import "net/http"

// Route is one more path the metrics listener serves: the liveness and
// readiness probes share the port Prometheus scrapes, so an orchestrator
// needs no second one.
type Route struct {
	Path    string
	Handler http.Handler
}
