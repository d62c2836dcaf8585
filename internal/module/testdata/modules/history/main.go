// Command history writes what a module should not depend on: how many
// records its instance has seen, and the partition its instance was set
// up with, beside the record's own partition. A test of transform test
// tells, by these, which instance ran a record.
package main

import (
	"github.com/flecht-dev/flecht/sdk/transform"
	"github.com/flecht-dev/flecht/sdk/wire"
)

var (
	output         string
	setupPartition int32
	seen           int
)

func init() {
	transform.OnSetup(func(s transform.Setup) error {
		output, setupPartition = s.OutputTopics[0], s.Partition
		return nil
	})
	transform.Handle(func(rec *transform.Record, out *transform.Output) error {
		seen++
		return out.Send(output, rec.Key(), wire.Object{
			"seen": seen, "setup_partition": int(setupPartition), "partition": int(rec.Partition()),
		})
	})
}

func main() {}
