// Package transform is the Go SDK for flecht transform modules: a team's
// own per-record logic, built to WebAssembly and run by `flecht run`
// exactly once, like a built-in transform.
//
// A module registers a Handler in an init function and is built as a
// WASI reactor:
//
//	package main
//
//	import (
//		"github.com/flecht-dev/flecht/sdk/transform"
//		"github.com/flecht-dev/flecht/sdk/wire"
//	)
//
//	var output string
//
//	func init() {
//		transform.OnSetup(func(s transform.Setup) error {
//			output = s.OutputTopics[0]
//			return nil
//		})
//		transform.Handle(func(rec *transform.Record, out *transform.Output) error {
//			if rec.Tombstone() {
//				return nil
//			}
//			seq, _ := rec.State().Int("seq")
//			seq++
//			v, err := wire.With(rec.Value(), "seq", seq)
//			if err != nil {
//				return transform.Reject("%v", err)
//			}
//			if err := out.Send(output, rec.Key(), v); err != nil {
//				return err
//			}
//			return out.SetState(wire.Object{"seq": seq})
//		})
//	}
//
//	func main() {}
//
// and built with
//
//	GOOS=wasip1 GOARCH=wasm go build -trimpath -buildmode=c-shared -o count.wasm .
//
// The same handler runs natively in `go test` through package
// transformtest, and on sample records with `flecht transform test`.
//
// A module is deterministic by construction: it sees no clock but the
// record's event time, random bytes seeded by the record's position, no
// files, no network, no environment. Its standard output and error go to
// the stage's log. docs/modules.md in the flecht repository describes the
// ABI underneath, for modules in other languages.
package transform
