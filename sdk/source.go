// Package sdk holds the Go SDK of flecht transform modules: package
// transform (the handler API), transformtest (running a handler in go
// test), wire (the canonical JSON of Flechtwerk pipelines) and abi (the
// layout of what crosses between flecht and a module).
//
// Source is the SDK's own source, which `flecht transform new` writes
// into a new module project so that it builds without fetching anything.
package sdk

import "embed"

// Source is the SDK's source files (tests and test data excluded when
// written out).
//
//go:embed go.mod source.go abi/*.go internal/bridge/*.go transform/*.go transformtest/*.go wire/*.go
var Source embed.FS
