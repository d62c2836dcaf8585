// Command hoarder keeps what it should not: every record's value is
// decoded for "grow_mib", and that many MiB are allocated and kept in a
// package variable, with a count of the records handled. Each output
// says what the instance holds, so a test sees whether each record ran on
// the instance as it was after setup (docs/modules.md, record isolation):
// then every output reads handled 1, and memory never runs out however
// many records come.
package main

import (
	"github.com/flecht-dev/flecht/sdk/transform"
	"github.com/flecht-dev/flecht/sdk/wire"
)

var (
	handled int
	kept    [][]byte
)

func init() {
	transform.Handle(func(rec *transform.Record, out *transform.Output) error {
		handled++
		obj, err := rec.Object()
		if err != nil {
			return err
		}
		grow, _ := obj.Int("grow_mib")
		b := make([]byte, grow<<20)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1 // touch every page, as a real allocation's use would
		}
		kept = append(kept, b)
		total := 0
		for _, k := range kept {
			total += len(k)
		}
		return out.Send("out", rec.Key(), wire.Object{
			"handled":  handled,
			"kept_mib": total >> 20,
			"size":     len(rec.Value()),
		})
	})
}

func main() {}
