// Command readsfile reads a file of the host's: refused before it runs.
package main

import (
	"os"

	"github.com/flecht-dev/flecht/sdk/transform"
)

func init() {
	transform.Handle(func(rec *transform.Record, out *transform.Output) error {
		b, err := os.ReadFile("/etc/hostname")
		if err != nil {
			return err
		}
		return out.Send("out", rec.Key(), b)
	})
}

func main() {}
