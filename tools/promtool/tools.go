//go:build tools

// Package promtool pins the version of Prometheus' promtool that `make
// rules` builds and runs the alert rules' tests with: a module of its own,
// so that flecht's module does not pull in Prometheus' dependencies, and
// so that the tests need Go and nothing from the system.
package promtool

import _ "github.com/prometheus/prometheus/cmd/promtool"
