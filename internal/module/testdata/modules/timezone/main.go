// Command timezone converts each record's event time to the zone its
// value names ("zone"), through time.LoadLocation and the zone database
// it embeds (time/tzdata): the conversion a module can rely on.
package main

import (
	"time"
	_ "time/tzdata"

	"github.com/flecht-dev/flecht/sdk/transform"
	"github.com/flecht-dev/flecht/sdk/wire"
)

func init() {
	transform.Handle(func(rec *transform.Record, out *transform.Output) error {
		v, err := rec.Object()
		if err != nil || v == nil {
			return transform.Reject("not an object")
		}
		zone, _ := v.String("zone")
		loc, err := time.LoadLocation(zone)
		if err != nil {
			return transform.Reject("%v", err)
		}
		local := rec.Time().In(loc)
		return out.Send("out", rec.Key(), wire.Object{"local": local.Format("2006-01-02T15:04:05.000 MST -07:00"), "zone": local.Location().String()})
	})
}

func main() {}
