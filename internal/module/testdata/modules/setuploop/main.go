// Command setuploop loops in its setup without calling anything of its
// host's: a setup that never ends and cannot be stopped.
package main

import "github.com/flecht-dev/flecht/sdk/transform"

func init() {
	transform.OnSetup(func(transform.Setup) error {
		for {
		}
	})
	transform.Handle(func(*transform.Record, *transform.Output) error { return nil })
}

func main() {}
