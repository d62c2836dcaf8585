// Command scribbler writes, on a record that asks, one byte into a page
// of memory no record and no setup has written before, and reports every
// byte it finds written there: under record isolation a record finds its
// own byte only, however many records before it in its batch wrote
// others (docs/modules.md). A record that asks for it fails when it
// finds another's.
package main

import (
	"errors"

	"github.com/flecht-dev/flecht/sdk/transform"
	"github.com/flecht-dev/flecht/sdk/wire"
)

// pages are 256 pages of 4 KiB that setup leaves untouched.
var pages [256 << 12]byte

func init() {
	transform.Handle(func(rec *transform.Record, out *transform.Output) error {
		obj, err := rec.Object()
		if err != nil {
			return err
		}
		if p, ok := obj.Int("write"); ok && p > 0 && p < 256 {
			pages[p<<12] = byte(p)
		}
		seen := []any{}
		for p := range 256 {
			if b := pages[p<<12]; b != 0 {
				seen = append(seen, int(b))
			}
		}
		if strict, _ := obj.Bool("strict"); strict && len(seen) > 1 {
			return errors.New("found what another record wrote")
		}
		return out.Send("out", rec.Key(), wire.Object{"seen": seen})
	})
}

func main() {}
